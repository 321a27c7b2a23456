"""The scheduler: every periodic job, deadline and worker thread of the broker, on the injected clock.

Owns the timers (one heap of deadlines on `clock.monotonic_ms()`, one loop timer armed for the
earliest), the periodic jobs registered by name, and the lanes: one thread pool per `Lane`, named by
what may run there (the rule is in docs/architecture.md, "Scheduling"). The broker makes the one
`Scheduler` and hands it down through constructors; nothing else makes thread pools, calls
`asyncio.to_thread` or loops on `asyncio.sleep` to do something periodically (docs/architecture.md
lists what has not moved yet).

API (everything but `Lanes.submit` is called on the event loop):
- `every(name, interval_ms, fn, *, initial_delay_ms=None) -> Job`: call `fn()` on the loop after
  `initial_delay_ms` (default: one interval), then `interval_ms` after each run ends (a fixed
  delay, so runs never overlap). `interval_ms` is an int or a function read before each wait (a
  dynamic config). `fn` may return an awaitable, which the run awaits: a job with blocking work
  hands it to a lane with `await scheduler.run(lane, ...)`. A run that raises is logged with the
  job's name and the job goes on. Names are unique among the jobs registered.
- `at(name, deadline_ms, fn) -> Timer`: call `fn()` on the loop once `clock.monotonic_ms()` reaches
  `deadline_ms` (`timer.cancel()` before that and it never runs). An awaitable it returns runs as a
  task of the scheduler; a failure is logged with the timer's name. Names need not be unique (a
  coordinator may arm one per member): they say what kind of deadline it is.
- `await run(lane, fn, *args)`: `fn(*args)` in a thread of `lane`, awaited. Off the loop,
  `lanes.submit(lane, fn, *args)` returns a concurrent.futures.Future instead.
- `await cancel(*jobs)`: no further run; a run in progress is abandoned at its current await (work
  it handed to a lane finishes in its thread, unawaited). `await stop(*jobs)`: no further run, and
  return once a run in progress has finished (a checkpoint writer that must not overlap a final
  write).
- `jobs()`: what is registered (name, next run on the monotonic clock, whether periodic), for
  observability; `await close()`: cancel every job, timer and task, then stop the lanes.

For a coordinator: arm each session or rebalance deadline with `at` (`fn` takes no argument: bind
the group or member with a lambda or functools.partial; a callback that only queues an event keeps
the single writer), move a deadline by cancelling its Timer and arming a new one, and run each
expiration scan (offsets retention, transaction timeouts) as an `every` job.

Time: deadlines are `clock.monotonic_ms()` values. On the system clock a loop timer wakes the
scheduler at the earliest deadline (a wake-up that the clock finds early waits for the rest). A
`ManualClock` tells its listeners when a test advances it; the scheduler then fires what is due on
the next loop turn, and arms no loop timer at all, so tests move time instead of sleeping.

Why the purgatory keeps `loop.call_later`: see docs/architecture.md ("Scheduling").

Like `clock`, `tasks` and `purgatory`, this module sits below every layer and imports nothing from
odradek but `clock` and `tasks`.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from odradek.clock import Clock
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")
Interval = int | Callable[[], int]
COMPACT_AFTER = 64  # cancelled timers kept in the heap before it is rebuilt without them


class Lane(StrEnum):
    """The worker lanes, named by what runs in them (docs/architecture.md, "Scheduling")."""

    LOG_IO = "log-io"  # flushes, checkpoints, retention: background.threads
    LOG_LOAD = "log-load"  # creating, loading, closing, deleting logs: the partition loader threads
    CLEANER = "cleaner"  # the log cleaner's passes: one thread
    METADATA_STORE = "metadata-store"  # the local metadata file's writes, ZooKeeper client start/stop
    REQUEST = "request"  # the parts of requests too heavy for the loop: num.io.threads
    CONSOLE = "console"  # the web console's blocking cluster reads: one thread
    ALTER_LOG_DIRS = "replica-alter-log-dirs"  # copying replicas between log dirs: one thread


DEFAULT_LANE_THREADS: Mapping[Lane, int] = {
    Lane.LOG_IO: 10,
    Lane.LOG_LOAD: 8,
    Lane.CLEANER: 1,
    Lane.METADATA_STORE: 1,
    Lane.REQUEST: 8,
    Lane.CONSOLE: 1,
    Lane.ALTER_LOG_DIRS: 1,
}


class Lanes:
    """One thread pool per lane; its threads are named after the lane (`log-io_0`, ...)."""

    def __init__(self, threads: Mapping[Lane, int] = DEFAULT_LANE_THREADS) -> None:
        self._threads = {lane: max(1, threads.get(lane, DEFAULT_LANE_THREADS[lane])) for lane in Lane}
        self._pools = {lane: ThreadPoolExecutor(count, lane.value) for lane, count in self._threads.items()}

    def threads(self, lane: Lane) -> int:
        return self._threads[lane]

    def executor(self, lane: Lane) -> Executor:
        return self._pools[lane]

    def submit(self, lane: Lane, fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(*args)` in a thread of `lane` (any thread may call this); RuntimeError once shut down."""
        return self._pools[lane].submit(fn, *args)

    def shutdown(self) -> None:
        """Drop the work not started and wait for the threads to finish the work they began."""
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)


class Timer:
    """A deadline registered with `Scheduler.at`."""

    __slots__ = ("name", "deadline_ms", "_fn", "_scheduler", "_listed", "cancelled")

    def __init__(
        self, scheduler: Scheduler, name: str, deadline_ms: int, fn: Callable[[], object], listed: bool
    ) -> None:
        self.name = name
        self.deadline_ms = deadline_ms
        self._fn = fn
        self._scheduler = scheduler
        self._listed = listed
        self.cancelled = False

    def cancel(self) -> None:
        """It will not run (no effect once it ran)."""
        if not self.cancelled:
            self.cancelled = True
            self._scheduler._cancelled_timers += 1


class Job:
    """A periodic job registered with `Scheduler.every`."""

    def __init__(self, name: str, interval_ms: Interval, fn: Callable[[], object]) -> None:
        self.name = name
        self.interval_ms = interval_ms
        self.fn = fn
        self.next_run_ms: int | None = None  # None while it runs
        self.stopping = False
        self.task: asyncio.Task[None] | None = None

    def interval(self) -> int:
        return self.interval_ms() if callable(self.interval_ms) else self.interval_ms


@dataclass(frozen=True, slots=True)
class Scheduled:
    """One entry of `Scheduler.jobs()`."""

    name: str
    next_run_ms: int | None  # on the monotonic clock; None while a periodic job runs
    periodic: bool


class Scheduler:
    """See the module docstring."""

    def __init__(self, clock: Clock, lanes: Lanes | None = None) -> None:
        self.clock = clock
        self.lanes = lanes if lanes is not None else Lanes()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heap: list[tuple[int, int, Timer]] = []
        self._sequence = itertools.count()
        self._cancelled_timers = 0
        self._wakeup: asyncio.Handle | None = None
        self._wakeup_at: int | None = None
        self._jobs: dict[str, Job] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._unsubscribe = clock.on_advance(self._advanced)
        self._manual = self._unsubscribe is not None  # the clock moves only when a test says so
        self._closed = False

    # -- periodic jobs -----------------------------------------------------------------------------

    def every(
        self,
        name: str,
        interval_ms: Interval,
        fn: Callable[[], object],
        *,
        initial_delay_ms: int | None = None,
    ) -> Job:
        """Run `fn` periodically; see the module docstring."""
        if self._closed:
            raise RuntimeError("the scheduler is closed")
        if name in self._jobs:
            raise ValueError(f"a periodic job named {name!r} is already registered")
        job = self._jobs[name] = Job(name, interval_ms, fn)
        delay_ms = job.interval() if initial_delay_ms is None else initial_delay_ms
        job.next_run_ms = self.clock.monotonic_ms() + delay_ms
        job.task = self._bind().create_task(self._run_job(job), name=name)
        job.task.add_done_callback(lambda _: self._forget(job))
        return job

    def _forget(self, job: Job) -> None:
        if self._jobs.get(job.name) is job:
            del self._jobs[job.name]

    async def _run_job(self, job: Job) -> None:
        while job.next_run_ms is not None:
            await self._sleep_until(job.next_run_ms, job.name)
            job.next_run_ms = None
            try:
                result = job.fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("Periodic job %s failed", job.name)
            if not job.stopping:
                job.next_run_ms = self.clock.monotonic_ms() + job.interval()

    async def cancel(self, *jobs: Job | None) -> None:
        """No further run of `jobs` (None skipped); a run in progress is abandoned."""
        await cancel_and_wait(*(job.task for job in jobs if job is not None))

    async def stop(self, *jobs: Job | None) -> None:
        """No further run of `jobs` (None skipped); returns once a run in progress finished."""
        waiting, running = [], []
        for job in jobs:
            if job is not None and job.task is not None:
                job.stopping = True
                (running if job.next_run_ms is None else waiting).append(job.task)
        await cancel_and_wait(*waiting)
        if running:
            await asyncio.wait(running)

    # -- deadlines ---------------------------------------------------------------------------------

    def at(self, name: str, deadline_ms: int, fn: Callable[[], object]) -> Timer:
        """Call `fn` once the monotonic clock reaches `deadline_ms`; see the module docstring."""
        return self._add(Timer(self, name, deadline_ms, fn, listed=True))

    async def _sleep_until(self, deadline_ms: int, name: str) -> None:
        woken = self._bind().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self._add(Timer(self, name, deadline_ms, wake, listed=False))
        try:
            await woken
        finally:
            timer.cancel()

    def _add(self, timer: Timer) -> Timer:
        if self._closed:
            raise RuntimeError("the scheduler is closed")
        self._bind()
        heapq.heappush(self._heap, (timer.deadline_ms, next(self._sequence), timer))
        if self._cancelled_timers > COMPACT_AFTER and self._cancelled_timers * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].cancelled]
            heapq.heapify(self._heap)
            self._cancelled_timers = 0
        self._arm()
        return timer

    def _arm(self) -> None:
        """Have `_run_due` called at the earliest deadline (a manual clock: once it is due)."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._cancelled_timers -= 1
        if not heap or self._loop is None:
            return
        deadline_ms = heap[0][0]
        if self._wakeup is not None and self._wakeup_at is not None and self._wakeup_at <= deadline_ms:
            return
        delay_ms = deadline_ms - self.clock.monotonic_ms()
        if self._manual and delay_ms > 0:
            return  # a manual clock: its advance wakes the scheduler
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup_at = deadline_ms
        self._wakeup = self._loop.call_later(max(delay_ms, 0) / 1000, self._run_due)

    def _run_due(self) -> None:
        self._wakeup = self._wakeup_at = None
        now = self.clock.monotonic_ms()
        due = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        for timer in due:
            if timer.cancelled:
                self._cancelled_timers -= 1
            else:
                timer.cancelled = True  # ran: a later cancel() does nothing
                self._fire(timer)
        self._arm()

    def _fire(self, timer: Timer) -> None:
        try:
            result = timer._fn()
        except Exception:
            log.exception("Timer %s failed", timer.name)
            return
        if inspect.isawaitable(result):
            task = self._bind().create_task(self._logged(timer.name, result), name=timer.name)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _logged(name: str, work: Awaitable[object]) -> None:
        try:
            await work
        except Exception:
            log.exception("Timer %s failed", name)

    def _advanced(self) -> None:
        """The manual clock moved (maybe from another thread): fire what is due on the loop."""
        loop = self._loop
        if loop is not None and not self._closed:
            try:
                loop.call_soon_threadsafe(self._run_due)
            except RuntimeError:
                pass  # the loop is closed: nothing is waiting any more

    def _bind(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    # -- lanes -------------------------------------------------------------------------------------

    async def run(self, lane: Lane, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a thread of `lane`, awaited on the loop."""
        return await asyncio.get_running_loop().run_in_executor(self.lanes.executor(lane), fn, *args)

    # -- observability and shutdown ----------------------------------------------------------------

    def jobs(self) -> list[Scheduled]:
        """The periodic jobs and the pending timers, by name."""
        listed = [Scheduled(job.name, job.next_run_ms, True) for job in self._jobs.values()]
        listed += [
            Scheduled(timer.name, deadline, False)
            for deadline, _, timer in sorted(self._heap)
            if timer._listed and not timer.cancelled
        ]
        return listed

    async def close(self) -> None:
        """Cancel every job, timer and timer task, then stop the lanes (waiting for the work their
        threads began)."""
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._heap.clear()
        await cancel_and_wait(*(job.task for job in list(self._jobs.values())), *self._tasks)
        self.lanes.shutdown()
