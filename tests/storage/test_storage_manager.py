"""LogManager: loading, placement, deletion, checkpoints, dir locks, clean shutdown, periodic work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.storage.storage_helpers import batch

SIZE = len(batch(1, 100))


def manager(tmp_path: Path, clock: ManualClock | None = None, **config: int) -> LogManager:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    return LogManager(dirs, LogConfig(**config), clock or ManualClock())  # type: ignore[arg-type]


def test_logs_spread_over_dirs_and_reload(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    for partition in range(4):
        log = logs.get_or_create_log("orders", partition)
        log.append_as_leader(batch(partition + 1), 0)
    assert logs.get_or_create_log("orders", 0) is logs.get_log("orders", 0)
    assert sorted(log.dir.parent.name for log in logs.all_logs()) == ["d1", "d1", "d2", "d2"]
    logs.shutdown()
    reloaded = manager(tmp_path)
    assert reloaded.all_logs() == []  # construction loads nothing
    assert reloaded.unloaded_partitions() == [("orders", i) for i in range(4)]
    loaded = reloaded.load_logs(reloaded.unloaded_partitions(), threads=2)
    assert sorted((log.partition, log.log_end_offset) for log in loaded) == [(i, i + 1) for i in range(4)]
    assert reloaded.unloaded_partitions() == []
    assert reloaded.get_log("orders", 9) is None
    reloaded.shutdown()


def test_checkpoint_files_use_kafkas_format(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create_log("a.b_c-d", 0)
    log.append_as_leader(batch(3), 0)
    log.flush()
    logs.checkpoint()
    text = (log.dir.parent / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\na.b_c-d 0 3\n"
    assert read_checkpoint(log.dir.parent / "log-start-offset-checkpoint") == {("a.b_c-d", 0): 0}
    logs.shutdown()


def test_malformed_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, {("t", 1): 5})
    assert read_checkpoint(path) == {("t", 1): 5}
    path.write_text("0\n3\nt 1 5\n")
    assert read_checkpoint(path) == {}
    assert read_checkpoint(tmp_path / "missing") == {}


def test_clean_shutdown_marker_lifecycle(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.get_or_create_log("t", 0).append_as_leader(batch(), 0)
    logs.shutdown()
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    reloaded = manager(tmp_path)
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    assert reloaded.get_log("t", 0).recovery_point == 1
    reloaded.shutdown()


def test_unclean_start_recovers_from_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    logs = manager(tmp_path, segment_bytes=SIZE)
    log = logs.get_or_create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(1, 100), 0)
    logs.flush_dirty(0)  # flushes the rolled segments: recovery point at the active segment
    assert log.recovery_point == 2
    logs.checkpoint()
    active = log.active_segment.path(".log")
    logs.files.close_all()  # crash
    for fd in logs._lock_fds:
        os.close(fd)
    with active.open("ab") as tail:
        tail.write(b"torn")
    reloaded = manager(tmp_path, segment_bytes=SIZE)
    assert reloaded.get_log("t", 0).log_end_offset == 3
    assert active.stat().st_size == SIZE
    reloaded.shutdown()


def test_a_log_dir_cannot_be_shared(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    with pytest.raises(KafkaStorageError, match="in use"):
        LogManager([tmp_path / "d2"], LogConfig(), ManualClock())
    logs.shutdown()
    LogManager([tmp_path / "d2"], LogConfig(), ManualClock()).shutdown()


def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create_log("gone", 0)
    log.append_as_leader(batch(), 0)
    parent = log.dir.parent
    assert logs.delete_log("gone", 0)
    assert not logs.delete_log("gone", 0)
    assert logs.get_log("gone", 0) is None
    assert not [p for p in parent.iterdir() if p.is_dir()]
    assert logs.get_or_create_log("gone", 0).log_end_offset == 0
    logs.shutdown()


def test_leftover_delete_dirs_and_foreign_names_at_start(tmp_path: Path) -> None:
    (tmp_path / "d1" / "t-0.0123abcd-delete").mkdir(parents=True)
    (tmp_path / "d1" / "t-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "d1" / "not a partition").mkdir()
    logs = manager(tmp_path)
    logs.run_retention(0)
    assert not (tmp_path / "d1" / "t-0.0123abcd-delete").exists()
    assert (tmp_path / "d1" / "not a partition").exists()
    assert logs.all_logs() == [] and logs.unloaded_partitions() == []
    logs.shutdown()


def test_illegal_topic_names(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    for name in ("", "..", "a/b", "x" * 250):
        with pytest.raises(ValueError):
            logs.get_or_create_log(name, 0)
    logs.shutdown()


def test_retention_and_topic_config_updates(tmp_path: Path) -> None:
    clock = ManualClock()
    logs = manager(tmp_path, clock, segment_bytes=SIZE, file_delete_delay_ms=0)
    log = logs.get_or_create_log("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(1, 100, timestamp=clock.time_ms()), 0)
    assert logs.run_retention(clock.time_ms()) == 0
    logs.update_topic_config("t", LogConfig(segment_bytes=SIZE, retention_bytes=SIZE, file_delete_delay_ms=0))
    assert logs.run_retention(clock.time_ms()) == 3
    assert log.log_start_offset == 3
    partition_dir = tmp_path / "d1" / "t-0"
    segment_files = sorted(p.name for p in partition_dir.glob("0*"))
    assert "00000000000000000003.log" in segment_files
    assert all(name.startswith("00000000000000000003.") for name in segment_files)
    # file.delete.delay.ms=0: the descriptors of the deleted segments are closed too
    assert set(open_files_under(partition_dir)) <= {str(partition_dir / "00000000000000000003.log")}
    logs.shutdown()


def open_files_under(directory: Path) -> list[str]:
    """What this process's open file descriptors point at inside `directory` (Linux /proc)."""
    targets = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # the descriptor iterdir itself used, closed by now
            continue
        if target.startswith(f"{directory}/"):
            targets.append(target)
    return sorted(targets)


def test_flush_dirty_honours_flush_ms(tmp_path: Path) -> None:
    clock = ManualClock()
    logs = manager(tmp_path, clock, flush_ms=1_000)
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(batch(), 0)
    logs.flush_dirty(clock.time_ms() + 999)
    assert log.recovery_point == 0
    logs.flush_dirty(clock.time_ms() + 1_000)
    assert log.recovery_point == 1
    logs.shutdown()
