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

Exactly once (`exactlyOnce` = true): a two-phase commit of Kafka transactions. Each task writes
its rows in one transaction (odradek.client.transactions) whose transactional id is
`<transactionalIdPrefix>-<query id>-<partition id>`, and leaves it open; Spark's driver, once every
task of the micro-batch succeeded, commits them all (`commit(messages, batchId)`: one EndTxn per
task, from the ids in the commit messages) or, when the micro-batch failed, aborts them. The query
id is the one Spark keeps in the checkpoint, read on the executor from the task's local property
`sql.streaming.queryId`, as is the micro-batch id (`streaming.sql.batchId`); Spark's
MicroBatchExecution sets both for every task of a micro-batch. A batch write (`df.write`) has no
query: its ids use a random write id drawn when Spark asks for the writer, and batch id 0.
A task:
1. InitProducerId with its transactional id: this fences every earlier attempt of the same task (a
   zombie attempt, or one a killed driver left behind) and settles the transaction such an attempt
   left: aborted if it was open, completed if its commit had already been decided;
2. reads the committed offsets of the group named like the transactional id (OffsetFetch,
   require_stable): if one is at least this micro-batch's id, this task's rows of this micro-batch
   were committed before, and the task writes nothing;
3. otherwise produces its rows in the transaction and adds to it the offset "batch id" of that group
   (on the first partition it wrote to; TxnOffsetCommit, metadata naming the batch), then returns
   the transaction's ids (transactional id, producer id, epoch) in its commit message.
Rows and mark become visible together when the driver commits, or never. A micro-batch that Spark
replays because the driver died before the checkpoint's commit log recorded it (even halfway
through its EndTxn calls) is written again by exactly the tasks whose transaction was not
committed: the others find their mark. So read_committed consumers see every row once.
Why not commit in the task (EndTxn at the end of `write`, which would let rows show up sooner and
no transaction stay open across tasks): a Python sink task cannot tell the end of its input from
its input cut short. When the task fails upstream of the sink (an exception in a UDF feeding it),
the sink's `write` still sees its iterator end normally and returns; committing there would make a
part of the task's rows visible and mark the batch done, so the retried attempt would skip the rest
(tests/spark/test_sink_exactly_once.py has this case). Only the driver knows which attempts
succeeded.
Requirements and costs (docs/spark.md): a replayed micro-batch gives every partition id the same
rows as the first run (true of deterministic plans: the source replays the offset ranges of the
checkpoint's offset log); a micro-batch must finish within the transaction timeout
(`kafka.transaction.timeout.ms`, default 60 s), else the coordinator aborts its transactions and the
driver's commit fails the query; read_committed readers of the target partitions wait until the
micro-batch is committed; the marks live as long as the broker keeps committed offsets of an empty
group (offsets.retention.minutes). Per task and micro-batch: InitProducerId, OffsetFetch,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and (driver) EndTxn, one transaction marker
per written partition; one consumer group per partition id of the query.

Callers: PySpark, through odradek.spark.source. Schema validation runs on the driver when Spark asks
for the writer; `write` runs on executors on a pickled copy.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
from odradek.client.transactions import TransactionalProducer, committed_offsets, end_transaction
from odradek.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

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
    """What one task wrote: records per partition and the last offset written there, and with
    exactlyOnce the transaction they are in."""

    counts: dict[TopicPartition, int] = field(default_factory=dict)
    last_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    transaction: OpenTransaction | None = None  # exactly once: the task's transaction, to commit
    already_written: bool = False  # exactly once: this task's rows of the micro-batch were committed before


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """The ids the driver needs to end a task's transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


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
    with options.client.connect() as client:
        producer = Producer(client, acks=options.acks, **_producer_settings(options))
        last = _produce_rows(producer, batches, options, layout, counts)
    return ProducedRecords(counts, last)


def _producer_settings(options: SinkOptions) -> dict[str, Any]:
    """The producer settings every sink task takes from its options."""
    return {
        "compression": options.compression,
        "batch_bytes": options.batch_bytes,
        "buffer_bytes": options.buffer_bytes,
        "max_request_bytes": options.max_request_bytes,
    }


def _produce_rows(
    producer: Producer,
    batches: Iterable[pa.RecordBatch],
    options: SinkOptions,
    layout: SinkLayout,
    counts: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Send every row of `batches`, flushing once the oldest buffered row waited `kafka.linger.ms`
    (checked after each Arrow batch) and at the end; the last offset written per partition."""
    last: dict[TopicPartition, int] = {}
    buffered_since: float | None = None
    for batch in batches:
        buffered_since = buffered_since or time.monotonic()
        _send_batch(producer, batch, options, layout, counts)
        if options.linger_ms is not None and (time.monotonic() - buffered_since) * 1000 >= options.linger_ms:
            last.update(producer.flush())
            buffered_since = None
    last.update(producer.flush())
    return last


def write_transaction(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, layout: SinkLayout, task: TaskTransaction
) -> ProducedRecords:
    """Produce every row of `batches` in one transaction left open for the driver, unless this task's
    rows of this batch were committed before; the body of one exactly-once sink task (module header)."""
    rows = (batch for batch in batches if batch.num_rows)
    first = next(rows, None)
    if first is None:
        return ProducedRecords()
    counts: dict[TopicPartition, int] = {}
    with options.client.connect() as client:
        producer = TransactionalProducer(
            client,
            task.transactional_id,
            transaction_timeout_ms=options.transaction_timeout_ms,
            **_producer_settings(options),
        )
        producer.init_transactions()
        if _last_batch_done(client, task.transactional_id) >= task.batch_id:
            for _ in rows:  # Spark's input is read to its end either way
                pass
            return ProducedRecords(already_written=True)
        producer.begin()
        try:
            last = _produce_rows(producer, itertools.chain((first,), rows), options, layout, counts)
            mark = f"odradek spark sink: batch {task.batch_id} written"
            producer.send_offsets(task.transactional_id, {min(counts): (task.batch_id, mark)})
        except BaseException:
            _abort_quietly(producer)
            raise
    transaction = OpenTransaction(task.transactional_id, producer.producer_id, producer.producer_epoch)
    return ProducedRecords(counts, last, transaction)


def end_transactions(
    options: SinkOptions, messages: Iterable[WriterCommitMessage | None], commit: bool
) -> None:
    """The driver's half: commit (or abort) the transactions the tasks left open. An abort is best
    effort: a transaction it cannot end is aborted by its task's next InitProducerId or its timeout."""
    open_transactions = [
        m.transaction for m in messages if isinstance(m, ProducedRecords) and m.transaction is not None
    ]
    if not open_transactions:
        return
    with options.client.connect() as client:
        for t in open_transactions:
            try:
                end_transaction(client, t.transactional_id, t.producer_id, t.producer_epoch, commit=commit)
            except Exception:
                if commit:
                    raise
                log.warning("could not abort the transaction of %s", t.transactional_id, exc_info=True)


def _last_batch_done(client: KafkaClient, group_id: str) -> int:
    """The highest batch id marked done in `group_id`, -1 if none."""
    return max((c.offset for c in committed_offsets(client, group_id).values()), default=-1)


def _abort_quietly(producer: TransactionalProducer) -> None:
    """Abort after a failure; if that fails too, the next attempt's InitProducerId aborts it."""
    try:
        producer.abort()
    except Exception:  # the original failure is the one to report
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
    """`df.write.format("odradek")`. With exactlyOnce, the driver commits the tasks' transactions once
    every task succeeded (a failed write leaves nothing for read_committed readers; a task attempt
    that failed never counts); another write of the same DataFrame writes the rows again."""

    def __init__(self, options: SinkOptions, layout: SinkLayout) -> None:
        self.options, self.layout = options, layout
        self.write_id = str(uuid.uuid4())

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        if self.options.exactly_once:
            task = batch_task_transaction(self.options, self.write_id)
            return write_transaction(iterator, self.options, self.layout, task)
        return write_batches(iterator, self.options, self.layout)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            end_transactions(self.options, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            end_transactions(self.options, messages, commit=False)


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

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            end_transactions(self.options, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            end_transactions(self.options, messages, commit=False)
