"""The scheduler: periodic jobs and deadlines on the injected clock (a ManualClock moves them, real
time does not), a failing job logged by name and run again, lanes running off the loop in threads
named after them, stop letting a run finish, close cancelling everything."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

import pytest

from odradek.clock import SYSTEM_CLOCK, ManualClock
from odradek.scheduler import Lane, Lanes, Scheduler


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_a_periodic_job_runs_when_the_manual_clock_passes_each_interval() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        runs: list[int] = []
        scheduler.every("ticking", 100, lambda: runs.append(clock.monotonic_ms()))
        await asyncio.sleep(0.05)  # real time alone moves nothing
        assert runs == []
        clock.advance(99)
        await turns()
        assert runs == []
        clock.advance(1)
        await turns()
        assert len(runs) == 1
        clock.advance(100)  # the next interval counts from the end of the run
        await turns()
        assert len(runs) == 2
        await scheduler.close()

    run(scenario)


def test_the_interval_is_read_before_each_wait_and_the_first_may_differ() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        interval = {"ms": 100}
        runs: list[int] = []
        scheduler.every("dynamic", lambda: interval["ms"], lambda: runs.append(1), initial_delay_ms=10)
        clock.advance(10)
        await turns()
        assert runs == [1]
        interval["ms"] = 500  # read for the wait that starts after this run
        clock.advance(100)
        await turns()
        assert runs == [1, 1]
        clock.advance(499)
        await turns()
        assert runs == [1, 1]
        clock.advance(1)
        await turns()
        assert runs == [1, 1, 1]
        await scheduler.close()

    run(scenario)


def test_a_failing_job_is_logged_with_its_name_and_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        runs: list[int] = []

        async def flaky() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise RuntimeError("disk on fire")

        scheduler.every("flaky-job", 10, flaky)
        for _ in range(2):
            clock.advance(10)
            await turns()
        assert runs == [1, 1]
        await scheduler.close()

    with caplog.at_level(logging.ERROR, logger="odradek.scheduler"):
        run(scenario)
    [record] = [r for r in caplog.records if r.name == "odradek.scheduler"]
    assert record.getMessage() == "Periodic job flaky-job failed" and record.exc_info is not None


def test_a_deadline_fires_once_and_a_cancelled_one_never() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        fired: list[str] = []
        now = clock.monotonic_ms()
        scheduler.at("session-expiry", now + 50, lambda: fired.append("kept"))
        scheduler.at("session-expiry", now + 20, lambda: fired.append("cancelled")).cancel()
        assert [(s.name, s.next_run_ms) for s in scheduler.jobs()] == [("session-expiry", now + 50)]
        clock.advance(49)
        await turns()
        assert fired == []
        clock.advance(10)
        await turns()
        clock.advance(100)
        await turns()
        assert fired == ["kept"] and scheduler.jobs() == []
        await scheduler.close()

    run(scenario)


def test_deadlines_on_the_system_clock_fire_in_deadline_order() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(SYSTEM_CLOCK)
        fired = asyncio.Queue[str]()
        now = SYSTEM_CLOCK.monotonic_ms()
        scheduler.at("later", now + 40, lambda: fired.put_nowait("later"))
        scheduler.at("sooner", now + 10, lambda: fired.put_nowait("sooner"))
        scheduler.at("past", now - 5, lambda: fired.put_nowait("past"))
        assert [await fired.get() for _ in range(3)] == ["past", "sooner", "later"]
        assert SYSTEM_CLOCK.monotonic_ms() >= now + 40
        await scheduler.close()

    run(scenario)


def test_jobs_lists_periodic_jobs_with_their_next_run() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        scheduler.every("log-retention", 300, lambda: None)
        scheduler.every("log-flusher", 1000, lambda: None, initial_delay_ms=5)
        now = clock.monotonic_ms()
        assert {(s.name, s.next_run_ms, s.periodic) for s in scheduler.jobs()} == {
            ("log-retention", now + 300, True),
            ("log-flusher", now + 5, True),
        }
        with pytest.raises(ValueError, match="log-retention"):
            scheduler.every("log-retention", 1, lambda: None)
        await scheduler.close()

    run(scenario)


def test_a_lane_runs_off_the_loop_in_threads_named_after_it() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(SYSTEM_CLOCK, Lanes({Lane.LOG_IO: 2}))
        loop_thread = threading.current_thread()
        both_in = threading.Barrier(2, timeout=5)

        def work(value: int) -> tuple[str, int]:
            both_in.wait()  # two at once: the lane has two threads, and the loop is not blocked
            assert threading.current_thread() is not loop_thread
            return threading.current_thread().name, value * 2

        lane = Lane.LOG_IO
        results = await asyncio.gather(scheduler.run(lane, work, 1), scheduler.run(lane, work, 2))
        assert [value for _, value in results] == [2, 4]
        assert all(name.startswith("log-io_") for name, _ in results)
        assert scheduler.lanes.threads(Lane.LOG_IO) == 2 and scheduler.lanes.threads(Lane.CLEANER) == 1
        cleaner_thread = scheduler.lanes.submit(Lane.CLEANER, threading.current_thread).result()
        assert cleaner_thread.name.startswith("cleaner_")
        await scheduler.close()

    run(scenario)


def test_stop_lets_a_run_in_progress_finish_and_cancel_abandons_it() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        release = asyncio.Event()
        finished: list[str] = []

        def slow(name: str) -> Callable[[], Awaitable[None]]:
            async def job() -> None:
                await release.wait()
                finished.append(name)

            return job

        stopped = scheduler.every("stopped", 10, slow("stopped"))
        cancelled = scheduler.every("cancelled", 10, slow("cancelled"))
        clock.advance(10)
        await turns()
        stopping = asyncio.create_task(scheduler.stop(stopped))
        await scheduler.cancel(cancelled)
        await turns()
        assert not stopping.done()  # waits for the run
        release.set()
        await stopping
        assert finished == ["stopped"] and scheduler.jobs() == []
        clock.advance(100)
        await turns()
        assert finished == ["stopped"]
        await scheduler.close()

    run(scenario)


def test_close_cancels_jobs_timers_and_stops_listening_to_the_clock() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock)
        fired: list[str] = []
        job = scheduler.every("job", 10, lambda: fired.append("job"))
        scheduler.at("deadline", clock.monotonic_ms() + 10, lambda: fired.append("deadline"))
        await scheduler.close()
        assert job.task is not None and job.task.done()
        clock.advance(100)
        await turns()
        assert fired == [] and scheduler.jobs() == []
        with pytest.raises(RuntimeError, match="closed"):
            scheduler.at("late", 0, lambda: None)
        with pytest.raises(RuntimeError, match="closed"):
            scheduler.every("late", 10, lambda: None)
        with pytest.raises(RuntimeError):
            scheduler.lanes.submit(Lane.LOG_IO, print)

    run(scenario)
