"""Log: append, read semantics, rolling, flushing, timestamps, retention, truncation, disk errors."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.batch import BatchHeader, TimestampType, iter_batches
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.errors import CorruptRecordError, InvalidTimestampError, RecordTooLargeError
from odradek.protocol.records.record import decode_records
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from odradek.storage.file_cache import FileCache
from odradek.storage.log import Log
from odradek.storage.reaper import FdReaper
from tests.storage.storage_helpers import batch, open_log, read_records, slice_bytes


def test_append_assigns_dense_offsets_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(memoryview(batch(3)), leader_epoch=4)
    second = log.append_as_leader(batch(2, codec=CompressionType.GZIP) + batch(1), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset, second.record_count) == (3, 5, 3)
    assert (first.log_append_time, first.max_timestamp, first.log_start_offset) == (-1, 1_000, 0)
    assert log.log_end_offset == 6
    data = slice_bytes(log.read(0, 1 << 20))
    assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [4, 4, 4]
    assert [r.offset for r in decode_records(data)] == list(range(6))


def test_log_append_time_overwrites_max_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(50_000)
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(2, timestamp=7), 0)
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (50_000, 50_000, 0)
    header = BatchHeader.unpack_from(slice_bytes(log.read(0, 1 << 20)))
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in read_records(log.read(0, 1 << 20))] == [50_000, 50_000]


def test_invalid_append_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500)
    log.append_as_leader(batch(), 0)
    good, bad = batch(), bytearray(batch())
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bytes(bad), 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(good + batch(1, value_size=600), 0)
    assert log.log_end_offset == 1 and log.active_segment.size == len(good)


def test_create_time_bounds_from_config(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    log = open_log(tmp_path, clock, message_timestamp_after_max_ms=1_000)
    log.append_as_leader(batch(timestamp=1_000_500), 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(timestamp=1_002_000), 0)


def append_many(log: Log, count: int, per_batch: int = 1, value_size: int = 100) -> None:
    for _ in range(count):
        log.append_as_leader(batch(per_batch, value_size), 0)


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=200)
    append_many(log, 20, per_batch=2)
    size = len(batch(2, 100))
    info = log.read(5, 3 * size + size // 2)
    assert info.total_bytes == 3 * size
    assert [r.offset for r in read_records(info)] == list(range(4, 10))  # mid-batch fetch: whole batch
    assert info.fetch_offset_metadata.relative_position_in_segment == 2 * size
    unindexed = open_log(tmp_path / "unindexed")
    append_many(unindexed, 20, per_batch=2)
    for scanned in (log, unindexed):
        assert scanned.read(4, 3 * size).total_bytes == 3 * size  # an exact fit is taken
        assert scanned.read(4, 3 * size - 1).total_bytes == 2 * size


def test_min_one_message_returns_an_oversized_first_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_many(log, 3, value_size=1000)
    info = log.read(1, 10)
    assert info.total_bytes == len(batch(1, 1000))
    assert log.read(1, 10, min_one_message=False).records == []


def test_read_stops_before_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=0)
    append_many(log, 10, per_batch=2)
    assert [r.offset for r in read_records(log.read(0, 1 << 20, max_offset_exclusive=6))] == list(range(6))
    assert read_records(log.read(0, 1 << 20, max_offset_exclusive=5))[-1].offset == 3
    assert log.read(6, 1 << 20, max_offset_exclusive=6).total_bytes == 0
    assert log.read(8, 1 << 20, max_offset_exclusive=6).total_bytes == 0


def _reads(log: Log, offsets: range) -> list[tuple[int, int]]:
    """(position, bytes) of reads from each of `offsets` under a few high watermarks and sizes."""
    end = log.log_end_offset
    size = log.read(end - 1, 1 << 20).total_bytes  # every batch has this size
    return [
        (info.fetch_offset_metadata.relative_position_in_segment, info.total_bytes)
        for offset in offsets
        for max_offset in (end, end - 1, end - 5)
        for max_bytes in (1, size, 2 * size - 1, 2 * size, 1 << 20)
        for info in [log.read(offset, max_bytes, max_offset_exclusive=max_offset)]
    ]


def _matches_a_scan(log: Log) -> bool:
    """Whether every read answers as it does from the index and a header scan alone."""
    remembered = _reads(log, range(log.log_start_offset, log.log_end_offset))
    log.active_segment._forget_recent()
    return remembered == _reads(log, range(log.log_start_offset, log.log_end_offset))


@pytest.mark.parametrize("gaps", [False, True])
def test_reads_near_the_end_read_no_header_and_match_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gaps: bool
) -> None:
    log = open_log(tmp_path, index_interval_bytes=300)

    def append(count: int) -> None:
        if not gaps:
            append_many(log, count, per_batch=2)
            return
        for _ in range(count):  # a follower copying a compacted leader: holes between batches
            record = SimpleRecord(b"v" * 100)
            log.append_as_follower(build_batch([record, record], base_offset=log.log_end_offset + 1))

    append(40)
    preads: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda *args: preads.append(1) or real_pread(*args))
    _reads(log, range(log.log_end_offset - 8, log.log_end_offset))
    assert preads == []  # the active segment knows where its last batches start
    assert _matches_a_scan(log)
    append(3)  # remembered again from here on
    assert _matches_a_scan(log)
    append(20)
    log.truncate_to(log.log_end_offset - 7)
    append(2)
    assert _matches_a_scan(log)


def test_read_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_many(log, 3)
    assert log.read(3, 1000).records == []
    with pytest.raises(OffsetOutOfRangeError) as caught:
        log.read(4, 1000)
    assert caught.value.error_code == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_reads_span_one_segment_and_continue_in_the_next(tmp_path: Path) -> None:
    size = len(batch(1, 100))
    log = open_log(tmp_path, segment_bytes=3 * size)
    append_many(log, 10)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    info = log.read(1, 1 << 20)
    assert [r.offset for r in read_records(info)] == [1, 2]
    assert [r.offset for r in read_records(log.read(3, 1 << 20))] == [3, 4, 5]
    assert info.fetch_offset_metadata.segment_base_offset == 0


def test_roll_on_segment_ms_using_batch_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1_000)
    log.append_as_leader(batch(timestamp=10_000), 0)
    log.append_as_leader(batch(timestamp=10_900), 0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(timestamp=11_001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_segment_ms_by_wall_clock_without_timestamps(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, segment_ms=1_000)
    log.append_as_leader(batch(timestamp=-1), 0)
    clock.advance(1_001)
    log.append_as_leader(batch(timestamp=-1), 0)
    assert len(log.segments) == 2


def test_roll_when_the_offset_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=8 * 3)
    append_many(log, 10)
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    assert len(log.segments) == 3
    assert [r.offset for r in read_records(log.read(0, 1 << 20))] == [0, 1, 2, 3]


def test_explicit_roll_and_empty_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.roll() is log.active_segment
    append_many(log, 2)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.segments[0].time_index.last_timestamp == 1_000  # sealed with the segment's max


def test_flush_messages_asks_for_a_flush_once(tmp_path: Path) -> None:
    asked: list[Log] = []
    log = Log(tmp_path / "t-0", LogConfig(flush_messages=3), ManualClock(), request_flush=asked.append)
    append_many(log, 2)
    assert asked == [] and not log.flush_due(0)
    append_many(log, 2)
    assert asked == [log] and log.flush_due(0)
    assert log.recovery_point == 0  # the append itself never fsyncs
    log.flush()
    assert log.recovery_point == 4 and not log.flush_due(0)
    append_many(log, 3)
    assert asked == [log, log]


def test_flush_up_to_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_many(log, 3)
    log.flush()
    assert log.recovery_point == 3
    log.append_as_leader(batch(), 0)
    log.flush(up_to=2)
    assert log.recovery_point == 3
    log.flush()
    assert log.recovery_point == 4


def test_flush_ms(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, flush_ms=100)
    append_many(log, 1)
    assert not log.flush_due(clock.time_ms())
    clock.advance(100)
    assert log.flush_due(clock.time_ms())


def test_offset_for_timestamp(tmp_path: Path) -> None:
    size = len(batch(2, 10, 0))
    log = open_log(tmp_path, segment_bytes=4 * size, index_interval_bytes=0)
    for ts in (100, 200, 150, 300, 400, 500, 450, 600):
        records = [SimpleRecord(b"v", timestamp=ts - 1), SimpleRecord(b"v", timestamp=ts)]
        log.append_as_leader(build_batch(records), 0)
    assert len(log.segments) == 2
    assert log.offset_for_timestamp(0) is not None and log.offset_for_timestamp(0).offset == 0
    found = log.offset_for_timestamp(149)
    assert (found.offset, found.timestamp) == (2, 199)  # first record with timestamp >= 149
    found = log.offset_for_timestamp(450)
    assert (found.offset, found.timestamp) == (10, 499)
    assert log.offset_for_timestamp(601) is None
    best = log.max_timestamp_offset()
    assert (best.offset, best.timestamp) == (15, 600)
    assert log.earliest_offset().offset == 0 and log.latest_offset().offset == 16


def test_offset_for_timestamp_in_compressed_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    records = [SimpleRecord(b"v", timestamp=ts) for ts in (10, 30, 20)]
    log.append_as_leader(build_batch(records, CompressionType.SNAPPY), 0)
    found = log.offset_for_timestamp(15)
    assert (found.offset, found.timestamp) == (1, 30)


def test_retention_by_time_never_deletes_the_active_segment(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    size = len(batch(1, 100))
    log = open_log(tmp_path, clock, segment_bytes=2 * size, retention_ms=10_000)
    for ts in (900_000, 900_000, 995_000, 995_000, 996_000):
        log.append_as_leader(batch(1, 100, ts), 0)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.delete_retention_segments(clock.time_ms()) == 1
    assert log.log_start_offset == 2
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    clock.advance(1_000_000)
    assert log.delete_retention_segments(clock.time_ms()) == 1
    assert [s.base_offset for s in log.segments] == [4]
    assert log.delete_retention_segments(clock.time_ms()) == 0
    # Nothing left of the deleted segments; the active one's indexes and the leader-epoch file wait
    # for the first flush.
    assert sorted(p.name for p in log.dir.iterdir()) == [
        "00000000000000000004.log",
    ]


def test_retention_by_size(tmp_path: Path) -> None:
    size = len(batch(1, 100))
    log = open_log(tmp_path, segment_bytes=2 * size, retention_bytes=3 * size, retention_ms=-1)
    append_many(log, 7)
    assert len(log.segments) == 4
    assert log.delete_retention_segments(0) == 2
    assert log.size_in_bytes == 3 * size and log.log_start_offset == 4
    log.update_config(LogConfig(segment_bytes=2 * size, retention_bytes=0, retention_ms=-1))
    assert log.delete_retention_segments(0) == 1
    assert len(log.segments) == 1 and log.active_segment.size == size


def test_compact_only_policy_keeps_everything(tmp_path: Path) -> None:
    size = len(batch(1, 100))
    log = open_log(tmp_path, segment_bytes=size, retention_bytes=0, cleanup_policy="compact")
    append_many(log, 4)
    assert log.delete_retention_segments(10**15) == 0


def test_deleted_segment_fd_stays_readable_until_reaped(tmp_path: Path) -> None:
    clock = ManualClock()
    reaper = FdReaper()
    size = len(batch(1, 100))
    config = LogConfig(segment_bytes=size, retention_bytes=0, file_delete_delay_ms=5_000)
    log = Log(tmp_path / "t-0", config, clock, files=FileCache(clock, reaper=reaper, lease_ms=5_000))
    append_many(log, 3)
    held = log.read(0, 1 << 20).records[0]
    assert log.delete_retention_segments(clock.time_ms()) == 2
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert [r.offset for r in decode_records(os.pread(held.fd, held.length, held.offset))] == [0]
    assert reaper.reap(clock.time_ms() + 4_999) == 0
    assert reaper.reap(clock.time_ms() + 5_000) == 2
    with pytest.raises(OSError):
        os.fstat(held.fd)


def test_truncate_to(tmp_path: Path) -> None:
    size = len(batch(2, 100))
    log = open_log(tmp_path, segment_bytes=3 * size, index_interval_bytes=0)
    append_many(log, 10, per_batch=2)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    assert log.truncate_to(9)  # mid-batch: the batch 8-9 goes too
    assert log.log_end_offset == 8
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert [r.offset for r in read_records(log.read(6, 1 << 20))] == [6, 7]
    assert log.append_as_leader(batch(), 0).first_offset == 8
    assert not log.truncate_to(100)
    assert log.truncate_to(0) and log.log_end_offset == 0 and len(log.segments) == 1


def test_append_as_follower_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=0)
    data += build_batch([SimpleRecord(b"c")], base_offset=2)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 2, 3)
    with pytest.raises(Exception, match="below"):
        log.append_as_follower(build_batch([SimpleRecord(b"x")], base_offset=1))


def test_enospc_rolls_the_write_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path)
    append_many(log, 2)
    size_before = log.active_segment.size
    real_pwrite = os.pwrite

    def full_disk(fd: int, data: bytes, offset: int) -> int:
        if len(data) > 20:
            real_pwrite(fd, bytes(data)[:20], offset)
            return 20
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(KafkaStorageError) as caught:
        log.append_as_leader(batch(), 0)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR == 56
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert log.log_end_offset == 2
    assert os.path.getsize(log.active_segment.path(".log")) == size_before
    assert log.append_as_leader(batch(), 0).first_offset == 2
    assert [r.offset for r in read_records(log.read(0, 1 << 20))] == [0, 1, 2]


def test_offset_for_timestamp_skips_records_below_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([SimpleRecord(b"v", timestamp=ts) for ts in (100, 50, 50)]), 0)
    log.append_as_leader(build_batch([SimpleRecord(b"v", timestamp=200)]), 0)
    log.close()
    reopened = Log(
        tmp_path / "topic-0", LogConfig(), ManualClock(), 4, log_start_offset=1, clean_shutdown=True
    )
    assert reopened.log_start_offset == 1
    found = reopened.offset_for_timestamp(80)
    assert (found.offset, found.timestamp) == (3, 200)
    assert reopened.offset_for_timestamp(201) is None
