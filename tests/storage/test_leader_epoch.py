"""The leader epoch cache: Kafka's lookups and trims, its checkpoint file, and its upkeep by the Log
(append, truncation, retention, recovery and rebuild on open)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records.batch import BatchHeader
from odradek.storage.config import LogConfig
from odradek.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_END_OFFSET,
    EpochEndOffset,
    LeaderEpochFileCache,
)
from odradek.storage.log import Log
from tests.storage.storage_helpers import batch, open_log, slice_bytes


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


# -- the cache alone -----------------------------------------------------------------------------


def test_flush_writes_kafkas_checkpoint_format(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (3, 120))
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()  # changes wait for a flush
    assert cache.dirty
    cache.flush()
    assert not cache.dirty
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochFileCache.read(tmp_path).entries == ((0, 0), (3, 120))  # type: ignore[union-attr]
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()


def test_assign_ignores_the_same_epoch_at_a_later_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0))
    assert cache.assign(0, 50) is False
    assert cache.entries == ((0, 0),)


def test_assign_drops_entries_it_contradicts(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (4, 20))
    cache.assign(3, 15)  # an older epoch than the latest: (4, 20) goes
    assert cache.entries == ((0, 0), (2, 10), (3, 15))
    cache.assign(5, 10)  # a start offset not past the last one: (2, 10) and (3, 15) go
    assert cache.entries == ((0, 0), (5, 10))
    cache.assign(5, 4)  # the same epoch, earlier
    assert cache.entries == ((0, 0), (5, 4))


def test_assign_refuses_negative_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        LeaderEpochFileCache(tmp_path).assign(-1, 0)


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5), (3, 10), (7, 30))
    assert [cache.epoch_for(offset) for offset in (0, 4, 5, 9, 10, 29, 30, 1000)] == [
        -1,
        -1,
        1,
        1,
        3,
        3,
        7,
        7,
    ]
    assert LeaderEpochFileCache(tmp_path).epoch_for(0) == -1


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (7, EpochEndOffset(7, 42)),  # the latest epoch ends at the log end offset
        (3, EpochEndOffset(3, 30)),  # ends where the next one starts
        (5, EpochEndOffset(3, 30)),  # unknown epoch between two: the one below answers
        (1, EpochEndOffset(1, 10)),
        (0, EpochEndOffset(0, 5)),  # older than every entry: the first entry's start
        (8, UNDEFINED_END_OFFSET),  # newer than every entry
        (-1, UNDEFINED_END_OFFSET),
    ],
)
def test_end_offset_for(tmp_path: Path, epoch: int, expected: EpochEndOffset) -> None:
    cache = cache_with(tmp_path, (1, 5), (3, 10), (7, 30))
    assert cache.end_offset_for(epoch, 42) == expected


def test_end_offset_for_an_empty_cache_is_undefined(tmp_path: Path) -> None:
    assert LeaderEpochFileCache(tmp_path).end_offset_for(0, 10) == UNDEFINED_END_OFFSET


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (4, 20))
    assert cache.truncate_from_end(25) is False
    assert cache.truncate_from_end(10) is True
    assert cache.entries == ((0, 0),)
    cache.flush()
    assert LeaderEpochFileCache.read(tmp_path).entries == ((0, 0),)  # type: ignore[union-attr]


def test_truncate_from_start_moves_the_epoch_holding_the_new_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (4, 20))
    assert cache.truncate_from_start(0) is False
    assert cache.truncate_from_start(15) is True
    assert cache.entries == ((2, 15), (4, 20))
    cache.truncate_from_start(20)
    assert cache.entries == ((4, 20),)
    cache.flush()
    assert LeaderEpochFileCache.read(tmp_path).entries == ((4, 20),)  # type: ignore[union-attr]


def test_clear(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10))
    cache.clear()
    assert cache.entries == ()
    cache.flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\n0 0\n", "0\n1\nx 0\n", "0\n2\n3 10\n2 20\n", "0\n2\n1 10\n2 10\n", "0\n1\n-1 0\n"],
)
def test_a_damaged_file_reads_as_none(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    assert LeaderEpochFileCache.read(tmp_path) is None


def test_a_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert LeaderEpochFileCache.read(tmp_path) is None


# -- kept by the Log ------------------------------------------------------------------------------


def entries(log: Log) -> list[tuple[int, int]]:
    return [tuple(entry) for entry in log.leader_epoch_cache.entries]  # type: ignore[misc]


def append_epochs(log: Log, *epochs: int) -> None:
    for epoch in epochs:
        log.append_as_leader(batch(2), epoch)


def test_leader_appends_open_new_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 0, 2, 2, 2, 5)
    assert entries(log) == [(0, 0), (2, 4), (5, 10)]
    assert not (log.dir / LEADER_EPOCH_CHECKPOINT).exists()
    log.flush()
    assert LeaderEpochFileCache.read(log.dir).entries == ((0, 0), (2, 4), (5, 10))  # type: ignore[union-attr]


def test_follower_appends_take_the_batches_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    append_epochs(leader, 1, 1, 4)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(slice_bytes(leader.read(0, 1 << 20)))
    assert entries(follower) == [(1, 0), (4, 4)]


def test_maybe_assign_epoch_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.maybe_assign_epoch_start_offset(0, 0)
    append_epochs(log, 0, 0)
    log.maybe_assign_epoch_start_offset(1, log.log_end_offset)
    append_epochs(log, 1)
    assert entries(log) == [(0, 0), (1, 4)]


def test_truncation_trims_the_cache_from_the_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 0, 3, 3, 6)
    log.truncate_to(5)  # the batch [4, 5] goes whole
    assert log.log_end_offset == 4
    assert entries(log) == [(0, 0)]
    log.truncate_to(0)
    assert entries(log) == []


def test_truncation_at_the_log_end_drops_an_epoch_no_batch_carries(tmp_path: Path) -> None:
    """A leader of epoch 3 that appended nothing: its follower truncation to the LEO (the new leader
    answered a diverging epoch ending there) must forget epoch 3, else the follower names it in its
    next fetch and diverges again, forever."""
    log = open_log(tmp_path)
    append_epochs(log, 0, 0, 2)
    log.maybe_assign_epoch_start_offset(3, log.log_end_offset)
    assert entries(log) == [(0, 0), (2, 4), (3, 6)]
    assert log.truncate_to(log.log_end_offset) is False
    assert log.log_end_offset == 6 and entries(log) == [(0, 0), (2, 4)]
    log.flush()
    assert LeaderEpochFileCache.read(log.dir).entries == ((0, 0), (2, 4))  # type: ignore[union-attr]


def test_retention_trims_the_cache_from_the_start(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    size = len(batch(2))
    log = open_log(tmp_path, clock, segment_bytes=2 * size, retention_ms=10_000)
    for epoch, ts in ((0, 900_000), (1, 900_000), (1, 995_000), (2, 995_000), (2, 995_000)):
        log.append_as_leader(batch(2, timestamp=ts), epoch)
    assert entries(log) == [(0, 0), (1, 2), (2, 6)]
    assert log.delete_retention_segments(clock.time_ms()) == 1
    assert log.log_start_offset == 4
    assert entries(log) == [(1, 4), (2, 6)]
    log.flush()
    assert LeaderEpochFileCache.read(log.dir).entries == ((1, 4), (2, 6))  # type: ignore[union-attr]


def reopen(log: Log, **kwargs: object) -> Log:
    log.close()
    return Log(log.dir, LogConfig(), ManualClock(), **kwargs)  # type: ignore[arg-type]


def test_the_cache_survives_a_clean_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 2, 2)
    assert entries(reopen(log, clean_shutdown=True)) == [(0, 0), (2, 2)]


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_a_missing_or_damaged_file_is_rebuilt_from_the_batches(tmp_path: Path, damage: str) -> None:
    log = open_log(tmp_path, segment_bytes=3 * len(batch(2)))
    append_epochs(log, 0, 0, 1, 1, 1, 4, 4)
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    log.close()
    if damage == "delete":
        path.unlink()
    else:
        path.write_text("0\n3\n0 0\n")
    reopened = Log(log.dir, LogConfig(), ManualClock(), clean_shutdown=True)
    assert entries(reopened) == [(0, 0), (1, 4), (4, 10)]
    reopened.flush()
    assert path.read_text() == "0\n3\n0 0\n1 4\n4 10\n"


def test_an_entry_past_the_recovered_log_end_is_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 0)
    log.maybe_assign_epoch_start_offset(3, log.log_end_offset)  # a leader that wrote nothing yet
    log.append_as_leader(batch(2), 3)
    segment = log.active_segment.path(".log")
    log.close()
    os.truncate(segment, segment.stat().st_size - 5)  # the epoch-3 batch is torn by a crash
    reopened = Log(log.dir, LogConfig(), ManualClock(), recovery_point=0)
    assert reopened.log_end_offset == 4
    assert entries(reopened) == [(0, 0)]


def test_recovery_adds_epochs_the_file_missed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 0, 2)
    log.close()
    (log.dir / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n0 0\n")  # older than the log
    reopened = Log(log.dir, LogConfig(), ManualClock(), recovery_point=2)
    assert entries(reopened) == [(0, 0), (2, 4)]


def test_open_trims_the_cache_to_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 0, 1)
    assert entries(reopen(log, clean_shutdown=True, log_start_offset=3)) == [(0, 3), (1, 4)]


def test_batch_headers_carry_the_epoch_the_cache_records(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_epochs(log, 0, 7)
    data = slice_bytes(log.read(2, 1 << 20))
    assert BatchHeader.unpack_from(data).partition_leader_epoch == 7
    assert log.leader_epoch_cache.epoch_for(2) == 7


# -- the deferred file after a crash ---------------------------------------------------------------


def crash_and_reopen(log: Log, recovery_point: int) -> Log:
    """Drop `log` as a killed process would (no flush, no close) and open it again."""
    log.files.close_all()
    return Log(log.dir, LogConfig(), ManualClock(), recovery_point=recovery_point)


def test_a_crash_before_the_flush_loses_no_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=3 * len(batch(2)))
    append_epochs(log, 0, 0)
    log.flush()
    append_epochs(log, 2, 2, 2, 5, 5)  # assigned in memory only: the file still says [(0, 0)]
    assert LeaderEpochFileCache.read(log.dir).entries == ((0, 0),)  # type: ignore[union-attr]
    reopened = crash_and_reopen(log, recovery_point=log.recovery_point)
    assert entries(reopened) == [(0, 0), (2, 4), (5, 10)]


def test_a_file_older_than_a_truncation_claims_no_epoch_the_log_lacks(tmp_path: Path) -> None:
    old_leader = open_log(tmp_path / "old")
    append_epochs(old_leader, 0, 0, 3, 3)  # epoch 3 from offset 4: never committed
    new_leader = open_log(tmp_path / "new")
    append_epochs(new_leader, 0, 0, 1, 1, 5)  # epoch 1 from 4, epoch 5 from 8
    follower = open_log(tmp_path / "follower", segment_bytes=3 * len(batch(2)))
    follower.append_as_follower(slice_bytes(old_leader.read(0, 1 << 20)))
    follower.flush()  # the file: [(0, 0), (3, 4)]
    stale_recovery_point = follower.recovery_point
    follower.truncate_to(4)
    follower.append_as_follower(slice_bytes(new_leader.read(4, 1 << 20)))
    assert entries(follower) == [(0, 0), (1, 4), (5, 8)]
    assert LeaderEpochFileCache.read(follower.dir).entries == ((0, 0), (3, 4))  # type: ignore[union-attr]
    reopened = crash_and_reopen(follower, recovery_point=stale_recovery_point)
    assert entries(reopened) == [(0, 0), (1, 4), (5, 8)]
    assert reopened.leader_epoch_cache.end_offset_for(3, reopened.log_end_offset) == EpochEndOffset(1, 8)
