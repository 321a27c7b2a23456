"""Quiet partitions of an incremental fetch (replication/quiet.py): a partition read at its fetchable
end with nothing to say is marked, later fetches of the session may skip it while the mark holds,
a waiting fetch still watches it, and a follower resting on its session's clock stays caught up."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.replication.partition import READ_COMMITTED, READ_UNCOMMITTED, FetchClock
from odradek.replication.types import FetchParams
from tests.server.test_replica_manager import T0, T1, Harness, batch, request, run, settle


def params(
    replica_id: int = -1, max_wait_ms: int = 0, isolation_level: int = READ_UNCOMMITTED
) -> FetchParams:
    return FetchParams(replica_id, max_wait_ms, 1, 1 << 20, isolation_level)


def test_a_partition_at_its_end_is_marked_and_the_mark_holds_until_it_moves(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        await h.rm.append_records({T0: batch(2)}, 1, 1000)
        fetched = await h.rm.fetch_session([request(T0, 0), request(T1, 0)], [], params(), FetchClock())
        behind, at_end = fetched.marks
        assert behind is None and at_end is not None  # T0 had records to read
        assert h.rm.still_quiet(at_end, READ_UNCOMMITTED)
        assert not h.rm.still_quiet(at_end, READ_COMMITTED)  # asked at another isolation level
        await h.rm.append_records({T1: batch(1)}, 1, 1000)
        assert not h.rm.still_quiet(at_end, READ_UNCOMMITTED)

    run(scenario, tmp_path)


def test_a_waiting_fetch_watches_its_quiet_partitions_without_reading_them(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        first = await h.rm.fetch_session([request(T0, 0), request(T1, 0)], [], params(), FetchClock())
        quiet = [mark for mark in first.marks if mark is not None]
        assert len(quiet) == 2
        skipped = h.rm.partition(*T0)
        assert skipped is not None
        skipped.at_fetchable_end = None  # type: ignore[assignment,method-assign]  # a read would fail
        waiting = asyncio.create_task(h.rm.fetch_session([], quiet, params(max_wait_ms=60_000), FetchClock()))
        await settle()
        assert not waiting.done() and h.rm.fetch_purgatory.watched(T0) == 1
        await h.rm.append_records({T1: batch(3)}, 1, 1000)
        fetched = await waiting
        assert fetched.results == [] and list(fetched.woken) == [1]
        assert fetched.woken[1].size > 0 and fetched.woken[1].high_watermark == 3

    run(scenario, tmp_path)


def test_a_resting_follower_stays_caught_up_while_its_session_fetches(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1))
        leader = h.rm.partition(*T0)
        assert leader is not None
        await h.rm.fetch_messages([request(T0, 0)], 1, 1 << 20, 0, READ_UNCOMMITTED, 1)
        clock = FetchClock()
        h.clock.advance(100)
        fetched = await h.rm.fetch_session([request(T0, 0)], [], params(replica_id=1), clock)
        assert fetched.marks[0] is not None and clock.ms == h.clock.time_ms()
        h.clock.advance(60_000)
        clock.ms = h.clock.time_ms()  # the session's later fetches skip T0
        assert leader.isr_to_shrink(h.clock.time_ms() + 1, lag_time_max_ms=30_000) is None
        fetched.marks[0].release()  # the session forgot T0: its clock no longer counts there
        clock.ms += 60_000
        assert leader.isr_to_shrink(h.clock.time_ms() + 30_001, lag_time_max_ms=30_000) is not None

    run(scenario, tmp_path)
