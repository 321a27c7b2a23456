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
at-least-once by default, as with Spark's Kafka sink (a retried task writes its rows again).

Exactly once (`exactlyOnce` = true): each task writes its rows in one Kafka transaction
(odradek.client.transactions) whose transactional id is `<transactionalIdPrefix>-<query id>-<partition
id>`. The query id is the one Spark keeps in the checkpoint, read on the executor from the task's
local property `sql.streaming.queryId`, as is the micro-batch id (`streaming.sql.batchId`); both are
set by Spark's MicroBatchExecution for every task of a micro-batch. A batch write (`df.write`) has
no query: its ids use a random write id drawn when Spark asks for the writer, and batch id 0.
A task:
1. InitProducerId with its transactional id: this fences every earlier attempt of the same task (a
   zombie attempt, or the attempt a killed driver left running) and settles the transaction such an
   attempt left: aborted if it was open, completed if its commit had already been decided;
2. reads the committed offsets of the group named like the transactional id (OffsetFetch,
   require_stable): if one is at least this micro-batch's id, this task's rows of this micro-batch
   are already in the topic, and the task writes nothing;
3. otherwise produces its rows in the transaction, adds to it the offset "batch id" of that group (on
   the first partition it wrote to; TxnOffsetCommit, metadata naming the batch), and commits.
The rows and the mark become visible together or not at all, so a micro-batch Spark replays (the
driver died after some or all tasks committed but before the batch reached the checkpoint's commit
log) writes again exactly the tasks that had not committed, and read_committed consumers see every
row once. A task with no rows opens no transaction.
Why commit in the task rather than in the driver (tasks leave transactions open, the driver's
commit(messages, batchId) ends them): a driver killed halfway through its EndTxn calls leaves some
transactions committed and others open, and on replay nothing tells the committed ones apart
without the same mark; meanwhile open transactions hold back the last stable offset of every
partition they touch, for every read_committed reader, until the slowest task of the batch is done,
and they are aborted by the coordinator if the driver commits later than the transaction timeout.
With the mark the task-side commit gives the same guarantee with neither cost; what it gives up is
that a micro-batch's rows of different tasks become visible at slightly different times.
Requirements (documented in docs/spark.md): a replayed micro-batch gives every partition id the
same rows as the first run (true of deterministic plans: the source replays the same offset ranges
from the checkpoint's offset log); the marks are kept as long as the broker keeps committed offsets
of an empty group (offsets.retention.minutes). Costs: one InitProducerId, OffsetFetch,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn per task and micro-batch, one
transaction marker per written partition, and one consumer group per partition id of the query.

Callers: PySpark, through odradek.spark.source. Schema validation runs on the driver when Spark asks
for the writer; `write` runs on executors on a pickled copy.
"""

from __future__ import annotations

import itertools
import time
import uuid
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

from odradek.client import KafkaClient, TopicPartition
from odradek.client.producer import Producer
from odradek.client.transactions import TransactionalProducer, committed_offsets
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
    transactional_id: str | None = None  # exactly once: the task's transactional id
    already_written: bool = False  # exactly once: the micro-batch's rows of this task were committed before


QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class TaskTransaction:
    """Where an exactly-once task's rows go: its transactional id (also the name of the group that
    holds its "batch done" mark) and the id of the micro-batch (0 for a batch write)."""

    transactional_id: str
    batch_id: int


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


def write_transaction(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, layout: SinkLayout, task: TaskTransaction
) -> ProducedRecords:
    """Produce every row of `batches` in one transaction, unless this task's rows of this batch were
    already committed; the body of one exactly-once sink task (see the module header)."""
    rows = (batch for batch in batches if batch.num_rows)
    first = next(rows, None)
    if first is None:
        return ProducedRecords(transactional_id=task.transactional_id)
    counts: dict[TopicPartition, int] = {}
    last: dict[TopicPartition, int] = {}
    with options.client.connect() as client:
        producer = TransactionalProducer(
            client,
            task.transactional_id,
            transaction_timeout_ms=options.transaction_timeout_ms,
            compression=options.compression,
            batch_bytes=options.batch_bytes,
            buffer_bytes=options.buffer_bytes,
            max_request_bytes=options.max_request_bytes,
        )
        producer.init_transactions()
        if _last_batch_done(client, task.transactional_id) >= task.batch_id:
            for _ in rows:  # Spark's input is read to its end either way
                pass
            return ProducedRecords(transactional_id=task.transactional_id, already_written=True)
        producer.begin()
        try:
            buffered_since = time.monotonic()
            for batch in itertools.chain((first,), rows):
                _send_batch(producer, batch, options, layout, counts)
                if (
                    options.linger_ms is not None
                    and (time.monotonic() - buffered_since) * 1000 >= options.linger_ms
                ):
                    last.update(producer.flush())
                    buffered_since = time.monotonic()
            last.update(producer.flush())
            mark = f"odradek spark sink: batch {task.batch_id} written"
            producer.send_offsets(task.transactional_id, {min(counts): (task.batch_id, mark)})
            producer.commit()
        except BaseException:
            _abort_quietly(producer)
            raise
    return ProducedRecords(counts, last, task.transactional_id)


def _last_batch_done(client: KafkaClient, group_id: str) -> int:
    """The highest batch id marked done in `group_id`, -1 if none."""
    return max((c.offset for c in committed_offsets(client, group_id).values()), default=-1)


def _abort_quietly(producer: TransactionalProducer) -> None:
    """Abort after a failure; if that fails too, the next attempt's InitProducerId aborts it."""
    try:
        producer.abort()
    except Exception:  # noqa: BLE001 - the original failure is the one to report
        pass


def stream_task_transaction(options: SinkOptions) -> TaskTransaction:
    """The transaction of the running streaming task, from what Spark tells it (raises OptionError)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
    if context is None or not query_id or batch_id is None:
        raise OptionError(
            "exactlyOnce: this Spark did not tell the sink's task its streaming query id and micro-batch"
            f" id (task local properties {QUERY_ID_PROPERTY!r}, {BATCH_ID_PROPERTY!r})"
        )
    tid = f"{options.transactional_id_prefix}-{query_id}-{context.partitionId()}"
    return TaskTransaction(tid, int(batch_id))


def batch_task_transaction(options: SinkOptions, write_id: str) -> TaskTransaction:
    """The transaction of the running task of the batch write `write_id`."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    return TaskTransaction(f"{options.transactional_id_prefix}-{write_id}-{partition}", 0)


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
    """`df.write.format("odradek")`. With exactlyOnce, every task of this write (its retries
    included) commits its rows once; another write of the same DataFrame writes them again."""

    def __init__(self, options: SinkOptions, layout: SinkLayout) -> None:
        self.options, self.layout = options, layout
        self.write_id = str(uuid.uuid4())

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        if self.options.exactly_once:
            task = batch_task_transaction(self.options, self.write_id)
            return write_transaction(iterator, self.options, self.layout, task)
        return write_batches(iterator, self.options, self.layout)


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("odradek")`: each micro-batch is produced like a batch write, or with
    exactlyOnce in one transaction per task and micro-batch."""

    def __init__(self, options: SinkOptions, layout: SinkLayout) -> None:
        self.options, self.layout = options, layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        if self.options.exactly_once:
            task = stream_task_transaction(self.options)
            return write_transaction(iterator, self.options, self.layout, task)
        return write_batches(iterator, self.options, self.layout)
