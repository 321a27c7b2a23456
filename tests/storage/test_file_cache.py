"""The bounded cache of segment fds: the count of open files stays bounded with many logs, reads and
appends still work, and no fd closes under a use or under a FileSlice still leased."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage.config import LogConfig
from odradek.storage.file_cache import FileCache, FileHandle, SegmentGoneError
from odradek.storage.manager import LogManager
from tests.storage.storage_helpers import batch, read_records, slice_bytes

LEASE_MS = 1_000


def open_fds_under(root: Path) -> int:
    """How many of this process's fds are open on files under `root`."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(root)):
            count += 1
    return count


def test_many_logs_under_a_small_cache_keep_the_fd_count_bounded(tmp_path: Path) -> None:
    clock = ManualClock()
    size = len(batch(1, 50))
    config = LogConfig(segment_bytes=3 * size)
    logs = LogManager([tmp_path / "d"], config, clock, max_open_files=16, file_lease_ms=LEASE_MS)
    before = open_fds_under(tmp_path)  # the dir lock
    peak = 0
    created = [logs.get_or_create_log("t", partition) for partition in range(300)]
    for round_number in range(4):  # appends roll every log to a new active segment along the way
        for log in created:
            log.append_as_leader(batch(1, 50, timestamp=1_000 + round_number), 0)
            peak = max(peak, open_fds_under(tmp_path) - before)
    for log in created:
        assert [r.offset for r in read_records(log.read(1, 1 << 20, min_one_message=True))][0] == 1
        clock.advance(LEASE_MS + 1)  # the slice was sent: its lease ends
        peak = max(peak, open_fds_under(tmp_path) - before)
    assert sum(len(log.segments) for log in created) == 600
    assert peak <= 16 + 1  # the cache, plus at most one evicted fd whose lease had not ended yet
    logs.shutdown()
    assert open_fds_under(tmp_path) == 0


def test_leased_slices_stay_readable_after_eviction_until_their_lease_ends(tmp_path: Path) -> None:
    clock = ManualClock()
    logs = LogManager([tmp_path], LogConfig(), clock, max_open_files=2, file_lease_ms=LEASE_MS)
    held = []
    for partition in range(4):  # every file is leased: the cache must evict leased ones
        log = logs.get_or_create_log("t", partition)
        log.append_as_leader(batch(1, 10 + partition), 0)
        info = log.read(0, 1 << 20)
        held.append((info, slice_bytes(info)))
    assert len(logs.files) == 2 and len(logs.files.reaper) == 2
    for info, expected in held:
        assert slice_bytes(info) == expected  # the evicted fds are still open, on the same files
    clock.advance(LEASE_MS)
    logs.get_or_create_log("t", 9).append_as_leader(batch(), 0)  # an open reaps expired leases
    assert len(logs.files.reaper) == 0
    for partition in range(4):  # reopened on demand
        assert [r.offset for r in read_records(logs.get_log("t", partition).read(0, 1 << 20))] == [0]
    logs.shutdown()


def test_eviction_prefers_files_whose_lease_has_ended(tmp_path: Path) -> None:
    clock = ManualClock()
    cache = FileCache(clock, max_open_files=2, lease_ms=LEASE_MS)
    leased, plain, newcomer = handles(tmp_path, 3)
    cache.acquire(leased, cache.lease_deadline())
    cache.release(leased)
    with cache.use(plain):
        pass
    with cache.use(newcomer):
        pass
    assert leased.fd >= 0 and plain.fd == -1 and len(cache.reaper) == 0
    cache.close_all()


def handles(tmp_path: Path, count: int) -> list[FileHandle]:
    out = []
    for index in range(count):
        path = tmp_path / f"{index}.log"
        path.write_bytes(b"%d" % index)
        out.append(FileHandle(path))
    return out


def test_an_fd_in_use_is_never_evicted(tmp_path: Path) -> None:
    cache = FileCache(ManualClock(), max_open_files=2)
    busy, *others = handles(tmp_path, 5)
    with cache.use(busy) as fd:
        for handle in others:
            with cache.use(handle):
                pass
        assert os.pread(fd, 1, 0) == b"0"
        assert busy.fd == fd
    assert len(cache) <= 2 + 1
    cache.close_all()


def test_a_retired_handle_closes_when_its_last_user_leaves_and_never_reopens(tmp_path: Path) -> None:
    cache = FileCache(ManualClock(), max_open_files=4)
    (handle,) = handles(tmp_path, 1)
    with cache.use(handle) as fd:
        cache.retire(handle, 0)
        assert os.pread(fd, 1, 0) == b"0"  # still open: it is in use
    assert handle.fd == -1
    with pytest.raises(SegmentGoneError):
        cache.acquire(handle)
    cache.close_all()


def test_default_budget_comes_from_rlimit_nofile() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert FileCache(ManualClock()).max_open_files == max(soft // 2, 16)
    with pytest.raises(ValueError):
        FileCache(ManualClock(), max_open_files=0)
