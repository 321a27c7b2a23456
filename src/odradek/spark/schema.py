"""The row schema of the Spark source, in Spark and in Arrow, and the column-to-Arrow conversion.

Owns Spark's Kafka source schema: `key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int`, plus `headers array<struct<key: string,
value: binary>>` when `includeHeaders` is true. Every field is nullable, as in Spark's Kafka source.

Invariant: the Arrow schema here is exactly what PySpark derives from the Spark schema
(`to_arrow_schema(schema, timezone="UTC")`: timestamps in microseconds UTC, list items named
"element", all nullable), because PySpark refuses a yielded RecordBatch whose schema differs.
`timestampType` is 0 for CreateTime and 1 for LogAppendTime.

Callers: odradek.spark.source (driver: schema) and odradek.spark.reader (executors: batches).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.client.types import TopicPartition
from odradek.protocol.records.record import RecordColumns
from odradek.spark.options import OptionError

_HEADER_SPARK = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
_BASE_SPARK = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

_HEADER_ARROW = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_HEADERS_ARROW = pa.list_(pa.field("element", _HEADER_ARROW))
_TIMESTAMP_ARROW = pa.timestamp("us", tz="UTC")
_BASE_ARROW = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TIMESTAMP_ARROW),
    pa.field("timestampType", pa.int32()),
]


def spark_schema(include_headers: bool) -> StructType:
    """The Spark schema of a read, with `headers` last when asked for."""
    fields = list(_BASE_SPARK)
    if include_headers:
        fields.append(StructField("headers", ArrayType(_HEADER_SPARK)))
    return StructType(fields)


def check_fixed_schema(schema: StructType, with_headers: bool) -> None:
    """Refuse a read schema other than Spark's Kafka source schema (raises OptionError)."""
    if schema != spark_schema(with_headers):
        raise OptionError(
            "the odradek source has a fixed schema and cannot be read with another one:"
            f" {schema.simpleString()}"
        )


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects for `spark_schema(include_headers)`."""
    fields = list(_BASE_ARROW)
    if include_headers:
        fields.append(pa.field("headers", _HEADERS_ARROW))
    return pa.schema(fields)


def to_record_batch(columns: RecordColumns, tp: TopicPartition, include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch of `tp`'s decoded records, in the read schema."""
    count = len(columns.offsets)
    millis = pa.array(columns.timestamps, pa.int64())
    arrays = [
        pa.array(columns.keys, pa.binary()),
        pa.array(columns.values, pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), count),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), count),
        pa.array(columns.offsets, pa.int64()),
        pc.multiply(millis, 1000).cast(_TIMESTAMP_ARROW),
        pa.array(columns.timestamp_types, pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(columns.headers, _HEADERS_ARROW))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))
