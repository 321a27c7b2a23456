"""Batch and streaming readers of the `odradek` Spark source.

Owns:
- `OffsetRangePartition`: one Spark task = one offset range of one topic-partition. PySpark runs
  `read()` on a pickled copy of the reader in an executor, so the partition carries everything the
  task needs: topic, partition, range, connection settings, and the read settings.
- `read_partition`: the task body. It opens its own connection, fetches the range from the leader
  (`kafka.fetch.max.bytes` per fetch, answered once `kafka.fetch.min.bytes` are there or
  `kafka.fetch.max.wait.ms` passed) and yields `pyarrow.RecordBatch`es in the declared schema, one
  per fetch response, cut to at most `kafka.max.poll.records` rows (no per-row Python tuples).
- `BatchReader` (`spark.read`): ranges from the starting to the ending offsets, resolved once on
  the driver when Spark plans the scan; a start past its end fails the read.
- `StreamReader` (`spark.readStream`): offsets are canonical JSON (odradek.spark.offsets);
  `latestOffset` discovers partitions on every trigger (new partitions are read from their start),
  applies admission control (`maxOffsetsPerTrigger` via `ReadMaxRows`; `minOffsetsPerTrigger` /
  `maxTriggerDelay` here, with Spark's rule: a trigger with fewer new records than the minimum
  returns its start offsets, unless `maxTriggerDelay` passed since the last batch began - and, since
  no batch ran yet, the first trigger of a run never waits) and, after
  `prepareForTriggerAvailableNow`, never goes past the offsets recorded then (the minimum does not
  apply there: AvailableNow reads everything up to those offsets). A subscribed topic deleted after
  this run of the query read from it is data loss (`failOnDataLoss` decides) on the trigger that
  finds it gone, and is left out from then on; a subscribed topic that does not exist and that no
  offsets of this run named fails the query, as Spark's source does.

Invariants: the driver-side objects hold no socket between calls (every call opens and closes a
client), because PySpark may pickle them or never call `stop()`. Offsets handed to Spark are always
canonical, so unchanged offsets serialize to the same JSON. The stream reader's options are parsed
when it is built but a bad option is raised from its first call, never from the constructor:
PySpark's streaming runner turns an error raised while building the reader into an unrelated one.

Callers: PySpark, through odradek.spark.source.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.client import KafkaClient, read_range
from odradek.client.types import TopicPartition
from odradek.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    backlog,
    from_offset_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from odradek.spark.options import (
    EARLIEST,
    LATEST,
    ClientSettings,
    OptionError,
    SourceOptions,
    parse_source_options,
)
from odradek.spark.planner import (
    check_batch_ranges,
    report_data_loss,
    resolve_offsets,
    subscribed_partitions,
    with_retries,
)
from odradek.spark.schema import check_fixed_schema, to_record_batch


@dataclass(frozen=True, slots=True)
class OffsetRangePartition(InputPartition):
    """Everything one read task needs, picklable."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    client: ClientSettings
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    max_poll_records: int | None
    fetch_max_bytes: int
    fetch_min_bytes: int
    fetch_max_wait_ms: int

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
            client=options.client,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
            max_poll_records=options.max_poll_records,
            fetch_max_bytes=options.fetch_max_bytes,
            fetch_min_bytes=options.fetch_min_bytes,
            fetch_max_wait_ms=options.fetch_max_wait_ms,
        )
        for r in split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    ]


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of one planned range as Arrow batches (nothing for Spark's empty placeholder)."""
    if not isinstance(partition, OffsetRangePartition):
        return
    tp = partition.topic_partition

    def on_data_loss(message: str) -> None:
        report_data_loss([message], partition.fail_on_data_loss)

    with partition.client.connect() as client:
        chunks = read_range(
            client,
            tp,
            partition.from_offset,
            partition.until_offset,
            on_data_loss=on_data_loss,
            poll_timeout_ms=partition.poll_timeout_ms,
            max_bytes=partition.fetch_max_bytes,
            min_bytes=partition.fetch_min_bytes,
            max_wait_ms=partition.fetch_max_wait_ms,
        )
        for columns in chunks:
            batch = to_record_batch(columns, tp, partition.include_headers)
            step = partition.max_poll_records or batch.num_rows
            for begin in range(0, batch.num_rows, step):
                yield batch.slice(begin, step)


class BatchReader(DataSourceReader):
    """`spark.read.format("odradek")`: one task per (piece of a) partition's offset range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        opts = self.options

        def bounds(client: KafkaClient) -> tuple[PartitionOffsets, PartitionOffsets]:
            tps = subscribed_partitions(client, opts.subscription)
            start = resolve_offsets(
                client,
                tps,
                opts.starting,
                starting=True,
                timestamp_not_found_latest=opts.timestamp_not_found_latest,
            )
            return start, resolve_offsets(client, tps, opts.ending, starting=False)

        start, end = with_retries(opts, bounds)
        check_batch_ranges(start, end)
        ranges, losses = plan_ranges(start, end, {})
        report_data_loss(losses, opts.fail_on_data_loss)
        return list(to_input_partitions(ranges, opts))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("odradek")`: micro-batches between checkpointed offset JSONs."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._parsed: SourceOptions | OptionError
        try:
            self._parsed = parse_source_options(options, streaming=True)
            check_fixed_schema(schema, self._parsed.include_headers)
        except OptionError as exc:
            self._parsed = exc
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_trigger_s = 0.0
        self._read_topics: set[str] = set()

    @property
    def options(self) -> SourceOptions:
        if isinstance(self._parsed, OptionError):
            raise self._parsed
        return self._parsed

    def initialOffset(self) -> dict:
        opts = self.options

        def start(client: KafkaClient) -> PartitionOffsets:
            tps = subscribed_partitions(client, opts.subscription)
            return resolve_offsets(
                client,
                tps,
                opts.starting,
                starting=True,
                timestamp_not_found_latest=opts.timestamp_not_found_latest,
            )

        return to_offset_json(with_retries(opts, start))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.limits.max_offsets
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = with_retries(self.options, self._latest_offsets)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_offset_json(start)
        self._read_topics.update(tp.topic for tp in begin)
        latest = with_retries(self.options, lambda client: self._latest_offsets(client, self._read_topics))
        vanished = [tp for tp in sorted(begin) if tp not in latest]
        report_data_loss(
            (f"partition {tp} vanished; records after offset {begin[tp]} are lost" for tp in vanished),
            self.options.fail_on_data_loss,
        )
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
        self._latest = latest
        if self._waits_for_more(begin, latest):
            return to_offset_json(begin)
        if isinstance(limit, ReadMaxRows):
            earliest = self._earliest_of([tp for tp in latest if tp not in begin])
            latest = rate_limit({**earliest, **begin}, latest, limit.max_rows)
        return to_offset_json(latest)

    def _waits_for_more(self, begin: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """`minOffsetsPerTrigger`: hold this trigger back (Spark's rule, see the module header)."""
        limits = self.options.limits
        if limits.min_offsets is None or self._target is not None:
            return False
        now = time.time()
        waited_ms = (now - self._last_trigger_s) * 1000
        if waited_ms < limits.max_delay_ms and backlog(begin, latest) < limits.min_offsets:
            return True
        self._last_trigger_s = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_offset_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = from_offset_json(start), from_offset_json(end)
        earliest = self._earliest_of([tp for tp in finish if tp not in begin])
        ranges, losses = plan_ranges(begin, finish, earliest)
        report_data_loss(losses, self.options.fail_on_data_loss)
        return to_input_partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not on the broker."""

    def _earliest_of(self, new: list[TopicPartition]) -> PartitionOffsets:
        """The log start offsets of partitions the stream has not read yet."""
        if not new:
            return {}
        return with_retries(self.options, lambda client: client.list_offsets(dict.fromkeys(new, EARLIEST)))

    def _latest_offsets(self, client: KafkaClient, known: Collection[str] = ()) -> PartitionOffsets:
        tps = subscribed_partitions(client, self.options.subscription, known=known)
        return client.list_offsets(dict.fromkeys(tps, LATEST)) if tps else {}
