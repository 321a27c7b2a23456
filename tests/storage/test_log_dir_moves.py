"""Future logs and moves between log dirs (AlterReplicaLogDirs) at the storage level: the LogManager's
future logs (creation, listing at start, checkpoints, deletion, the swap and a stop in the middle of
it, cleaning paused) and the copy steps of replication/alter_log_dirs.py (chunks, truncation, epochs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records.record import decode_records
from odradek.replication.alter_log_dirs import append_next, copy_chunk, reconcile
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from tests.storage.storage_helpers import batch, slice_bytes
from tests.storage.test_cleaner import SEGMENT_BYTES, write_updates

CHUNK = 4096


def manager(tmp_path: Path) -> LogManager:
    return LogManager([tmp_path / "d1", tmp_path / "d2"], LogConfig(segment_bytes=2048), ManualClock())


def filled(logs: LogManager, batches: int = 20, epochs: tuple[int, ...] = (0, 3)) -> Log:
    """`t-0` in d1 with `batches` batches of 5 records, written in `epochs` in turn (halves)."""
    current = logs.get_or_create_log("t", 0)
    for index in range(batches):
        current.append_as_leader(batch(5, 50), epochs[index * len(epochs) // batches])
    return current


def everything(found: Log) -> bytes:
    """Every batch of the log, segment after segment (a read returns one segment's)."""
    data, offset = b"", found.log_start_offset
    while offset < found.log_end_offset:
        chunk = slice_bytes(found.read(offset, 1 << 30))
        data += chunk
        offset = decode_records(chunk)[-1].offset + 1
    return data


def copy_all(current: Log, future: Log) -> None:
    while not copy_chunk(current, future, CHUNK)[1]:
        pass


def test_a_future_log_copies_and_swaps_in(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs)
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    assert future.is_future and future.dir.name.startswith("t-0.") and future.dir.parent.name == "d2"
    assert logs.create_future_log("t", 0, tmp_path / "d2") is future
    copied, at_end = copy_chunk(current, future, CHUNK)
    assert 0 < copied <= CHUNK + len(batch(5, 50)) and not at_end
    copy_all(current, future)
    assert everything(future) == everything(current)
    assert future.leader_epoch_cache.entries == current.leader_epoch_cache.entries
    assert len(future.segments) > 1

    old = logs.replace_current_with_future("t", 0)
    assert old is current and logs.get_log("t", 0) is future and logs.future_log("t", 0) is None
    assert future.dir == tmp_path / "d2" / "t-0" and not future.is_future
    LogManager.finish_replace(old, future)
    assert not [name for name in os.listdir(tmp_path / "d1") if name.startswith("t-0")]
    expected = everything(future)
    logs.shutdown()

    reloaded = manager(tmp_path)
    found = reloaded.get_log("t", 0)
    assert found is not None and found.dir == tmp_path / "d2" / "t-0"
    assert everything(found) == expected
    reloaded.shutdown()


def test_a_future_log_is_found_at_start_and_resumes(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs)
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    copy_chunk(current, future, CHUNK)
    copied_to = future.log_end_offset
    logs.checkpoint()
    logs.shutdown()

    reloaded = manager(tmp_path)
    assert reloaded.future_log_dir("t", 0) == tmp_path / "d2" and reloaded.future_log("t", 0) is None
    current = reloaded.get_or_create_log("t", 0)
    future = reloaded.get_future_log("t", 0)
    assert future is not None and future.log_end_offset == copied_to
    assert current.dir.parent.name == "d1"
    copy_all(current, future)
    assert everything(future) == everything(current)
    reloaded.shutdown()


def test_a_stop_between_the_swaps_renames_promotes_the_future(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs)
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    copy_all(current, future)
    expected = everything(current)
    logs.shutdown()
    # The swap's first rename happened (the current log goes to -delete), the second did not.
    os.rename(tmp_path / "d1" / "t-0", tmp_path / "d1" / "t-0.0123-delete")

    reloaded = manager(tmp_path)
    assert reloaded.future_log_dir("t", 0) is None
    found = reloaded.get_log("t", 0)
    assert found is not None and found.dir == tmp_path / "d2" / "t-0"
    assert everything(found) == expected
    reloaded.run_retention(0)
    assert not (tmp_path / "d1" / "t-0.0123-delete").exists()
    reloaded.shutdown()


def test_deleting_a_partition_deletes_its_future_log(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    filled(logs)
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    assert logs.delete_log("t", 0)
    assert not future.dir.exists() and logs.future_log("t", 0) is None
    assert not [name for name in os.listdir(tmp_path / "d2") if name.startswith("t-0")]
    logs.shutdown()


def test_a_future_log_follows_truncation_and_the_log_start(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs, epochs=(0,))
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    copy_all(current, future)
    # The current log diverged (truncated, then rewritten in a new epoch): the future follows.
    current.truncate_to(50)
    current.append_as_leader(batch(5, 50), 4)
    reconcile(current, future)
    assert future.log_end_offset == 50
    copy_all(current, future)
    assert everything(future) == everything(current)
    assert future.leader_epoch_cache.entries == current.leader_epoch_cache.entries

    # Retention moved the current log's start past the future's end: the future starts over there.
    current.advance_start_offset(30)
    fresh = logs.create_future_log("t", 0, tmp_path / "d2")
    assert fresh is future
    future.truncate_fully_and_start_at(0)
    current.delete_retention_segments(0)
    copy_all(current, future)
    assert future.log_start_offset == 30 and everything(future) == everything(current)
    logs.shutdown()


def test_a_log_start_inside_a_batch_starts_the_future_at_that_batch(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs)
    current.advance_start_offset(7)  # inside the batch holding offsets 5-9
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    reconcile(current, future)
    assert append_next(current, future, CHUNK) > 0
    assert future.segments[0].base_offset == 5 and future.log_start_offset == 7
    logs.shutdown()


def test_a_moving_partition_is_not_cleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    compact = LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES)
    logs = LogManager([tmp_path / "d1", tmp_path / "d2"], LogConfig(), clock, {"compacted": compact})
    current = logs.get_or_create_log("compacted", 0)
    write_updates(current, clock, rounds=20)
    logs.create_future_log("compacted", 0, tmp_path / "d2")
    assert logs.run_cleaner(clock.time_ms()) == 0  # paused while it moves, as Kafka's abortAndPauseCleaning
    logs.delete_future_log("compacted", 0)
    assert logs.run_cleaner(clock.time_ms()) == 1
    logs.shutdown()


def test_a_failed_swap_leaves_both_logs_as_they_were(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    current = filled(logs)
    future = logs.create_future_log("t", 0, tmp_path / "d2")
    copy_all(current, future)
    (tmp_path / "d2" / "t-0").mkdir()
    (tmp_path / "d2" / "t-0" / "in-the-way").touch()  # the future log cannot take its name
    with pytest.raises(OSError):
        logs.replace_current_with_future("t", 0)
    assert current.dir == tmp_path / "d1" / "t-0" and current.dir.exists()
    assert logs.get_log("t", 0) is current and logs.future_log("t", 0) is future and future.dir.exists()
    logs.shutdown()
