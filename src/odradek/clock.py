"""Injected time.

Everything that waits, expires or rolls (segment roll, retention, session timeouts, long polls) asks a
Clock instead of the time module, so tests drive time with a ManualClock instead of sleeping.
"""

from __future__ import annotations

import time


class Clock:
    """Wall-clock time for timestamps, monotonic time for deadlines."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms

    def time_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        self._now_ms += ms


SYSTEM_CLOCK = Clock()
