"""The coordinator runtime on its own: loading, the single writer, append then apply with the append
error map, closing, timers on a ManualClock, leadership epochs. The shard here is a counter whose
records are the values it takes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.coordinator.runtime import (
    CoordinatorContext,
    CoordinatorRuntime,
    Loaded,
    RuntimeConfig,
    ShardState,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from odradek.protocol.records.batch import BatchHeader, iter_batches
from odradek.protocol.records.record import Record
from odradek.scheduler import Scheduler

CONFIG = RuntimeConfig(
    "__test_state",
    1 << 20,
    5000,
    {ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE},
    "Test shard",
)


class MemoryLog:
    """One partition's batches with dense offsets; `fail_with` makes appends answer that code (or
    raise it, when it is an exception)."""

    def __init__(self, values: list[int] = ()) -> None:  # type: ignore[assignment]
        self.batches: list[bytes] = []
        self.fail_with: int | Exception = ErrorCode.NONE
        self.reads = 0
        for value in values:
            self._add(build_batch([SimpleRecord(value=struct.pack(">q", value))]))

    def _end(self) -> int:
        return sum(h.next_offset - h.base_offset for b in self.batches for _, h in iter_batches(b))

    def _add(self, batch: bytes) -> None:
        stamped = bytearray(batch)
        struct.pack_into(">q", stamped, 0, self._end())
        self.batches.append(bytes(stamped))

    def log_range(self, partition: int) -> tuple[int, int]:
        return 0, self._end()

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """One batch per read, so a load takes one loop turn per batch."""
        self.reads += 1
        return next((b for b in self.batches if next(iter_batches(b))[1].next_offset > offset), b"")

    async def append(self, partition: int, records: bytes, timeout_ms: int) -> int:
        if isinstance(self.fail_with, Exception):
            raise self.fail_with
        if self.fail_with != ErrorCode.NONE:
            return self.fail_with
        self._add(records)
        return ErrorCode.NONE

    def leader_loading(self, partition: int) -> bool:
        return False


class Counter:
    """A state machine: one integer, set by its records; loaded and unloaded are recorded."""

    def __init__(self, context: CoordinatorContext[Counter]) -> None:
        self.context = context
        self.value = 0
        self.loaded_at: Loaded | None = None
        self.unloads = 0
        self.fired: list[str] = []

    def replay(self, header: BatchHeader, records: list[Record]) -> None:
        for record in records:
            assert record.value is not None
            self.value = struct.unpack(">q", record.value)[0]

    def loaded(self, loaded: Loaded) -> None:
        self.loaded_at = loaded

    def unloaded(self) -> None:
        self.value = 0
        self.unloads += 1

    async def set(self, value: int) -> int:
        """An event: store the new value, keep it once committed; the client's error."""
        appended = await self.context.write([SimpleRecord(value=struct.pack(">q", value))])
        if appended.error == ErrorCode.NONE:
            self.value = value
        return appended.error


class FakeTimers:
    """Timers that only fire when the test says so."""

    def __init__(self) -> None:
        self.armed: list[tuple[int, Callable[[], None]]] = []

    def at(self, name: str, deadline_ms: int, callback: Callable[[], None]) -> Any:
        entry = (deadline_ms, callback)
        self.armed.append(entry)

        class Handle:
            def cancel(_self) -> None:
                if entry in self.armed:
                    self.armed.remove(entry)

        return Handle()

    def fire_due(self, now_ms: int) -> None:
        for entry in [e for e in self.armed if e[0] <= now_ms]:
            self.armed.remove(entry)
            entry[1]()


def context(
    memory: MemoryLog, clock: ManualClock | None = None, timers: Any = None
) -> CoordinatorContext[Counter]:
    clock = clock or ManualClock()
    return CoordinatorContext(0, 5, Counter, memory, CONFIG, clock, timers or Scheduler(clock))


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_load_replays_the_log_and_sets_the_load_event() -> None:
    async def scenario() -> None:
        memory = MemoryLog([1, 2, 3])
        ctx = context(memory)
        assert await ctx.submit(lambda _: ctx.shard.set(9), int) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        waiters = [asyncio.ensure_future(ctx.wait_loaded()) for _ in range(3)]
        ctx.start()
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        # The waiters are released by the load's end, in the turn it ends (nothing polls).
        assert ctx.state is ShardState.ACTIVE and memory.reads == 3
        assert ctx.shard.value == 3 and ctx.shard.loaded_at == Loaded(3, 0)
        await ctx.close()

    run(scenario)


def test_closing_a_loading_context_releases_its_waiters() -> None:
    async def scenario() -> None:
        memory = MemoryLog(list(range(200)))
        ctx = context(memory)
        ctx.start()
        await asyncio.sleep(0)
        await ctx.wait_loaded(0)  # a bounded wait returns at its timeout while the load goes on
        assert ctx.state is ShardState.LOADING
        waiter = asyncio.ensure_future(ctx.wait_loaded())
        await ctx.close()
        await asyncio.wait_for(waiter, 1)
        assert ctx.state is ShardState.CLOSED and memory.reads < 200 and ctx.shard.loaded_at is None

    run(scenario)


def test_a_partition_without_a_log_fails_its_load_and_closes() -> None:
    async def scenario() -> None:
        memory = MemoryLog()
        memory.log_range = lambda partition: None  # type: ignore[assignment,return-value]
        ctx = context(memory)
        ctx.start()
        await asyncio.wait_for(ctx.wait_loaded(), 1)
        assert ctx.state is ShardState.CLOSED
        assert await ctx.submit(lambda _: ctx.shard.set(1), int) == ErrorCode.NOT_COORDINATOR

    run(scenario)


@pytest.mark.parametrize(
    ("failure", "answer"),
    [
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),  # the coordinator's own
        (ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (OSError("disk gone"), ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_a_failed_append_keeps_the_state_and_answers_the_mapped_error(
    failure: int | Exception, answer: int
) -> None:
    async def scenario() -> None:
        memory = MemoryLog([4])
        ctx = context(memory)
        ctx.start()
        await ctx.wait_loaded()
        memory.fail_with = failure
        assert await ctx.submit(lambda _: ctx.shard.set(5), int) == answer
        assert ctx.shard.value == 4 and ctx.state is ShardState.ACTIVE
        memory.fail_with = ErrorCode.NONE  # the next write is tried again
        assert await ctx.submit(lambda _: ctx.shard.set(6), int) == ErrorCode.NONE
        assert ctx.shard.value == 6 and memory.log_range(0) == (0, 2)
        await ctx.close()

    run(scenario)


def test_events_run_one_at_a_time_in_order() -> None:
    async def scenario() -> None:
        memory = MemoryLog()
        ctx = context(memory)
        ctx.start()
        await ctx.wait_loaded()
        seen: list[tuple[int, int]] = []

        async def observe_then_set(value: int) -> int:
            seen.append((value, ctx.shard.value))
            return await ctx.shard.set(value)

        answers = await asyncio.gather(
            *(ctx.submit(lambda _, v=v: observe_then_set(v), int) for v in (1, 2, 3))
        )
        assert answers == [ErrorCode.NONE] * 3
        assert seen == [(1, 0), (2, 1), (3, 2)]  # each decision saw the committed state before it
        await ctx.close()

    run(scenario)


def test_an_event_that_raises_answers_unknown_server_error_and_the_writer_goes_on() -> None:
    async def scenario() -> None:
        ctx = context(MemoryLog())
        ctx.start()
        await ctx.wait_loaded()

        async def broken(ticket: int) -> object:
            raise RuntimeError("bug")

        assert await ctx.submit(broken, lambda code: ("failed", code)) == (
            "failed",
            ErrorCode.UNKNOWN_SERVER_ERROR,
        )
        assert await ctx.submit(lambda _: ctx.shard.set(1), int) == ErrorCode.NONE
        await ctx.close()

    run(scenario)


def test_close_answers_everything_waiting_not_coordinator() -> None:
    async def scenario() -> None:
        ctx = context(MemoryLog([7]))
        ctx.start()
        await ctx.wait_loaded()
        parked: list[int] = []

        async def park(ticket: int) -> None:
            parked.append(ticket)  # answered later through `reply`, as a JoinGroup in a rebalance

        background = asyncio.Event()
        ctx.spawn(background.wait())
        waiting = asyncio.ensure_future(ctx.submit(park, lambda code: ("error", code)))
        await settle()
        assert parked and not waiting.done()
        await ctx.close()
        assert await waiting == ("error", ErrorCode.NOT_COORDINATOR)
        assert ctx.shard.unloads == 1 and ctx.shard.value == 0
        assert not ctx._background  # the background work was cancelled
        assert await ctx.submit(lambda _: ctx.shard.set(1), int) == ErrorCode.NOT_COORDINATOR

    run(scenario)


def test_a_not_leader_append_answers_not_coordinator_and_closes_after_the_event() -> None:
    async def scenario() -> None:
        memory = MemoryLog([3])
        ctx = context(memory)
        ctx.start()
        await ctx.wait_loaded()

        async def park(ticket: int) -> None:
            return None

        parked = asyncio.ensure_future(ctx.submit(park, int))
        await settle()
        memory.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await ctx.submit(lambda _: ctx.shard.set(4), int) == ErrorCode.NOT_COORDINATOR
        assert await parked == ErrorCode.NOT_COORDINATOR
        assert ctx.state is ShardState.CLOSED and ctx.shard.unloads == 1

    run(scenario)


def test_timers_fire_on_a_manual_clock_in_deadline_order() -> None:
    async def scenario() -> None:
        clock, timers = ManualClock(), FakeTimers()
        ctx = context(MemoryLog(), clock, timers)
        ctx.start()
        await ctx.wait_loaded()
        now = clock.monotonic_ms()
        fired = ctx.shard.fired

        def timer(name: str) -> Callable[[], Coroutine[Any, Any, None]]:
            async def event() -> None:
                fired.append(name)

            return event

        ctx.schedule("b", now + 2000, timer("b"))
        ctx.schedule("a", now + 1000, timer("a"))
        ctx.schedule("a", now + 1500, timer("a-later"))  # an earlier deadline of the key stays
        ctx.every("tick", 700, timer("tick"))
        assert [deadline for deadline, _ in timers.armed] == [now + 700]  # one wake-up, the earliest
        clock.advance(999)
        timers.fire_due(clock.monotonic_ms())
        await settle()
        assert fired == ["tick"]
        clock.advance(1001)
        ctx.wake()  # tests moving the clock look at it at once
        await settle()
        # the periodic one was re-armed 700 ms after its run (now + 1699): due between "a" and "b"
        assert fired == ["tick", "a", "tick", "b"]
        assert [deadline for deadline, _ in timers.armed] == [now + 2000 + 700]
        await ctx.close()
        assert timers.armed == []

    run(scenario)


def test_the_scheduler_wakes_the_context_from_the_event_loop() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        ctx = context(MemoryLog(), clock)
        ctx.start()
        await ctx.wait_loaded()
        done = asyncio.Event()

        async def event() -> None:
            done.set()

        ctx.schedule("due", clock.monotonic_ms() - 1, event)  # already due: fires without a wake()
        await asyncio.wait_for(done.wait(), 1)
        await ctx.close()

    run(scenario)


def test_the_runtime_follows_leader_epochs() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        runtime: CoordinatorRuntime[Counter] = CoordinatorRuntime(
            MemoryLog([1]), CONFIG, clock, Counter, Scheduler(clock)
        )
        assert runtime.on_partition_loaded(0, 3) is None  # not started
        runtime.startup()
        first = runtime.on_partition_loaded(0, 3)
        assert first is not None
        await first.wait_loaded()
        assert runtime.on_partition_loaded(0, 3) is None and runtime.on_partition_loaded(0, 2) is None
        second = runtime.on_partition_loaded(0, 4)
        assert second is not None and runtime.context(0) is second
        await second.wait_loaded()
        await settle()
        assert first.state is ShardState.CLOSED and second.state is ShardState.ACTIVE
        assert runtime.on_partition_unloaded(0) is second and runtime.context(0) is None
        await settle()
        assert second.state is ShardState.CLOSED
        await runtime.shutdown()

    run(scenario)
