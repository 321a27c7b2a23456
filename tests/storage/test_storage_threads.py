"""Storage off the event loop: fsync never under the lock appends take, appends never fsync, the
LogManager safe from worker threads, lazy loading that keeps unloaded partitions' checkpoints, a
bulk load that stops when asked, and a shutdown that flushes only what is dirty."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.storage.storage_helpers import batch, open_log, read_records

WAIT_S = 10


def run_in_thread(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def blocked_fdatasync(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """os.fdatasync patched to signal `entered` and wait for `release`."""
    entered, release = threading.Event(), threading.Event()
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        entered.set()
        assert release.wait(WAIT_S)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    yield entered, release
    release.set()


def test_appends_and_reads_complete_while_a_flush_is_blocked_in_fdatasync(
    tmp_path: Path, blocked_fdatasync: tuple[threading.Event, threading.Event]
) -> None:
    entered, release = blocked_fdatasync
    log = open_log(tmp_path, segment_bytes=2 * len(batch(2)))
    for epoch in range(3):
        log.append_as_leader(batch(2), epoch)
    flusher = run_in_thread(log.flush)
    assert entered.wait(WAIT_S)
    done = threading.Event()

    def append_roll_and_read() -> None:
        log.append_as_leader(batch(2), 7)  # rolls, and opens a new leader epoch
        log.roll()
        assert [r.offset for r in read_records(log.read(6, 1 << 20))] == [6, 7]
        done.set()

    appender = run_in_thread(append_roll_and_read)
    assert done.wait(WAIT_S), "the append waited for the flush's fdatasync"
    assert log.recovery_point == 0  # the flush has not finished: the recovery point has not moved
    release.set()
    flusher.join(WAIT_S)
    appender.join(WAIT_S)
    assert log.recovery_point == 6  # what the flush covered, not what was appended meanwhile
    log.flush()
    assert log.recovery_point == 8


def test_the_append_path_never_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        monkeypatch.setattr(os, name, lambda fd, name=name: calls.append(name))
    log = Log(
        tmp_path / "t-0",
        LogConfig(segment_bytes=2 * len(batch(2)), flush_messages=1),
        ManualClock(),
        request_flush=lambda _: calls.append("requested"),
    )
    for epoch in (0, 0, 3, 3, 5):  # new epochs, rolls, producer snapshots, flush.messages reached
        log.append_as_leader(batch(2), epoch)
    log.maybe_assign_epoch_start_offset(6, log.log_end_offset)
    assert len(log.segments) == 3
    assert calls == ["requested"]  # one flush asked of the flusher thread; nothing synced inline
    log.flush()
    assert "fdatasync" in calls and "fsync" in calls


def test_flush_messages_is_flushed_in_the_log_io_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushing_threads: list[str] = []
    real_flush = Log.flush

    def flush(self: Log, *args: object) -> None:
        flushing_threads.append(threading.current_thread().name)
        real_flush(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "flush", flush)
    logs = LogManager([tmp_path], LogConfig(flush_messages=2), ManualClock())
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), 0)
    flushed = threading.Event()
    for _ in range(WAIT_S * 100):
        if log.recovery_point == 2:
            flushed.set()
            break
        threading.Event().wait(0.01)
    assert flushed.is_set()
    assert flushing_threads[0].startswith("log-io_")
    logs.shutdown()


# -- the LogManager from worker threads ------------------------------------------------------------


def test_concurrent_get_or_create_makes_one_log_per_partition(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "d1", tmp_path / "d2"], LogConfig(), ManualClock())
    barrier = threading.Barrier(8)
    seen: list[dict[int, Log]] = []

    def worker(seed: int) -> None:
        mine: dict[int, Log] = {}
        barrier.wait()
        for partition in sorted(range(40), key=lambda p: (p * 7 + seed) % 40):
            mine[partition] = logs.get_or_create_log("t", partition)
        seen.append(mine)

    threads = [run_in_thread(lambda seed=seed: worker(seed)) for seed in range(8)]
    for thread in threads:
        thread.join(WAIT_S)
    assert len(seen) == 8
    for partition in range(40):
        assert len({id(mine[partition]) for mine in seen}) == 1
    assert len(logs.all_logs()) == 40
    assert [sum(p.is_dir() for p in d.iterdir()) for d in (tmp_path / "d1", tmp_path / "d2")] == [20, 20]
    logs.shutdown()


def test_a_slow_load_blocks_only_its_own_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    logs.get_or_create_log("slow", 0).append_as_leader(batch(3), 0)
    logs.shutdown()
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    entered, release = threading.Event(), threading.Event()
    real_open_log = logs._open_log

    def open_log_slowly(key: tuple[str, int], *args: object) -> Log:
        if key[0] == "slow":
            entered.set()
            assert release.wait(WAIT_S)
        return real_open_log(key, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(logs, "_open_log", open_log_slowly)
    results: list[Log] = []
    first = run_in_thread(lambda: results.append(logs.get_or_create_log("slow", 0)))
    assert entered.wait(WAIT_S)
    second = run_in_thread(lambda: results.append(logs.get_or_create_log("slow", 0)))
    fast = logs.get_or_create_log("fast", 0)  # proceeds while "slow" is loading
    fast.append_as_leader(batch(), 0)
    assert results == []
    release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert len(results) == 2 and results[0] is results[1]
    assert results[0].log_end_offset == 3
    logs.shutdown()


def test_get_log_and_get_or_create_load_an_unloaded_partition(tmp_path: Path) -> None:
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    logs.get_or_create_log("t", 0).append_as_leader(batch(2), 0)
    logs.get_or_create_log("t", 1).append_as_leader(batch(3), 0)
    logs.shutdown()
    reopened = LogManager([tmp_path], LogConfig(), ManualClock())
    assert reopened.get_log("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    assert reopened.get_or_create_log("t", 1).log_end_offset == 3
    assert reopened.get_log("t", 2) is None
    reopened.shutdown()


# -- lazy loading and checkpoints ----------------------------------------------------------------


def populate(root: Path, partitions: int, records: int = 2) -> None:
    logs = LogManager([root], LogConfig(), ManualClock())
    for partition in range(partitions):
        logs.get_or_create_log("t", partition).append_as_leader(batch(records), 0)
    logs.shutdown()


def test_checkpoints_keep_the_entries_of_partitions_not_loaded(tmp_path: Path) -> None:
    populate(tmp_path, 4)
    (tmp_path / "t-3" / "00000000000000000000.log").unlink()
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(batch(5), 0)
    log.flush()
    logs.run_retention(0)
    logs.flush_dirty(0)
    logs.checkpoint()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("t", 0): 7,
        ("t", 1): 2,
        ("t", 2): 2,
        ("t", 3): 2,  # its files are damaged, but nobody loaded it: its entry stays
    }
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT).keys() == {("t", p) for p in range(4)}
    assert logs.unloaded_partitions() == [("t", 1), ("t", 2), ("t", 3)]
    assert logs.report_unknown([("t", 0), ("t", 1)]) == [("t", 2), ("t", 3)]
    assert [log.partition for log in logs.all_logs()] == [0]
    logs.shutdown()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 2)] == 2


def test_an_unclean_dir_is_not_marked_clean_while_partitions_were_never_loaded(tmp_path: Path) -> None:
    populate(tmp_path, 3)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    logs.get_or_create_log("t", 0)
    logs.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    list(logs.load_logs(logs.unloaded_partitions()))
    logs.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_load_logs_stops_when_asked(tmp_path: Path) -> None:
    populate(tmp_path, 30, records=1)
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    loaded: list[Log] = []
    for log in logs.load_logs(logs.unloaded_partitions(), threads=3, should_stop=lambda: len(loaded) >= 5):
        loaded.append(log)
    assert 5 <= len(loaded) <= 5 + 3
    assert len(logs.unloaded_partitions()) == 30 - len(loaded)
    logs.shutdown()


def test_shutdown_during_a_bulk_load_ends_the_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(tmp_path, 20, records=1)
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    started = threading.Event()
    real_open_log = logs._open_log

    def open_log_and_signal(*args: object) -> Log:
        started.set()
        return real_open_log(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(logs, "_open_log", open_log_and_signal)
    loaded: list[Log] = []
    gate = threading.Event()

    def bulk_load() -> None:
        for log in logs.load_logs(logs.unloaded_partitions(), threads=2):
            loaded.append(log)
            gate.wait(WAIT_S)  # a slow consumer: shutdown comes in the middle

    loader = run_in_thread(bulk_load)
    assert started.wait(WAIT_S)
    logs.shutdown()
    gate.set()
    loader.join(WAIT_S)
    assert not loader.is_alive()
    assert 1 <= len(loaded) < 20
    assert not (tmp_path / "t-19" / "leader-epoch-checkpoint.tmp").exists()


def test_shutdown_of_many_untouched_logs_syncs_no_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(tmp_path, 50)
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    list(logs.load_logs(logs.unloaded_partitions(), threads=4))
    logs.get_or_create_log("t", 0).append_as_leader(batch(), 0)
    synced: list[int] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync

    def fdatasync(fd: int) -> None:
        synced.append(fd)
        real_fdatasync(fd)

    fsyncs: list[int] = []

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(os, "fsync", fsync)
    logs.shutdown()
    assert len(synced) == 1  # the one log appended to
    assert len(fsyncs) <= 8  # its index and directory, the checkpoints and the marker: not per log


def test_a_flush_arriving_after_the_log_was_deleted_does_nothing(tmp_path: Path) -> None:
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), 3)  # unflushed data and a leader epoch not yet written
    assert logs.delete_log("t", 0)
    log.flush()  # as a flusher thread holding the log would
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    logs.shutdown()


def test_a_truncation_during_a_flush_keeps_the_recovery_point_below_the_new_data(
    tmp_path: Path, blocked_fdatasync: tuple[threading.Event, threading.Event]
) -> None:
    entered, release = blocked_fdatasync
    log = open_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    flusher = run_in_thread(log.flush)  # covers offsets below 6
    assert entered.wait(WAIT_S)
    log.truncate_to(2)
    for _ in range(3):
        log.append_as_leader(batch(2), 1)  # offsets 2-7 are new, unsynced data
    release.set()
    flusher.join(WAIT_S)
    assert log.recovery_point == 0  # where it was: not 6, which would cover offsets 2-5 unsynced
    log.flush()
    assert log.recovery_point == 8


def test_the_periodic_checkpoint_writes_changed_leader_epoch_files(tmp_path: Path) -> None:
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), 4)
    path = log.dir / "leader-epoch-checkpoint"
    assert not path.exists()
    logs.checkpoint()
    assert path.read_text() == "0\n1\n4 0\n"
    assert log.recovery_point == 0  # the data itself waits for a flush
    logs.shutdown()
