"""Injected time.

Everything that waits, expires or rolls (segment roll, retention, session timeouts, long polls) asks a
Clock instead of the time module, so tests drive time with a ManualClock instead of sleeping. A
ManualClock tells its listeners when it is advanced (`on_advance`): the scheduler (odradek.scheduler)
then fires the timers due.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Clock:
    """Wall-clock time for timestamps, monotonic time for deadlines."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def on_advance(self, listener: Callable[[], None]) -> Callable[[], None] | None:
        """Have `listener` called whenever this clock jumps forward; returns the function that stops
        it, or None for a clock that moves only with real time (waiters then use loop timers)."""
        return None


class ManualClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._listeners: list[Callable[[], None]] = []

    def time_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        """Move both times forward by `ms`, then tell the listeners (the schedulers on this clock)."""
        self._now_ms += ms
        for listener in list(self._listeners):
            listener()

    def on_advance(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


SYSTEM_CLOCK = Clock()
