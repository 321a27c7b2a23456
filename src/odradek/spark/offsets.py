"""Offsets and offset ranges of the Spark source: canonical JSON and pure planning.

Owns:
- the offset JSON Spark stores in its checkpoint: `{"topic": {"0": 12, "1": 40}}`, topics in
  lexicographic order, partitions in numeric order, partition keys as strings. Spark decides whether
  a micro-batch has new data by comparing these JSON strings, so the same offsets must always
  serialize to the same text (no phantom progress);
- `OffsetRange`: one partition's [from_offset, until_offset) - the unit of one Spark task;
- the pure planning rules, with Spark's Kafka source semantics: `plan_ranges` (start/end offsets to
  ranges, reporting data loss: vanished partitions, offsets that went backwards, new partitions that
  do not start at 0), `split_ranges` (`minPartitions`, `maxRecordsPerPartition`), `rate_limit`
  (`maxOffsetsPerTrigger`, prorated by each partition's backlog, never starving a small one),
  `backlog` (the new records `minOffsetsPerTrigger` compares with).

No I/O here. Callers: odradek.spark.source, odradek.pipeline, tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.client.types import TopicPartition

PartitionOffsets = dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one topic-partition."""

    topic_partition: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_offset_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical JSON object of per-partition offsets (insertion order is the sorted order)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_offset_json(obj: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """Inverse of `to_offset_json`."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in obj.items()
        for partition, offset in partitions.items()
    }


def canonical(obj: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Re-sort an offset JSON object that went through someone else's hands."""
    return to_offset_json(from_offset_json(obj))


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_partition_start: Mapping[TopicPartition, int],
) -> tuple[list[OffsetRange], list[str]]:
    """Offset ranges from `start` to `end`, plus a description of every data loss seen.

    A partition in `end` but not in `start` is new: it starts at `new_partition_start` (its log start
    offset), and anything but 0 there means records were missed. A partition in `start` but not in
    `end` vanished (its topic was deleted). An end below its start means the offsets went backwards
    (topic recreated, log truncated) or a start was asked beyond the end; that partition is skipped.
    """
    ranges: list[OffsetRange] = []
    losses = [
        f"partition {tp} vanished; records after offset {start[tp]} are lost"
        for tp in sorted(start)
        if tp not in end
    ]
    for tp in sorted(end):
        if tp in start:
            from_offset = start[tp]
        else:
            from_offset = new_partition_start.get(tp, 0)
            if from_offset != 0:
                losses.append(f"added partition {tp} starts from offset {from_offset} instead of 0")
        if end[tp] < from_offset:
            losses.append(f"partition {tp}'s end offset {end[tp]} is before its start offset {from_offset}")
            continue
        ranges.append(OffsetRange(tp, from_offset, end[tp]))
    return ranges, losses


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    """Drop empty ranges; when fewer than `min_partitions` remain, cut the big ones in pieces; then
    cut every piece longer than `max_records` (`maxRecordsPerPartition`) into equal pieces.

    For `min_partitions` each range gets round(size / total * min_partitions) pieces (at least one)
    of near-equal size, so the resulting count is close to `min_partitions` and a big partition is
    read by several tasks.
    """
    pieces = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(pieces) < min_partitions:
        total = sum(r.size for r in pieces)
        pieces = [p for r in pieces for p in _cut(r, max(round(r.size / total * min_partitions), 1))]
    if max_records is not None:
        pieces = [p for r in pieces for p in _cut(r, math.ceil(r.size / max_records))]
    return pieces


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    result: list[OffsetRange] = []
    remaining, begin = r.size, r.from_offset
    for index in range(parts):
        length = remaining // (parts - index)
        remaining -= length
        if length > 0:
            result.append(OffsetRange(r.topic_partition, begin, begin + length))
        begin += length
    return result


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """How many offsets lie between `start` and `latest` (a partition missing from `start` counts
    from 0, as in Spark's `minOffsetsPerTrigger` check)."""
    return sum(end - start.get(tp, 0) for tp, end in latest.items())


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> PartitionOffsets:
    """End offsets admitting about `limit` records, shared out by each partition's backlog.

    `start` must cover every partition of `latest` (new partitions at their log start offset). A
    partition's share is floored, except that a share below one record is rounded up, so a small
    partition is never starved; no end goes past `latest`.
    """
    backlog = {tp: latest[tp] - start[tp] for tp in latest if tp in start and latest[tp] > start[tp]}
    total = sum(backlog.values())
    if total == 0:
        return dict(latest)
    ends: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in backlog:
            ends[tp] = end
            continue
        share = limit * backlog[tp] / total
        admitted = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = min(end, start[tp] + admitted)
    return ends
