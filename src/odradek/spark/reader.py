"""Batch and streaming readers of the `odradek` Spark source.

Owns:
- `OffsetRangePartition`: one Spark task = one offset range of one topic-partition. PySpark runs
  `read()` on a pickled copy of the reader in an executor, so the partition carries everything the
  task needs: topic, partition, range, bootstrap servers, and the read settings.
- `read_partition`: the task body. It opens its own connection, fetches the range from the leader
  and yields `pyarrow.RecordBatch`es in the declared schema, one per fetch response (no per-row
  Python tuples).
- `BatchReader` (`spark.read`): ranges from the starting to the ending offsets, resolved once on
  the driver when Spark plans the scan.
- `StreamReader` (`spark.readStream`): offsets are canonical JSON (odradek.spark.offsets);
  `latestOffset` discovers partitions on every trigger (new partitions are read from their start),
  applies admission control (`maxOffsetsPerTrigger` via `ReadMaxRows`) and, after
  `prepareForTriggerAvailableNow`, never goes past the offsets recorded then.

Invariants: the driver-side objects hold no socket between calls (every call opens and closes a
client), because PySpark may pickle them or never call `stop()`. Offsets handed to Spark are always
canonical, so unchanged offsets serialize to the same JSON.

Callers: PySpark, through odradek.spark.source.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from odradek.client import KafkaClient, read_range
from odradek.client.types import TopicPartition
from odradek.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    from_offset_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from odradek.spark.options import EARLIEST, LATEST, SourceOptions
from odradek.spark.planner import report_data_loss, resolve_offsets, subscribed_partitions
from odradek.spark.schema import to_record_batch


@dataclass(frozen=True, slots=True)
class OffsetRangePartition(InputPartition):
    """Everything one read task needs, picklable."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    bootstrap_servers: str
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def to_input_partitions(ranges: Sequence[OffsetRange], options: SourceOptions) -> list[OffsetRangePartition]:
    return [
        OffsetRangePartition(
            topic=r.topic_partition.topic,
            partition=r.topic_partition.partition,
            from_offset=r.from_offset,
            until_offset=r.until_offset,
            bootstrap_servers=options.bootstrap_servers,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
        )
        for r in split_ranges(ranges, options.min_partitions)
    ]


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of one planned range as Arrow batches (nothing for Spark's empty placeholder)."""
    if not isinstance(partition, OffsetRangePartition):
        return
    tp = partition.topic_partition

    def on_data_loss(message: str) -> None:
        report_data_loss([message], partition.fail_on_data_loss)

    with KafkaClient(partition.bootstrap_servers) as client:
        chunks = read_range(
            client,
            tp,
            partition.from_offset,
            partition.until_offset,
            on_data_loss=on_data_loss,
            poll_timeout_ms=partition.poll_timeout_ms,
        )
        for columns in chunks:
            yield to_record_batch(columns, tp, partition.include_headers)


class BatchReader(DataSourceReader):
    """`spark.read.format("odradek")`: one task per (piece of a) partition's offset range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        with KafkaClient(opts.bootstrap_servers) as client:
            tps = subscribed_partitions(client, opts.subscription)
            start = resolve_offsets(
                client,
                tps,
                opts.starting,
                starting=True,
                timestamp_not_found_latest=opts.timestamp_not_found_latest,
            )
            end = resolve_offsets(client, tps, opts.ending, starting=False)
        ranges, losses = plan_ranges(start, end, {})
        report_data_loss(losses, opts.fail_on_data_loss)
        return list(to_input_partitions(ranges, opts))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("odradek")`: micro-batches between checkpointed offset JSONs."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def initialOffset(self) -> dict:
        opts = self.options
        with KafkaClient(opts.bootstrap_servers) as client:
            tps = subscribed_partitions(client, opts.subscription)
            start = resolve_offsets(
                client,
                tps,
                opts.starting,
                starting=True,
                timestamp_not_found_latest=opts.timestamp_not_found_latest,
            )
        return to_offset_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        with KafkaClient(self.options.bootstrap_servers) as client:
            self._target = self._latest_offsets(client)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_offset_json(start)
        with KafkaClient(self.options.bootstrap_servers) as client:
            latest = self._latest_offsets(client)
            vanished = [tp for tp in sorted(begin) if tp not in latest]
            report_data_loss(
                (f"partition {tp} vanished; records after offset {begin[tp]} are lost" for tp in vanished),
                self.options.fail_on_data_loss,
            )
            if self._target is not None:
                latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
            self._latest = latest
            if isinstance(limit, ReadMaxRows):
                new = [tp for tp in latest if tp not in begin]
                earliest = client.list_offsets(dict.fromkeys(new, EARLIEST)) if new else {}
                latest = rate_limit({**earliest, **begin}, latest, limit.max_rows)
        return to_offset_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_offset_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = from_offset_json(start), from_offset_json(end)
        new = [tp for tp in finish if tp not in begin]
        earliest: PartitionOffsets = {}
        if new:
            with KafkaClient(self.options.bootstrap_servers) as client:
                earliest = client.list_offsets(dict.fromkeys(new, EARLIEST))
        ranges, losses = plan_ranges(begin, finish, earliest)
        report_data_loss(losses, self.options.fail_on_data_loss)
        return to_input_partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not on the broker."""

    def _latest_offsets(self, client: KafkaClient) -> PartitionOffsets:
        tps = subscribed_partitions(client, self.options.subscription)
        return client.list_offsets(dict.fromkeys(tps, LATEST)) if tps else {}
