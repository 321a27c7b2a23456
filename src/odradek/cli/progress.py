"""Progress lines of the tools' long operations (a reset over many partitions, ...).

Owns `Progress`: given a total, it prints `PREFIX DONE/TOTAL UNIT (RATE UNIT/s)` on stderr at most once
per `every_s` and once at the end, and nothing at all for an operation smaller than `threshold`, so
short runs keep Kafka's exact output. stdout, which scripts parse, is never touched.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

DEFAULT_THRESHOLD = 200
DEFAULT_EVERY_S = 1.0


class Progress:
    def __init__(
        self,
        prefix: str,
        total: int,
        unit: str,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        every_s: float = DEFAULT_EVERY_S,
        out: TextIO | None = None,
    ) -> None:
        self._prefix, self._total, self._unit = prefix, total, unit
        self._enabled = total >= threshold
        self._every_s = every_s
        self._out = out
        self._done = 0
        self._started = self._last = time.monotonic()

    def advance(self, count: int) -> None:
        self._done += count
        now = time.monotonic()
        if self._enabled and (now - self._last >= self._every_s or self._done >= self._total):
            self._last = now
            rate = self._done / max(now - self._started, 1e-3)
            print(
                f"{self._prefix} {self._done}/{self._total} {self._unit} ({rate:.1f} {self._unit}/s)",
                file=self._out or sys.stderr,
                flush=True,
            )
