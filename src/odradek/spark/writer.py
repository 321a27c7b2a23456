"""Batch and streaming writers of the `odradek` Spark sink.

Owns the sink's contract, which is Spark's Kafka sink's: the DataFrame has a `value` column (string
or binary, required) and optionally `key` (string or binary), `headers`
(array<struct<key: string, value: binary>>), `topic` (string) and `partition` (int). The `topic`
option, when set, overrides the `topic` column (whose type is then not checked, as in Spark);
without either the write is refused. A row with a
non-null `partition` goes there; otherwise a keyed row goes where Kafka's default partitioner (murmur2
of the key) sends it, and an unkeyed row to a sticky partition.

Behaviour: each Spark task opens its own connection, turns its Arrow batches into records, and
produces them with `kafka.acks` (all by default, or 1), in batches of about `kafka.batch.size` bytes
and requests of at most `kafka.max.request.size` bytes (a larger record fails the task),
flushing when `kafka.buffer.memory` bytes are buffered or, with `kafka.linger.ms`, once the oldest
buffered record waited that long (checked after each Arrow batch of rows); the commit message
reports how many records each partition got. A null `topic` in a row without the `topic` option
fails the task with Spark's message, before any row of that Arrow batch is sent. Delivery is
at-least-once, as with Spark's Kafka sink (a retried task writes its rows again).

Callers: PySpark, through odradek.spark.source. Schema validation runs on the driver when Spark asks
for the writer; `write` runs on executors on a pickled copy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.client import TopicPartition
from odradek.client.producer import Producer
from odradek.spark.options import OptionError, SinkOptions

_BYTES_TYPES = (StringType, BinaryType)


@dataclass(frozen=True, slots=True)
class SinkLayout:
    """Which optional columns the written DataFrame has."""

    has_key: bool
    has_headers: bool
    has_topic: bool  # the rows' topics come from the `topic` column (no `topic` option)
    has_partition: bool


@dataclass(frozen=True)
class ProducedRecords(WriterCommitMessage):
    """What one task wrote: records per partition and the last offset written there."""

    counts: dict[TopicPartition, int] = field(default_factory=dict)
    last_offsets: dict[TopicPartition, int] = field(default_factory=dict)


def sink_layout(schema: StructType, options: SinkOptions) -> SinkLayout:
    """Validate the DataFrame schema against the sink contract (raises OptionError)."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("required attribute 'value' not found in the DataFrame written to odradek")
    _expect(types, "value", _BYTES_TYPES, "string or binary")
    _expect(types, "key", _BYTES_TYPES, "string or binary")
    _expect(types, "partition", (IntegerType,), "int")
    if "headers" in types and not _is_headers_type(types["headers"]):
        raise OptionError("attribute 'headers' must be array<struct<key: string, value: binary>>")
    topic_column = options.topic is None
    if topic_column:
        if "topic" not in types:
            raise OptionError("topic option required when no 'topic' attribute is present")
        _expect(types, "topic", (StringType,), "string")
    return SinkLayout("key" in types, "headers" in types, topic_column, "partition" in types)


def _expect(types: dict[str, DataType], name: str, allowed: tuple[type, ...], described: str) -> None:
    if name in types and not isinstance(types[name], allowed):
        raise OptionError(f"attribute '{name}' must be {described}, got {types[name].simpleString()}")


def _is_headers_type(dtype: DataType) -> bool:
    if not isinstance(dtype, ArrayType) or not isinstance(dtype.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in dtype.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType)
    )


def _as_bytes(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def write_batches(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, layout: SinkLayout
) -> ProducedRecords:
    """Produce every row of `batches`; the body of one sink task."""
    counts: dict[TopicPartition, int] = {}
    last: dict[TopicPartition, int] = {}
    with options.client.connect() as client:
        producer = Producer(
            client,
            acks=options.acks,
            compression=options.compression,
            batch_bytes=options.batch_bytes,
            buffer_bytes=options.buffer_bytes,
            max_request_bytes=options.max_request_bytes,
        )
        buffered_since: float | None = None
        for batch in batches:
            buffered_since = buffered_since or time.monotonic()
            _send_batch(producer, batch, options, layout, counts)
            if (
                options.linger_ms is not None
                and (time.monotonic() - buffered_since) * 1000 >= options.linger_ms
            ):
                last.update(producer.flush())
                buffered_since = None
        last.update(producer.flush())
    return ProducedRecords(counts, last)


NULL_TOPIC_MESSAGE = "null topic present in the data. Use the topic option for setting a default topic."


def _send_batch(
    producer: Producer,
    batch: pa.RecordBatch,
    options: SinkOptions,
    layout: SinkLayout,
    counts: dict[TopicPartition, int],
) -> None:
    n = batch.num_rows
    if layout.has_topic and batch.column("topic").null_count:
        raise ValueError(NULL_TOPIC_MESSAGE)
    values = _as_bytes(batch.column("value"))
    keys = _as_bytes(batch.column("key")) if layout.has_key else [None] * n
    headers = batch.column("headers").to_pylist() if layout.has_headers else [None] * n
    topics = batch.column("topic").to_pylist() if layout.has_topic else [options.topic] * n
    partitions = batch.column("partition").to_pylist() if layout.has_partition else [None] * n
    for value, key, row_headers, topic, partition in zip(
        values, keys, headers, topics, partitions, strict=True
    ):
        pairs = [(h["key"], h["value"]) for h in row_headers] if row_headers else ()
        tp = producer.send(topic, value, key, pairs, partition)
        counts[tp] = counts.get(tp, 0) + 1


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("odradek")`."""

    def __init__(self, options: SinkOptions, layout: SinkLayout) -> None:
        self.options, self.layout = options, layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return write_batches(iterator, self.options, self.layout)


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("odradek")`: each micro-batch is produced like a batch write."""

    def __init__(self, options: SinkOptions, layout: SinkLayout) -> None:
        self.options, self.layout = options, layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return write_batches(iterator, self.options, self.layout)
