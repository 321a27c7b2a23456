"""The `odradek` PySpark data source: the class Spark instantiates for every read and write.

Owns the mapping from Spark's entry points to this package: `schema()` (Spark's Kafka source schema,
with `headers` when `includeHeaders` is true), `reader()` / `streamReader()` (odradek.spark.reader),
`writer()` / `streamWriter()` (odradek.spark.writer).

When options are checked, the earliest PySpark allows:
- `schema()` runs at `spark.read...load()` / `spark.readStream...load()`; it checks every source
  option that means the same in batch and streaming, so a bad value fails `load()`;
- the batch-only and streaming-only rules and a user-given schema are checked at `load()` by the
  wrapper odradek.spark.load_checks installs; here they are checked again, for reads that wrapper
  does not see (Spark Connect): `reader()` adds the batch-only rules (runs when the first action
  plans the scan), and the streaming-only ones (no `endingOffsets`) fail the query's first step,
  because `streamReader()` must not raise (see reader.py);
- `writer()` / `streamWriter()` check the sink options and the DataFrame's schema at `save()` /
  `start()`.

One-line errors: PySpark hides Python tracebacks (`spark.sql.execution.pyspark.udf.hideTraceback.enabled`,
set by odradek.spark.register) through the environment variable SPARK_HIDE_TRACEBACK of its workers,
but does not give it to the process that runs a streaming source. The data source, created where the
variable is set, remembers it and sets it in that process when Spark asks for the stream reader (a
process that serves this one source alone).

The source has a fixed schema: a user-specified one is refused, as Spark's Kafka source refuses it.
The sink refuses save mode Overwrite, as Spark's Kafka sink does (Append and the default
ErrorIfExists are accepted; odradek.spark.register sees to the latter); a stream in any output mode
appends its rows, as Spark's Kafka sink does.
Callers: PySpark (after `odradek.spark.register(spark)`).
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.options import OptionError, include_headers, parse_sink_options, parse_source_options
from odradek.spark.reader import BatchReader, StreamReader
from odradek.spark.schema import check_fixed_schema, spark_schema
from odradek.spark.writer import BatchWriter, StreamWriter, sink_layout

_HIDE_TRACEBACK_ENV = "SPARK_HIDE_TRACEBACK"


class OdradekDataSource(DataSource):
    """Batch and streaming source and sink for odradek (and any Kafka broker)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.hide_traceback = bool(os.environ.get(_HIDE_TRACEBACK_ENV))

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        parse_source_options(self.options, streaming=None)
        return spark_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> BatchReader:
        options = parse_source_options(self.options, streaming=False)
        check_fixed_schema(schema, options.include_headers)
        return BatchReader(options)

    def streamReader(self, schema: StructType) -> StreamReader:
        if self.hide_traceback:
            os.environ[_HIDE_TRACEBACK_ENV] = "1"
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        options = parse_sink_options(self.options)
        _refuse_overwrite(overwrite)
        return BatchWriter(options, sink_layout(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        """Every output mode appends: in complete mode Spark asks to truncate first, which Spark's
        Kafka sink (and this one) cannot do to a topic, so each micro-batch's rows are appended."""
        options = parse_sink_options(self.options)
        return StreamWriter(options, sink_layout(schema, options))


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "save mode Overwrite is not allowed for odradek: allowed save modes are Append and"
            " ErrorIfExists (default), as for Spark's Kafka sink"
        )
