"""Purgatory: requests that wait for a condition (fetch long poll, produce acks=-1) or a deadline.

Owns `DelayedOperation` (the base of every delayed request) and `DelayedOperationPurgatory` (the
watch lists and the timers). The life of an operation:

1. `await purgatory.try_complete_else_watch(op, keys)` calls `op.try_complete()` at once; a satisfied
   operation returns its result without ever being watched. A caller that has just checked the
   condition itself (on the same loop turn) parks the operation with `watch(op, keys)`.
2. Otherwise it is put on the watch list of each key (a topic-partition) and a timer is armed for its
   deadline (`clock.monotonic_ms() + op.delay_ms`).
3. Whoever changes a key (an append moves the log end offset, a follower fetch moves the high
   watermark) calls `purgatory.check_and_complete(key)`, which retries every operation watching it
   (`op.try_complete_for(key)`: an operation may look only at what that key changed).
4. The operation completes exactly once: either `try_complete()` saw its condition and called
   `force_complete()`, or the deadline passed and `expire_due()` (called by the loop timer, or by a
   test after moving a ManualClock) forced it. `on_complete()` builds the result exactly once; a
   completed operation leaves every watch list and its timer is cancelled. If the waiting task is
   cancelled (the connection went away), the operation is dropped without completing.

Invariants: `on_complete` runs at most once per operation; no completed operation stays watched or
timed; everything runs on one asyncio loop, so there is no locking and no second "try after watching"
pass (nothing can change a key between the first try and the watch).

Callers: the ReplicaManager (DelayedProduce, DelayedFetch) and any later coordinator that parks
requests. Like `odradek.clock` it sits below every layer and imports nothing but the clock, so
`server/`, `coordinator/`, `replication/` and `controller/` may all use it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import Any

from odradek.clock import Clock


class DelayedOperation(ABC):
    """A request parked until `try_complete` succeeds or `delay_ms` passes; completes exactly once."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, delay_ms)
        self.deadline_ms = 0
        self._completed = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()
        self._purgatory: DelayedOperationPurgatory | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the completion condition; when it holds, return `self.force_complete()`."""

    @abstractmethod
    def on_complete(self) -> Any:
        """Build the operation's result. Runs exactly once, whether satisfied or expired."""

    def try_complete_for(self, key: Hashable) -> bool:
        """`key` changed: check the condition as far as that change matters (by default, all of it)."""
        return self.try_complete()

    def note_change(self, key: Hashable) -> None:  # noqa: B027 - an optional hook, empty by default
        """`key` changed and will be retried: see `DelayedOperationPurgatory.note_changes`."""

    def on_expiration(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Runs after `on_complete` when the deadline, not the condition, completed the operation."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True only for the call that completed it."""
        if self._completed:
            return False
        self._completed = True
        try:
            self._result = self.on_complete()
        except Exception as exc:  # delivered to the waiting request, not to whoever triggered the check
            self._error = exc
        self._release()
        return True

    def expire(self) -> None:
        if self.force_complete():
            self.on_expiration()

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
            self._purgatory = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class DelayedOperationPurgatory:
    """Watch lists keyed by topic-partition plus one loop timer per waiting operation."""

    def __init__(self, name: str, clock: Clock) -> None:
        self.name = name
        self.clock = clock
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._pending: dict[DelayedOperation, None] = {}

    def __len__(self) -> int:
        """Operations waiting (watched and timed) right now."""
        return len(self._pending)

    def watched(self, key: Hashable) -> int:
        """How many waiting operations watch `key`."""
        return len(self._watchers.get(key, ()))

    async def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> Any:
        """Complete `op` now if it can, else park it until a watched key completes it or it expires."""
        if op.try_complete():
            return op.result()
        return await self.watch(op, keys)

    async def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> Any:
        """Park `op` without trying it first (its caller has just seen its condition fail, on this
        loop turn), until a watched key completes it or it expires."""
        loop = asyncio.get_running_loop()
        op._keys = tuple(keys)
        op._purgatory = self
        op._waiter = loop.create_future()
        op.deadline_ms = self.clock.monotonic_ms() + op.delay_ms
        watchers = self._watchers
        for key in op._keys:
            ops = watchers.get(key)
            if ops is None:  # not setdefault: that builds a dict for every key, watched or not
                ops = watchers[key] = {}
            ops[op] = None
        self._pending[op] = None
        op._timer = loop.call_later(op.delay_ms / 1000, self._expire_if_due, op)
        try:
            await op._waiter
        except asyncio.CancelledError:
            self._drop(op)
            raise
        return op.result()

    def note_changes(self, keys: Iterable[Hashable]) -> None:
        """Several keys changed at once: every operation watching one of them learns of all of
        them before any is retried, so one completed by the first retry sees the others too."""
        watchers = self._watchers
        for key in keys:
            for op in watchers.get(key, ()):
                op.note_change(key)

    def check_and_complete(self, key: Hashable) -> int:
        """Retry every operation watching `key`; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        return sum(1 for op in list(ops) if not op.is_completed and op.try_complete_for(key))

    def expire_due(self) -> int:
        """Force-complete every waiting operation whose deadline has passed; returns how many."""
        now = self.clock.monotonic_ms()
        due = [op for op in self._pending if op.deadline_ms <= now]
        for op in due:
            op.expire()
        return len(due)

    def _expire_if_due(self, op: DelayedOperation) -> None:
        if op.is_completed:
            return
        remaining = op.deadline_ms - self.clock.monotonic_ms()
        if remaining <= 0:
            op.expire()
        else:  # the loop timer ran ahead of the injected clock: wait for the rest
            op._timer = asyncio.get_running_loop().call_later(remaining / 1000, self._expire_if_due, op)

    def _unwatch(self, op: DelayedOperation) -> None:
        self._pending.pop(op, None)
        watchers = self._watchers
        for key in op._keys:
            ops = watchers.get(key)
            if ops is not None:
                ops.pop(op, None)
                if not ops:
                    del watchers[key]

    def _drop(self, op: DelayedOperation) -> None:
        """The waiting request went away: forget the operation without completing it."""
        op._completed = True
        op._waiter = None
        op._release()
