"""The `odradek` PySpark data source: the class Spark instantiates for every read and write.

Owns the mapping from Spark's entry points to this package: `schema()` (Spark's Kafka source schema,
with `headers` when `includeHeaders` is true), `reader()` / `streamReader()` (odradek.spark.reader),
`writer()` / `streamWriter()` (odradek.spark.writer). Options are validated here, on the driver, so a
bad option fails the query before any task runs.

The source has a fixed schema: a user-specified one is refused, as Spark's Kafka source refuses it.
The sink appends only: Spark's overwrite mode is refused, as Spark's Kafka sink refuses it.
Callers: PySpark (after `odradek.spark.register(spark)`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.options import OptionError, include_headers, parse_sink_options, parse_source_options
from odradek.spark.reader import BatchReader, StreamReader
from odradek.spark.schema import spark_schema
from odradek.spark.writer import BatchWriter, StreamWriter, sink_layout


class OdradekDataSource(DataSource):
    """Batch and streaming source and sink for odradek (and any Kafka broker)."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        return spark_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> BatchReader:
        options = parse_source_options(self.options, streaming=False)
        _check_fixed_schema(schema, options.include_headers)
        return BatchReader(options)

    def streamReader(self, schema: StructType) -> StreamReader:
        options = parse_source_options(self.options, streaming=True)
        _check_fixed_schema(schema, options.include_headers)
        return StreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        options = parse_sink_options(self.options)
        _refuse_overwrite(overwrite)
        return BatchWriter(options, sink_layout(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = parse_sink_options(self.options)
        _refuse_overwrite(overwrite)
        return StreamWriter(options, sink_layout(schema, options))


def _check_fixed_schema(schema: StructType, with_headers: bool) -> None:
    if schema != spark_schema(with_headers):
        raise OptionError(
            "the odradek source has a fixed schema and cannot be read with another one:"
            f" {schema.simpleString()}"
        )


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("save mode Overwrite is not allowed for odradek: records can only be appended")
