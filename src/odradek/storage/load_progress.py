"""Progress of loading the logs found on disk at start: counts and rates, a line every few seconds.

Owns the numbers behind Kafka's start-up lines ("Loaded N logs in X ms", "Recovering unflushed
segment ..."): the logs loaded out of those found at start, the segments recovered (rescanned batch
by batch after an unclean shutdown, or whose indexes were rebuilt) and their bytes, and the rates
since the first load began. While loads go on, one INFO line at most every `interval_s` (default
2 s), written by the thread whose load or recovered segment passed the interval:

    Loading logs: 1200/5000 loaded, 340 segments recovered (1.2 GB) in 4.1 s: 293 logs/s, 301.5 MB/s

and, once every log found at start was loaded or left out (deleted, or not in the metadata), one
summary line:

    Loaded 5000 logs in 8412 ms: 340 segments recovered (1.2 GB); 594 logs/s, 146.2 MB/s

Nothing is logged when no log was found at start.

Thread safety: loads run in worker threads; every call takes the lock for a few additions and one
clock read, and writes its line under it, so the lines' counts only grow. Only loading calls it
(per log and per recovered segment), never the append or read paths. Callers: `LogManager` (logs
begun, loaded, left out) and, through `Log`, the loader (`load_segments`, per recovered segment).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0
MB = 1_000_000


class LoadProgress:
    """See the module docstring."""

    def __init__(
        self,
        found: int,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.found = found
        self.loaded = 0
        self.failed = 0
        self.segments = 0
        self.bytes = 0
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._left_out: set[Hashable] = set()
        self._started: float | None = None
        self._last_line = 0.0
        self._done = found == 0

    def begin(self) -> None:
        """A log found at start begins to load (the clock starts with the first)."""
        with self._lock:
            if self._started is None:
                self._started = self._last_line = self._monotonic()

    def segment_recovered(self, size_bytes: int) -> None:
        """One segment of a loading log was recovered (`size_bytes` rescanned)."""
        with self._lock:
            self.segments += 1
            self.bytes += size_bytes
            _emit(self._due_line())

    def log_loaded(self, failed: bool = False) -> None:
        """A log found at start finished loading (or failed to)."""
        with self._lock:
            self.loaded += 1
            self.failed += failed
            _emit(self._due_line())

    def log_left_out(self, keys: Iterable[Hashable]) -> None:
        """The logs found at start named by `keys` will not be loaded (deleted, unknown to the
        metadata); a log left out twice counts once."""
        with self._lock:
            self._left_out.update(keys)
            _emit(self._due_line())

    @property
    def total(self) -> int:
        """The logs found at start that are to load."""
        return self.found - len(self._left_out)

    def _due_line(self) -> str | None:
        """The line to write now (under the lock): the summary once all are in, else a periodic line
        when the interval passed since the last."""
        if self._done or self._started is None:
            return None
        now = self._monotonic()
        elapsed = max(now - self._started, 1e-9)
        if self.loaded >= self.total:
            self._done = True
            return self._summary(elapsed)
        if now - self._last_line < self._interval_s:
            return None
        self._last_line = now
        return (
            f"Loading logs: {self.loaded}/{self.total} loaded, {self._recovered()} in {elapsed:.1f} s: "
            f"{self.loaded / elapsed:.0f} logs/s, {self.bytes / MB / elapsed:.1f} MB/s"
        )

    def _summary(self, elapsed: float) -> str:
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (
            f"Loaded {self.loaded} logs{failed} in {elapsed * 1000:.0f} ms: {self._recovered()}; "
            f"{self.loaded / elapsed:.0f} logs/s, {self.bytes / MB / elapsed:.1f} MB/s"
        )

    def _recovered(self) -> str:
        return f"{self.segments} segments recovered ({_size(self.bytes)})"


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _emit(line: str | None) -> None:
    if line is not None:
        log.info("%s", line)
