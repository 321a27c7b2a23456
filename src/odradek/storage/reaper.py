"""Deferred closing of file descriptors that a `FileSlice` may still be using.

Owns: the list of (deadline, fd) of segment files that left the `FileCache` while a read's lease on
them still ran (evicted, or deleted by retention, truncation, cleaning or topic deletion). A fetch
response may still hold a `FileSlice` on such an fd while it is being sent, and a closed fd number
is soon reused by another open file, so the fd stays open until its deadline (the lease's end, and
for deleted segments at least file.delete.delay.ms; the disk space is released on close). This
plays the part of Kafka's `.deleted` files and its delayed delete.

Invariants: every fd handed over is closed exactly once, by `reap` after its deadline or by
`close_all` at shutdown.

Callers: `FileCache` (defer_close; reap on every opening; close_all), `LogManager` (reap on its
retention, flush and cleaner ticks).
"""

from __future__ import annotations

import heapq
import os
import threading


class FdReaper:
    def __init__(self) -> None:
        self._pending: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pending)

    def defer_close(self, fd: int, deadline_ms: int) -> None:
        with self._lock:
            heapq.heappush(self._pending, (deadline_ms, fd))

    def reap(self, now_ms: int) -> int:
        """Close the fds whose deadline has passed; return how many."""
        closed = 0
        with self._lock:
            while self._pending and self._pending[0][0] <= now_ms:
                _, fd = heapq.heappop(self._pending)
                os.close(fd)
                closed += 1
        return closed

    def close_all(self) -> None:
        with self._lock:
            for _, fd in self._pending:
                os.close(fd)
            self._pending.clear()
