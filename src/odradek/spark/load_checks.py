"""Mode-specific checks of a read at `load()`, where Spark's Kafka source makes them.

Spark's Kafka source refuses, when the DataFrame is created, options that are wrong for the kind of
query (a batch `startingOffsets` of latest, `endingOffsets` in a stream, ...) and a user-given
schema. A Python data source's `schema()` runs at `load()` too, but PySpark does not tell it whether
the read is a batch or a stream, so on their own those checks wait for the source's reader: the first
action, or the first micro-batch of a stream.

`check_reads_at_load` wraps PySpark's `DataFrameReader.load` and `DataStreamReader.load` once per
process. After the original `load()` (which has run `schema()` and so the checks common to both
kinds), the wrapper looks for `odradek` reads in the new DataFrame's logical plan - Spark 4's
`UnresolvedDataSource` leaf, which carries the format, the options, whether the read streams and
the user-given schema - and runs the rules of that kind of read (odradek.spark.options,
odradek.spark.schema). A refusal is an `OptionError` naming the option, raised by `load()`.

Fallback: on a plan it does not recognise (another Spark version, a DataFrame without a JVM plan as
under Spark Connect) it checks nothing, and the same rules still fail later, in the source itself.
Invariants: idempotent (installed once); reads of other formats are untouched; never contacts a
broker. Callers: odradek.spark.register.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StructType

from odradek.spark.options import parse_source_options
from odradek.spark.schema import check_fixed_schema

_MARK = "_odradek_load_checks"
_FORMAT = "odradek"


def check_reads_at_load() -> None:
    """Install the `load` wrappers on PySpark's batch and stream readers (once)."""
    for reader in (DataFrameReader, DataStreamReader):
        if not getattr(reader.load, _MARK, False):
            reader.load = _checked(reader.load)  # type: ignore[method-assign]


def _checked(load: Callable[..., DataFrame]) -> Callable[..., DataFrame]:
    @functools.wraps(load)
    def checked_load(self: Any, *args: Any, **kwargs: Any) -> DataFrame:
        df = load(self, *args, **kwargs)
        for options, streaming, user_schema in _odradek_reads(df):
            parsed = parse_source_options(options, streaming=streaming)
            if user_schema is not None:
                check_fixed_schema(user_schema, parsed.include_headers)
        return df

    setattr(checked_load, _MARK, True)
    return checked_load


def _odradek_reads(df: DataFrame) -> Iterator[tuple[dict[str, str], bool, StructType | None]]:
    """(options, streaming, user schema) of each `odradek` read the plan of `df` starts from."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    leaves = jdf.queryExecution().logical().collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() != "UnresolvedDataSource" or leaf.format().lower() != _FORMAT:
            continue
        converters = df.sparkSession._jvm.scala.jdk.javaapi.CollectionConverters
        options = dict(converters.asJava(leaf.options().originalMap()))
        given = leaf.userSpecifiedSchema()
        schema = StructType.fromJson(json.loads(given.get().json())) if given.isDefined() else None
        yield options, bool(leaf.isStreaming()), schema
