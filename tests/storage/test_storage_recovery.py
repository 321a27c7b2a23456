"""Recovery on open: torn tails at every byte, garbage, corrupt segments, damaged indexes, leftovers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.storage.storage_helpers import batch, read_records

SIZE = len(batch(2, 40))
CONFIG = LogConfig(segment_bytes=4 * SIZE, index_interval_bytes=0)


def crash(log: Log) -> None:
    """Drop a log as a killed process would: no index write, no flush, no seal."""
    log.files.close_all()


def build(directory: Path, batches: int = 10) -> Log:
    log = Log(directory, CONFIG, ManualClock())
    for i in range(batches):
        log.append_as_leader(batch(2, 40, timestamp=1_000 + i), 0)
    return log


def all_offsets(log: Log) -> list[int]:
    offsets, position = [], log.log_start_offset
    while position < log.log_end_offset:
        records = read_records(log.read(position, 1 << 20))
        offsets += [r.offset for r in records]
        position = records[-1].offset + 1
    return offsets


@pytest.mark.slow
def test_torn_tail_at_every_byte_of_the_last_batch(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = build(directory)  # segments 0, 8, 16; the last holds batches 16-17 and 18-19
    crash(log)
    active = directory / "00000000000000000016.log"
    original = active.read_bytes()
    tail_start = len(original) - SIZE
    for cut in range(tail_start, len(original)):
        active.write_bytes(original[:cut])
        recovered = Log(directory, CONFIG, ManualClock())
        assert recovered.log_end_offset == 18, cut
        assert recovered.recovery_point == 18
        assert os.path.getsize(active) == tail_start
        assert all_offsets(recovered) == list(range(18))
        assert recovered.append_as_leader(batch(2, 40), 0).first_offset == 18
        crash(recovered)


def test_garbage_after_the_last_batch_is_cut(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    crash(build(directory))
    active = directory / "00000000000000000016.log"
    good = active.read_bytes()
    bad_crc = bytearray(batch(2, 40))
    bad_crc[-1] ^= 1
    for garbage in (os.urandom(1000), bytes(100), bytes(bad_crc)):
        active.write_bytes(good + garbage)
        log = Log(directory, CONFIG, ManualClock())
        assert log.log_end_offset == 20 and active.read_bytes() == good
        crash(log)


def test_corruption_in_an_older_segment_drops_everything_after_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    crash(build(directory))
    middle = directory / "00000000000000000008.log"
    data = bytearray(middle.read_bytes())
    data[SIZE + 70] ^= 0xFF  # second batch of the segment (offsets 10-11)
    middle.write_bytes(bytes(data))
    log = Log(directory, CONFIG, ManualClock(), recovery_point=8)
    assert log.log_end_offset == 10
    assert [s.base_offset for s in log.segments] == [0, 8]
    assert not (directory / "00000000000000000016.log").exists()
    assert all_offsets(log) == list(range(10))


def test_segments_below_the_recovery_point_are_trusted(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = build(directory)
    log.flush()
    crash(log)
    first = directory / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[70] ^= 0xFF  # CRC damage a rescan would catch
    first.write_bytes(bytes(data))
    trusted = Log(directory, CONFIG, ManualClock(), recovery_point=20)
    assert trusted.log_end_offset == 20
    crash(trusted)
    rescanned = Log(directory, CONFIG, ManualClock(), recovery_point=0)
    assert rescanned.log_end_offset == 0


def test_clean_shutdown_skips_the_rescan(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = build(directory)
    log.close()
    active = directory / "00000000000000000016.log"
    data = bytearray(active.read_bytes())
    data[70] ^= 0xFF
    active.write_bytes(bytes(data))
    assert Log(directory, CONFIG, ManualClock(), clean_shutdown=True).log_end_offset == 20


def test_unpersisted_index_entries_are_rebuilt_after_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = build(directory, 3)
    before = list(log.active_segment.offset_index.keys), list(log.active_segment.offset_index.values)
    assert before[0]
    crash(log)
    assert not (directory / "00000000000000000000.index").exists()
    recovered = Log(directory, CONFIG, ManualClock())
    assert (
        list(recovered.active_segment.offset_index.keys),
        list(recovered.active_segment.offset_index.values),
    ) == before
    assert len((directory / "00000000000000000000.index").read_bytes()) == 8 * len(before[0])


def damage_index(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "deleted":
        path.unlink()
    elif how == "partial-entry":
        path.write_bytes(data + b"\x00\x01\x02")
    elif how == "out-of-order":
        path.write_bytes(data[8:16] + data[:8] + data[16:])
    elif how == "past-the-end":
        path.write_bytes(data + (10_000).to_bytes(4, "big") + (99_999).to_bytes(4, "big"))


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("how", ["deleted", "partial-entry", "out-of-order", "past-the-end"])
def test_damaged_index_is_rebuilt(
    tmp_path: Path, suffix: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    log = build(directory)
    entries = list(log.segments[1].offset_index.keys), list(log.segments[1].offset_index.values)
    max_timestamp = log.segments[1].max_timestamp
    log.close()
    damaged = directory / f"00000000000000000008{suffix}"
    original = damaged.read_bytes()
    damage_index(damaged, how)
    reopened = Log(directory, CONFIG, ManualClock(), recovery_point=20, clean_shutdown=True)
    assert reopened.log_end_offset == 20
    assert all_offsets(reopened) == list(range(20))
    segment = reopened.segments[1]
    assert (list(segment.offset_index.keys), list(segment.offset_index.values)) == entries
    assert segment.max_timestamp == max_timestamp == 1_007
    assert "rebuilding the indexes of" in caplog.text
    if suffix == ".index":
        assert damaged.read_bytes() == original
    else:
        assert len(damaged.read_bytes()) % 12 == 0
        segment.time_index.load()
        segment.time_index.sanity_check(segment.next_offset)


def test_leftover_files_are_handled(tmp_path: Path) -> None:
    """A half-deleted segment, an unfinished cleaning and an index without its log are removed."""
    directory = tmp_path / "t-0"
    build(directory).close()
    files = sorted(p.name for p in directory.iterdir())
    assert "00000000000000000000.log" in files
    (directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000004.log.cleaned").write_bytes(b"half")
    (directory / "00000000000000000099.index").write_bytes(b"")
    log = Log(directory, CONFIG, ManualClock(), clean_shutdown=True)
    assert sorted(p.name for p in directory.iterdir()) == files
    assert log.log_end_offset == 20


def test_swap_file_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build(directory).close()
    # a "cleaned" segment covering offsets 0-15, as a finished compaction would leave it
    merged = (directory / "00000000000000000000.log").read_bytes() + (
        directory / "00000000000000000008.log"
    ).read_bytes()
    (directory / "00000000000000000000.log.swap").write_bytes(merged)
    log = Log(directory, CONFIG, ManualClock(), clean_shutdown=True)
    assert [s.base_offset for s in log.segments] == [0, 16]
    assert not (directory / "00000000000000000008.log").exists()
    assert all_offsets(log) == list(range(20))


def test_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-3", CONFIG, ManualClock(), log_start_offset=42)
    assert (log.topic, log.partition) == ("t", 3)
    assert (log.log_start_offset, log.log_end_offset) == (42, 42)
    assert log.append_as_leader(batch(), 0).first_offset == 42
    assert read_records(log.read(42, 1000))[0].offset == 42


def test_reopen_after_clean_close_keeps_state(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = build(directory)
    timestamps = [s.max_timestamp for s in log.segments]
    log.close()
    shutil.copytree(directory, tmp_path / "copy-0")
    reopened = Log(tmp_path / "copy-0", CONFIG, ManualClock(), recovery_point=20, clean_shutdown=True)
    assert [s.max_timestamp for s in reopened.segments] == timestamps
    assert [s.next_offset for s in reopened.segments] == [8, 16, 20]
    assert reopened.append_as_leader(batch(), 0).first_offset == 20
