"""The bounded cache of open segment files: a broker holds at most `max_open_files` `.log` fds.

Owns: one `FileHandle` per segment (its `.log` path and, while open, its fd) and the LRU list of the
open ones, shared by every log of a `LogManager`. A segment opens its `.log` on first use and keeps
it until the cache evicts it (least recently used first) or the segment is closed or deleted. The
active segment goes through the same cache: the active segment of an idle partition is closed like
any other and reopened by its next append or read (one `open` of an existing file, no fsync), so
100,000 partitions cost `max_open_files` fds, not 100,000. `.index` / `.timeindex` files are never
held open (their entries live in memory; `index.persist` opens, writes and closes), nor are
checkpoints, producer snapshots or leader-epoch files.

Rules, so that an fd is never closed under someone using it:
- Every use of a segment's fd inside the process goes through `use(handle)` (or `acquire`/`release`):
  it counts a user and the cache never closes an fd while it has users (an eviction skips it; a
  deletion closes it when the last user leaves). So a flush may fdatasync in a worker thread while
  the event loop evicts or retention deletes the segment.
- A `FileSlice` leaves the process's control: the network layer `sendfile`s it later, without
  telling storage when it is done. A read that hands one out *leases* the fd until a deadline
  (`Log.read`: now + the cache's `lease_ms`, the same span as file.delete.delay.ms by default). An
  fd evicted or deleted before its lease ends is not closed but handed to the `FdReaper`, which
  closes it at the lease's end; so a pending sendfile never meets a closed (and possibly reused) fd
  number within the lease. Evictions prefer handles whose lease has run out. The bound on open
  fds is therefore `max_open_files` + (fds with users, at most one per concurrent operation) +
  (evicted fds whose lease still runs, i.e. segments read recently that did not fit in the cache).
- A deleted segment's handle is retired: it never reopens, and `acquire` raises `SegmentGoneError`
  (a lock-free reader holding an old segment list retries with the current one).

`max_open_files` defaults to half of RLIMIT_NOFILE (the rest is for sockets); the broker passes
its own budget.

Thread safety: every method takes the cache's lock; the system calls under it are `open` and
`close` (no fsync, no reads). Callers: `LogSegment` (every fd use), `Log.read` (leases),
`LogManager` (creates the cache, closes it at shutdown).
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.clock import Clock
from odradek.storage.errors import KafkaStorageError
from odradek.storage.reaper import FdReaper

DEFAULT_LEASE_MS = 60_000
_EVICTION_SCAN = 8


class SegmentGoneError(KafkaStorageError):
    """The segment was deleted (retention, truncation, cleaning) while a reader still held it."""


class FileHandle:
    """A segment's `.log`: its path and, while the cache holds it open, its fd."""

    __slots__ = ("path", "fd", "users", "lease_until", "retired_deadline")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1
        self.users = 0
        self.lease_until = 0
        self.retired_deadline: int | None = None


def default_max_open_files() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soft if soft != resource.RLIM_INFINITY else 1 << 20
    return max(limit // 2, 16)


class FileCache:
    def __init__(
        self,
        clock: Clock,
        max_open_files: int | None = None,
        reaper: FdReaper | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        self.max_open_files = default_max_open_files() if max_open_files is None else max_open_files
        if self.max_open_files < 1:
            raise ValueError(f"max_open_files must be at least 1, not {self.max_open_files}")
        self.lease_ms = lease_ms
        self._clock = clock
        self.reaper = FdReaper() if reaper is None else reaper
        self._open: OrderedDict[FileHandle, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def adopt(self, handle: FileHandle, fd: int) -> None:
        """Take ownership of `fd`, just opened by the caller (a new segment's file)."""
        with self._lock:
            handle.fd = fd
            self._open[handle] = None
            self._evict(handle)

    @contextmanager
    def use(self, handle: FileHandle) -> Iterator[int]:
        fd = self.acquire(handle)
        try:
            yield fd
        finally:
            self.release(handle)

    def acquire(self, handle: FileHandle, lease_until: int = 0) -> int:
        """The open fd of `handle` (opened if needed), counted as used until `release`.

        `lease_until` > 0 also keeps the fd open until then (a `FileSlice` was handed out).
        """
        with self._lock:
            if handle.fd < 0:
                self._open_file(handle)
            else:
                self._open.move_to_end(handle)
            handle.users += 1
            if lease_until > handle.lease_until:
                handle.lease_until = lease_until
            return handle.fd

    def release(self, handle: FileHandle) -> None:
        with self._lock:
            handle.users -= 1
            if handle.users == 0 and handle.retired_deadline is not None and handle.fd >= 0:
                self._close(handle, handle.retired_deadline)

    def lease_deadline(self) -> int:
        """Until when a `FileSlice` handed out now must stay valid."""
        return self._clock.time_ms() + self.lease_ms

    def retire(self, handle: FileHandle, deadline_ms: int) -> None:
        """The segment is closed or deleted: close its fd at `deadline_ms` (or its lease's end, if
        later) once nobody uses it; it never reopens."""
        with self._lock:
            handle.retired_deadline = deadline_ms
            if handle.fd >= 0:
                self._open.pop(handle, None)
                if handle.users == 0:
                    self._close(handle, deadline_ms)

    def close_all(self) -> None:
        """Close every fd (shutdown: no read is in flight any more)."""
        with self._lock:
            for handle in self._open:
                os.close(handle.fd)
                handle.fd = -1
            self._open.clear()
        self.reaper.close_all()

    # -- under the lock --------------------------------------------------------------------------

    def _open_file(self, handle: FileHandle) -> None:
        if handle.retired_deadline is not None:
            raise SegmentGoneError(f"{handle.path} was deleted")
        try:
            handle.fd = os.open(handle.path, os.O_RDWR)
        except FileNotFoundError as exc:
            raise SegmentGoneError(f"{handle.path} is gone") from exc
        except OSError as exc:
            raise KafkaStorageError(f"cannot open {handle.path}: {exc}") from exc
        self._open[handle] = None
        self._evict(handle)

    def _evict(self, keep: FileHandle) -> None:
        """Close the least recently used fds beyond `max_open_files`, never `keep` (just opened)
        nor one in use; those whose lease runs go last, to the reaper. Each opening also closes the
        reaper's fds whose time has come."""
        now = self._clock.time_ms()
        self.reaper.reap(now)
        excess = len(self._open) - self.max_open_files
        if excess <= 0:
            return
        victims: list[FileHandle] = []
        leased: list[FileHandle] = []
        for scanned, handle in enumerate(self._open):
            if len(victims) >= excess or scanned >= _EVICTION_SCAN + excess:
                break
            if handle.users or handle is keep:
                continue
            (victims if handle.lease_until <= now else leased).append(handle)
        victims.extend(leased[: excess - len(victims)])
        for handle in victims:
            del self._open[handle]
            self._close(handle, 0)

    def _close(self, handle: FileHandle, deadline_ms: int) -> None:
        """Close the fd now, or hand it to the reaper while its lease or deadline runs."""
        fd, handle.fd = handle.fd, -1
        deadline = max(deadline_ms, handle.lease_until)
        if deadline > self._clock.time_ms():
            self.reaper.defer_close(fd, deadline)
        else:
            os.close(fd)
