"""Canonical offset JSON and the pure planning rules (ranges, minPartitions, maxOffsetsPerTrigger)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from odradek.client.types import TopicPartition
from odradek.spark.offsets import (
    OffsetRange,
    backlog,
    canonical,
    from_offset_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_offset_json,
)

A0, A1, A10, B0 = (
    TopicPartition("a", 0),
    TopicPartition("a", 1),
    TopicPartition("a", 10),
    TopicPartition("b", 0),
)


def test_offset_json_is_sorted_with_string_partition_keys() -> None:
    text = json.dumps(to_offset_json({B0: 5, A10: 7, A1: 3, A0: 1}))
    assert text == '{"a": {"0": 1, "1": 3, "10": 7}, "b": {"0": 5}}'


@given(st.dictionaries(st.tuples(st.sampled_from("xyz"), st.integers(0, 50)), st.integers(0, 10**12)))
def test_offset_json_round_trips_and_is_order_independent(raw: dict[tuple[str, int], int]) -> None:
    offsets = {TopicPartition(t, p): o for (t, p), o in raw.items()}
    shuffled = dict(reversed(list(offsets.items())))
    assert from_offset_json(to_offset_json(offsets)) == offsets
    assert json.dumps(to_offset_json(shuffled)) == json.dumps(to_offset_json(offsets))
    assert json.dumps(canonical(json.loads(json.dumps(to_offset_json(shuffled))))) == json.dumps(
        to_offset_json(offsets)
    )


def test_plan_ranges_reads_new_partitions_from_their_start() -> None:
    ranges, losses = plan_ranges({A0: 5}, {A0: 9, A1: 4}, {A1: 0})
    assert ranges == [OffsetRange(A0, 5, 9), OffsetRange(A1, 0, 4)]
    assert losses == []


def test_plan_ranges_reports_every_kind_of_data_loss() -> None:
    ranges, losses = plan_ranges({A0: 5, B0: 3}, {A0: 2, A1: 9}, {A1: 4})
    assert ranges == [OffsetRange(A1, 4, 9)]
    assert len(losses) == 3
    assert any("b-0 vanished" in m for m in losses)
    assert any("a-1 starts from offset 4" in m for m in losses)
    assert any("end offset 2 is before its start offset 5" in m for m in losses)


def test_split_ranges_keeps_one_task_per_partition_when_enough() -> None:
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 5, 5), OffsetRange(B0, 0, 10)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]
    assert split_ranges(ranges, 2) == [ranges[0], ranges[2]]


def test_split_ranges_cuts_big_partitions_proportionally() -> None:
    pieces = split_ranges([OffsetRange(A0, 0, 90), OffsetRange(B0, 0, 10)], 10)
    a_pieces = [p for p in pieces if p.topic_partition == A0]
    assert len(a_pieces) == 9 and [p.size for p in a_pieces] == [10] * 9
    assert [p for p in pieces if p.topic_partition == B0] == [OffsetRange(B0, 0, 10)]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=6),
    st.integers(1, 40),
)
def test_split_ranges_covers_each_range_exactly_once(
    bounds: list[tuple[int, int]], min_partitions: int
) -> None:
    ranges = [OffsetRange(TopicPartition("t", i), lo, lo + size) for i, (lo, size) in enumerate(bounds)]
    pieces = split_ranges(ranges, min_partitions)
    for r in ranges:
        mine = [p for p in pieces if p.topic_partition == r.topic_partition]
        assert all(p.size > 0 for p in mine)
        covered = [o for p in mine for o in range(p.from_offset, p.until_offset)]
        assert covered == list(range(r.from_offset, r.until_offset))


def test_max_records_per_partition_caps_every_task() -> None:
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(B0, 5, 7)]
    pieces = split_ranges(ranges, None, 4)
    assert [(p.topic_partition, p.from_offset, p.until_offset) for p in pieces] == [
        (A0, 0, 3),
        (A0, 3, 6),
        (A0, 6, 10),
        (B0, 5, 7),
    ]
    assert max(p.size for p in split_ranges(ranges, 6, 2)) <= 2


def test_backlog_counts_new_partitions_from_zero() -> None:
    assert backlog({A0: 5}, {A0: 8, B0: 4}) == 7


def test_rate_limit_prorates_by_backlog_and_never_starves() -> None:
    ends = rate_limit({A0: 0, A1: 100, B0: 0}, {A0: 1000, A1: 101, B0: 0}, 100)
    assert ends[A1] == 101  # a 0.099 share rounds up to one record
    assert ends[A0] == 99  # floor(100 * 1000 / 1001)
    assert ends[B0] == 0


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), min_size=1, max_size=8),
    st.integers(1, 10**5),
)
def test_rate_limit_stays_within_start_and_latest(spans: list[tuple[int, int]], limit: int) -> None:
    start = {TopicPartition("t", i): lo for i, (lo, _) in enumerate(spans)}
    latest = {TopicPartition("t", i): lo + n for i, (lo, n) in enumerate(spans)}
    ends = rate_limit(start, latest, limit)
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in latest)
    admitted = sum(ends[tp] - start[tp] for tp in latest)
    backlog = sum(latest[tp] - start[tp] for tp in latest)
    assert admitted <= min(backlog, limit + len(latest))
    assert admitted >= min(backlog, limit) - len(latest)
