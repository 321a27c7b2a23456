"""DelayedOperationPurgatory: immediate completion, watch-and-retry, expiry, exactly-once, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from odradek.clock import SYSTEM_CLOCK, ManualClock
from odradek.purgatory import DelayedOperation, DelayedOperationPurgatory


class Counter(DelayedOperation):
    """Completes once `target` units have been reported; counts how often each hook ran."""

    def __init__(self, delay_ms: int, target: int) -> None:
        super().__init__(delay_ms)
        self.target = target
        self.seen = 0
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.seen >= self.target and self.force_complete()

    def on_complete(self) -> tuple[int, bool]:
        self.completions += 1
        return self.seen, self.seen >= self.target

    def on_expiration(self) -> None:
        self.expirations += 1


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_satisfied_operation_completes_without_watching() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        op = Counter(1000, target=0)
        assert await purgatory.try_complete_else_watch(op, ["t-0"]) == (0, True)
        assert len(purgatory) == 0 and purgatory.watched("t-0") == 0
        assert op.completions == 1

    asyncio.run(scenario())


def test_watched_key_change_completes_operation_once() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        op = Counter(60_000, target=2)
        task = asyncio.create_task(purgatory.try_complete_else_watch(op, ["t-0", "t-1"]))
        await _settle()
        assert purgatory.watched("t-0") == 1 and purgatory.watched("t-1") == 1 and len(purgatory) == 1
        op.seen = 1
        assert purgatory.check_and_complete("t-0") == 0
        op.seen = 2
        assert purgatory.check_and_complete("t-1") == 1
        assert await task == (2, True)
        assert purgatory.check_and_complete("t-0") == 0
        assert purgatory.watched("t-0") == 0 and purgatory.watched("t-1") == 0 and len(purgatory) == 0
        assert (op.completions, op.expirations) == (1, 0)
        assert op.force_complete() is False

    asyncio.run(scenario())


class KeyCounter(Counter):
    """Completes on the key it was told about, whatever the count."""

    def __init__(self, delay_ms: int, key: str) -> None:
        super().__init__(delay_ms, target=1 << 30)
        self.key = key
        self.keys_tried: list[str] = []

    def try_complete_for(self, key: object) -> bool:
        self.keys_tried.append(str(key))
        return key == self.key and self.force_complete()


def test_watch_parks_without_a_first_try_and_retries_by_key() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        op = KeyCounter(60_000, key="t-1")
        op.seen = op.target  # satisfied already: `watch` must not look
        task = asyncio.create_task(purgatory.watch(op, ["t-0", "t-1"]))
        await _settle()
        assert not task.done() and len(purgatory) == 1 and op.completions == 0
        assert purgatory.check_and_complete("t-0") == 0
        assert purgatory.check_and_complete("t-1") == 1
        assert await task == (op.target, True)
        assert op.keys_tried == ["t-0", "t-1"] and len(purgatory) == 0

    asyncio.run(scenario())


def test_manual_clock_expiry_completes_with_partial_result() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        purgatory = DelayedOperationPurgatory("test", clock)
        op = Counter(500, target=10)
        task = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await _settle()
        op.seen = 3
        clock.advance(499)
        assert purgatory.expire_due() == 0 and not task.done()
        clock.advance(1)
        assert purgatory.expire_due() == 1
        assert await task == (3, False)
        assert (op.completions, op.expirations) == (1, 1)
        assert purgatory.watched("k") == 0 and len(purgatory) == 0
        op.seen = 10
        assert purgatory.check_and_complete("k") == 0 and op.completions == 1

    asyncio.run(scenario())


def test_loop_timer_expires_operation_on_system_clock() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", SYSTEM_CLOCK)
        op = Counter(20, target=1)
        assert await asyncio.wait_for(purgatory.try_complete_else_watch(op, ["k"]), 5) == (0, False)
        assert op.expirations == 1 and len(purgatory) == 0

    asyncio.run(scenario())


class SteppedLoop(asyncio.SelectorEventLoop):
    """An event loop whose own time moves only by `step`, so its timers fire when a test says."""

    def __init__(self) -> None:
        super().__init__()
        self._now_s = 0.0

    def time(self) -> float:
        return self._now_s

    def step(self, seconds: float) -> None:
        self._now_s += seconds


def test_loop_timer_waits_for_manual_clock() -> None:
    """The loop timer fires at the deadline by the loop's time; it expires the operation only once the
    injected clock reached the deadline too, and re-arms for the rest until then."""
    clock = ManualClock()
    loop = SteppedLoop()

    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", clock)
        op = Counter(10, target=1)
        task = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await _settle()
        loop.step(0.010)  # the loop timer is due; the injected clock has not moved
        await _settle()
        assert not task.done() and len(purgatory) == 1 and op.expirations == 0
        clock.advance(10)  # the injected deadline passes; the re-armed loop timer is 10 ms away
        await _settle()
        assert not task.done()
        loop.step(0.010)
        await _settle()
        assert task.done() and task.result() == (0, False)
        assert (op.completions, op.expirations) == (1, 1) and len(purgatory) == 0

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()


def test_cancelled_waiter_leaves_no_watchers() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        op = Counter(60_000, target=1)
        task = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await _settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert purgatory.watched("k") == 0 and len(purgatory) == 0
        op.seen = 1
        assert purgatory.check_and_complete("k") == 0 and op.completions == 0

    asyncio.run(scenario())


def test_on_complete_error_reaches_the_waiter_not_the_trigger() -> None:
    class Failing(Counter):
        def on_complete(self) -> tuple[int, bool]:
            raise RuntimeError("boom")

    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        op = Failing(60_000, target=1)
        task = asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"]))
        await _settle()
        op.seen = 1
        assert purgatory.check_and_complete("k") == 1
        with pytest.raises(RuntimeError, match="boom"):
            await task

    asyncio.run(scenario())


def test_many_operations_on_one_key_each_complete_once() -> None:
    async def scenario() -> None:
        purgatory = DelayedOperationPurgatory("test", ManualClock())
        ops = [Counter(60_000, target=i + 1) for i in range(5)]
        tasks = [asyncio.create_task(purgatory.try_complete_else_watch(op, ["k"])) for op in ops]
        await _settle()
        for seen in range(1, 6):
            for op in ops:
                op.seen = seen
            assert purgatory.check_and_complete("k") == 1
        assert [await t for t in tasks] == [(i + 1, True) for i in range(5)]
        assert [op.completions for op in ops] == [1] * 5 and len(purgatory) == 0

    asyncio.run(scenario())
