"""ReplicaManager: appends with acks 0/1/-1 through the produce purgatory, fetch long polls through the
fetch purgatory, response size limits, the partition life cycle driven by LeaderAndIsr / StopReplica
(logs loaded in the background), HW checkpoints."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from odradek.clock import ManualClock
from odradek.controller.channel import ControllerIdentity, leader_and_isr_request, stop_replica_request
from odradek.controller.metadata import EPOCH_DURING_DELETE, BrokerInfo, Endpoint, PartitionState
from odradek.controller.waiters import wait_until
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.replication import replica_manager
from odradek.replication.partition import READ_COMMITTED, READ_UNCOMMITTED
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.types import (
    FetchPartitionRequest,
    LeadershipChange,
    ListOffsetsPartitionRequest,
    TxnMarker,
)
from odradek.scheduler import Lane, Lanes, Scheduler
from odradek.server.metadata_cache import MetadataCache
from odradek.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.manager import LogManager

T0 = ("t", 0)
T1 = ("t", 1)
BROKER = BrokerInfo(0, (Endpoint("PLAINTEXT", "localhost", 9092),))
CONTROLLER = ControllerIdentity(controller_id=0, controller_epoch=1)


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def batch(count: int = 1, size: int = 10) -> memoryview:
    return memoryview(build_batch([SimpleRecord(b"x" * size, timestamp=1000 + i) for i in range(count)]))


class Harness:
    """A ReplicaManager over a real LogManager and a MetadataCache in `tmp_path`, on a ManualClock,
    driven by LeaderAndIsr / StopReplica requests as the controller sends them."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.clock = ManualClock()
        self.cache = MetadataCache(0)
        self.configs: dict[str, LogConfig] = {}
        self.log_manager = LogManager([tmp_path], LogConfig(), self.clock)
        self.scheduler = Scheduler(self.clock, Lanes({Lane.LOG_LOAD: 1}))
        self.rm = self.replica_manager()
        self.rm.start()

    async def close(self) -> None:
        await self.rm.shutdown()
        self.log_manager.shutdown()
        await self.scheduler.close()

    def replica_manager(self, checkpoint_interval_ms: int = 0) -> ReplicaManager:
        return ReplicaManager(
            0,
            self.log_manager,
            self.cache,
            self.clock,
            scheduler=self.scheduler,
            topic_config=lambda name: self.configs.get(name, LogConfig()),
            log_dirs=[self.dir],
            checkpoint_interval_ms=checkpoint_interval_ms,
        )

    async def lead(
        self,
        key: tuple[str, int],
        replicas: tuple[int, ...],
        isr: tuple[int, ...] | None = None,
        epoch: int = 1,
        rm: ReplicaManager | None = None,
        **config: int,
    ) -> None:
        """Make this broker lead `key` (LeaderAndIsr) and wait until it serves."""
        rm = rm or self.rm
        self.configs[key[0]] = LogConfig(**config)
        state = PartitionState(0, epoch, replicas, replicas if isr is None else isr, 1, epoch)
        topics = {key[0]: (topic_id(key[0]), {key[1]: state})}
        response = rm.become_leader_or_follower(leader_and_isr_request(CONTROLLER, topics, [BROKER]))
        assert [p.error_code for t in response.topics for p in t.partition_errors] == [0]
        assert await wait_until(lambda: rm.serves_as_leader(*key), 10, rm.ready_changed)

    def fetch(
        self,
        *requests: FetchPartitionRequest,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 60_000,
        replica_id: int = -1,
    ) -> Awaitable[Any]:
        return self.rm.fetch_messages(
            list(requests), min_bytes, max_bytes, max_wait_ms, READ_UNCOMMITTED, replica_id
        )


def run(scenario: Callable[[Harness], Awaitable[None]], tmp_path: Path) -> None:
    async def main() -> None:
        harness = Harness(tmp_path)
        await scenario(harness)
        await harness.close()

    asyncio.run(main())


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def request(
    key: tuple[str, int], offset: int, max_bytes: int = 1 << 20, epoch: int = -1
) -> FetchPartitionRequest:
    return FetchPartitionRequest(key[0], key[1], offset, max_bytes, epoch)


def test_acks_one_and_all_on_single_replica_answer_at_once(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        first = await h.rm.append_records({T0: batch(3)}, 1, 1000)
        second = await h.rm.append_records({T0: batch(2)}, -1, 1000)
        assert (first[T0].error_code, first[T0].base_offset) == (0, 0)
        assert (second[T0].error_code, second[T0].base_offset, second[T0].log_start_offset) == (0, 3, 0)
        assert second[T0].log_append_time == -1
        assert h.rm.partition(*T0).high_watermark == 5
        assert len(h.rm.produce_purgatory) == 0

    run(scenario, tmp_path)


def test_acks_all_on_single_replica_creates_no_delayed_operation(tmp_path: Path, monkeypatch: Any) -> None:
    def no_delayed_produce(*args: object) -> None:
        raise AssertionError("a DelayedProduce for an append the ISR of the leader alone has covered")

    monkeypatch.setattr(replica_manager, "DelayedProduce", no_delayed_produce)

    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        result = await h.rm.append_records({T0: batch(2)}, -1, 1000)
        assert (result[T0].error_code, result[T0].base_offset) == (ErrorCode.NONE, 0)
        assert h.rm.partition(*T0).high_watermark == 2

    run(scenario, tmp_path)


def test_acks_all_parks_only_the_partitions_left_waiting(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0, 1))
        produce = asyncio.create_task(h.rm.append_records({T0: batch(), T1: batch(2)}, -1, 30_000))
        await settle()
        assert not produce.done()
        assert (h.rm.produce_purgatory.watched(T0), h.rm.produce_purgatory.watched(T1)) == (0, 1)
        await h.fetch(request(T1, 2), replica_id=1, max_wait_ms=0)
        result = await produce
        assert [(result[k].error_code, result[k].base_offset) for k in (T0, T1)] == [(0, 0), (0, 0)]
        assert len(h.rm.produce_purgatory) == 0

    run(scenario, tmp_path)


def test_acks_all_waits_for_follower_then_completes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1))
        produce = asyncio.create_task(h.rm.append_records({T0: batch(2)}, -1, 30_000))
        await settle()
        assert not produce.done() and h.rm.produce_purgatory.watched(T0) == 1
        follower = await h.fetch(request(T0, 1), replica_id=1, max_wait_ms=0)  # proves offset 0 only
        assert follower[0].size > 0 and not produce.done()
        await h.fetch(request(T0, 2), replica_id=1, max_wait_ms=0)
        result = await produce
        assert (result[T0].error_code, result[T0].base_offset) == (ErrorCode.NONE, 0)
        assert h.rm.partition(*T0).high_watermark == 2

    run(scenario, tmp_path)


def test_acks_all_times_out_on_the_injected_clock(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1))
        produce = asyncio.create_task(h.rm.append_records({T0: batch()}, -1, 500))
        await settle()
        h.clock.advance(499)
        assert h.rm.produce_purgatory.expire_due() == 0
        h.clock.advance(1)
        assert h.rm.produce_purgatory.expire_due() == 1
        result = await produce
        assert (result[T0].error_code, result[T0].base_offset) == (ErrorCode.REQUEST_TIMED_OUT, 0)

    run(scenario, tmp_path)


def test_acks_all_with_isr_below_min_insync_replicas(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1), isr=(0,), min_insync_replicas=2)
        refused = await h.rm.append_records({T0: batch()}, -1, 1000)
        assert refused[T0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert h.rm.partition(*T0).log_end_offset == 0
        accepted = await h.rm.append_records({T0: batch()}, 1, 1000)
        assert accepted[T0].error_code == ErrorCode.NONE

    run(scenario, tmp_path)


def test_isr_shrinking_after_append_answers_not_enough_replicas_after_append(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1), min_insync_replicas=2)
        produce = asyncio.create_task(h.rm.append_records({T0: batch()}, -1, 30_000))
        await settle()
        await h.lead(T0, (0, 1), isr=(0,), epoch=2, min_insync_replicas=2)  # the follower dropped out
        result = await produce
        assert result[T0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    run(scenario, tmp_path)


def test_produce_to_unknown_partition_and_bad_batch(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        corrupt = bytearray(batch())
        corrupt[-1] ^= 0xFF
        result = await h.rm.append_records({("nope", 0): batch(), T0: memoryview(bytes(corrupt))}, -1, 1000)
        assert result[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert result[T0].error_code == ErrorCode.CORRUPT_MESSAGE and result[T0].error_message
        assert h.rm.partition(*T0).log_end_offset == 0

    run(scenario, tmp_path)


def test_long_poll_fetch_is_woken_by_append(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        fetch = asyncio.create_task(h.fetch(request(T0, 0)))
        await settle()
        assert not fetch.done() and h.rm.fetch_purgatory.watched(T0) == 1
        await h.rm.append_records({T0: batch(2)}, 1, 1000)
        [result] = await fetch
        assert result.error_code == ErrorCode.NONE and result.high_watermark == 2
        assert result.size == result.records[0].length > 0
        assert len(h.rm.fetch_purgatory) == 0

    run(scenario, tmp_path)


def test_long_poll_waits_for_min_bytes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        one = len(batch(1, size=100))
        fetch = asyncio.create_task(h.fetch(request(T0, 0), min_bytes=2 * one + 1))
        await settle()
        await h.rm.append_records({T0: batch(1, size=100)}, 1, 1000)
        await h.rm.append_records({T0: batch(1, size=100)}, 1, 1000)
        await settle()
        assert not fetch.done()
        await h.rm.append_records({T0: batch(1, size=100)}, 1, 1000)
        [result] = await fetch
        assert result.size == 3 * one

    run(scenario, tmp_path)


def test_long_poll_expires_with_what_is_there(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.rm.append_records({T0: batch(1)}, 1, 1000)
        fetch = asyncio.create_task(h.fetch(request(T0, 0), min_bytes=1 << 20, max_wait_ms=200))
        await settle()
        assert not fetch.done()
        h.clock.advance(200)
        h.rm.fetch_purgatory.expire_due()
        [result] = await fetch
        assert result.error_code == ErrorCode.NONE and result.size == len(batch(1))

    run(scenario, tmp_path)


def test_an_append_looks_only_at_its_own_partition_of_a_waiting_fetch(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        fetch = asyncio.create_task(h.fetch(request(T0, 0), request(T1, 0)))
        await settle()
        looked_at: list[tuple[str, int]] = []
        partition = h.rm.partition
        h.rm.partition = lambda *key: looked_at.append(key) or partition(*key)  # type: ignore[method-assign]
        await h.rm.append_records({T1: batch(1)}, 1, 1000)
        first, second = await fetch
        assert looked_at == [T1]  # the waiting fetch's check (the completing read covers both)
        assert first.size == 0 and second.size > 0

    run(scenario, tmp_path)


def test_a_fetch_woken_by_a_produce_carries_every_partition_of_it(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        fetch = asyncio.create_task(h.fetch(request(T0, 0), request(T1, 0)))
        await settle()
        await h.rm.append_records({T0: batch(1), T1: batch(1)}, 1, 1000)
        first, second = await fetch
        assert first.size > 0 and second.size > 0

    run(scenario, tmp_path)


def test_a_woken_fetch_rereads_only_the_partitions_that_changed(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        fetch = asyncio.create_task(h.fetch(request(T0, 0), request(T1, 0)))
        await settle()
        idle = h.rm.partition(*T1)
        assert idle is not None
        idle.at_fetchable_end = None  # type: ignore[assignment,method-assign]  # a re-read would fail
        await h.rm.append_records({T0: batch(1)}, 1, 1000)
        first, second = await fetch
        assert first.size > 0
        assert (second.error_code, second.size, second.high_watermark) == (0, 0, 0)

    run(scenario, tmp_path)


def test_partitions_at_their_fetchable_end_are_answered_without_a_log_read(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        await h.rm.append_records({T0: batch(2), T1: batch(1)}, 1, 1000)
        idle = h.rm.partition(*T1)
        assert idle is not None
        idle.log.read = None  # type: ignore[method-assign]  # any read of its log would fail
        first, second = await h.fetch(request(T0, 0), request(T1, 1, epoch=1), max_wait_ms=0)
        assert first.size > 0
        assert (second.error_code, second.size, second.high_watermark) == (0, 0, 1)

    run(scenario, tmp_path)


def test_consumer_fetch_is_not_woken_until_the_high_watermark_moves(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1))
        consumer = asyncio.create_task(h.fetch(request(T0, 0)))
        await settle()
        await h.rm.append_records({T0: batch()}, 1, 1000)
        await settle()
        assert not consumer.done()  # appended, but not committed
        await h.fetch(request(T0, 1), replica_id=1, max_wait_ms=0)
        [result] = await consumer
        assert result.size > 0 and result.high_watermark == 1

    run(scenario, tmp_path)


def test_fetch_response_limits(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        big = len(batch(1, size=1000))
        await h.rm.append_records({T0: batch(1, size=1000)}, 1, 1000)
        await h.rm.append_records({T0: batch(1, size=1000)}, 1, 1000)
        await h.rm.append_records({T1: batch(1, size=1000)}, 1, 1000)
        # The first batch of the first non-empty partition comes even beyond both limits...
        first, second = await h.fetch(request(T0, 0, max_bytes=10), request(T1, 0), max_bytes=100)
        assert first.size == big and second.size == 0 and second.error_code == ErrorCode.NONE
        # ...partition_max_bytes bounds each partition, max_bytes the response.
        first, second = await h.fetch(request(T0, 0, max_bytes=big + 1), request(T1, 0), max_bytes=2 * big)
        assert (first.size, second.size) == (big, big)
        first, second = await h.fetch(request(T0, 0), request(T1, 0), max_bytes=2 * big)
        assert (first.size, second.size) == (2 * big, 0)
        empty, second = await h.fetch(request(T0, 2), request(T1, 0), max_bytes=10, max_wait_ms=0)
        assert (empty.size, second.size) == (0, big)

    run(scenario, tmp_path)


def test_fetch_errors(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,), epoch=4)
        await h.rm.append_records({T0: batch(2)}, 1, 1000)
        out_of_range, unknown, fenced, ahead, fine = await h.fetch(
            request(T0, 5),
            request(("nope", 0), 0),
            request(T0, 0, epoch=3),
            request(T0, 0, epoch=5),
            request(T0, 0),
        )
        assert (out_of_range.error_code, out_of_range.high_watermark, out_of_range.log_start_offset) == (
            1,
            2,
            0,
        )
        assert out_of_range.last_stable_offset == 2
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert fine.error_code == ErrorCode.NONE and fine.size > 0

    run(scenario, tmp_path)


def test_waiting_fetch_completes_once_despite_many_appends(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.lead(T1, (0,))
        fetch = asyncio.create_task(h.fetch(request(T0, 0), request(T1, 0)))
        await settle()
        assert h.rm.fetch_purgatory.watched(T0) == h.rm.fetch_purgatory.watched(T1) == 1
        await h.rm.append_records({T0: batch(), T1: batch()}, 1, 1000)  # completes it, both appended
        await h.rm.append_records({T0: batch()}, 1, 1000)
        first, second = await fetch
        assert (first.size, second.size) == (len(batch()), len(batch()))
        assert h.rm.fetch_purgatory.watched(T0) == h.rm.fetch_purgatory.watched(T1) == 0

    run(scenario, tmp_path)


def test_leader_and_isr_hosts_partitions_and_stop_replica_deletes_them(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        changes: list[LeadershipChange] = []
        h.rm.add_leadership_listener(changes.append)
        states = {p: PartitionState(0, 0, (0,), (0,), 1, 0) for p in (0, 1)}
        h.configs["events"] = LogConfig(retention_ms=1234)
        events_id = topic_id("events")
        h.rm.become_leader_or_follower(
            leader_and_isr_request(CONTROLLER, {"events": (events_id, states)}, [])
        )
        assert h.rm.leads_loading("events", 0) and not h.rm.serves_as_leader("events", 0)  # loading
        assert await wait_until(lambda: h.rm.serves_as_leader("events", 1), 10, h.rm.ready_changed)
        assert await wait_until(lambda: h.rm.serves_as_leader("events", 0), 10, h.rm.ready_changed)
        assert not h.rm.leads_loading("events", 0)
        assert sorted(p.partition for p in h.rm.partitions()) == [0, 1]
        assert h.rm.partition("events", 1).topic_id == events_id
        assert h.rm.topic_name(events_id) == "events"
        assert h.log_manager.get_log("events", 0).config.retention_ms == 1234
        assert sorted((c.partition, c.is_leader, c.leader_epoch) for c in changes) == [
            (0, True, 0),
            (1, True, 0),
        ]
        waiting = asyncio.create_task(h.fetch(request(("events", 0), 0)))
        await settle()
        stop = stop_replica_request(
            CONTROLLER, {"events": {0: EPOCH_DURING_DELETE, 1: EPOCH_DURING_DELETE}}, True
        )
        assert [p.error_code for p in h.rm.stop_replicas(stop).partition_errors] == [0, 0]
        [result] = await waiting
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # the cache never knew it
        assert h.rm.partitions() == [] and h.rm.topic_name(events_id) is None
        assert changes[-1] == LeadershipChange("events", 1, False, -1)
        assert await wait_until(lambda: h.log_manager.get_log("events", 1) is None, 10, h.rm.ready_changed)
        await h.rm.shutdown()
        assert not (h.dir / "events-0").exists() and not (h.dir / "events-1").exists()

    run(scenario, tmp_path)


def test_a_partition_deleted_and_created_again_at_once_starts_empty(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.rm.append_records({T0: batch(3)}, 1, 1000)
        h.rm.stop_replicas(stop_replica_request(CONTROLLER, {"t": {0: EPOCH_DURING_DELETE}}, True))
        state = PartitionState(0, 0, (0,), (0,), 1, 0)
        again = leader_and_isr_request(CONTROLLER, {"t": (uuid.uuid4(), {0: state})}, [BROKER])
        assert [
            p.error_code for t in h.rm.become_leader_or_follower(again).topics for p in t.partition_errors
        ] == [0]
        assert await wait_until(lambda: h.rm.serves_as_leader(*T0), 10, h.rm.ready_changed)
        assert h.rm.partition(*T0).log_end_offset == 0

    run(scenario, tmp_path)


def test_list_offsets(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,), epoch=2)
        await h.rm.append_records({T0: batch(3)}, 1, 1000)  # timestamps 1000-1002
        latest, earliest, by_time, missing, unknown, fenced = h.rm.offset_lookups().offsets_for_timestamp(
            [
                ListOffsetsPartitionRequest("t", 0, -1),
                ListOffsetsPartitionRequest("t", 0, -2),
                ListOffsetsPartitionRequest("t", 0, 1001),
                ListOffsetsPartitionRequest("t", 0, 5000),
                ListOffsetsPartitionRequest("x", 0, -1),
                ListOffsetsPartitionRequest("t", 0, -1, current_leader_epoch=1),
            ],
            READ_UNCOMMITTED,
        )
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (0, 3, 2)
        assert earliest.offset == 0
        assert (by_time.timestamp, by_time.offset) == (1001, 1)
        assert (missing.error_code, missing.timestamp, missing.offset) == (0, -1, -1)
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH

    run(scenario, tmp_path)


def test_list_offsets_for_a_worker_thread_read_a_copy_of_the_partition_map(tmp_path: Path) -> None:
    """The map lives on the event loop: a worker's lookups see it as it was when they were taken
    there, and a partition stopped meanwhile changes the live map only."""

    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,), epoch=2)
        await h.rm.append_records({T0: batch(3)}, 1, 1000)
        in_worker = h.rm.offset_lookups(in_worker=True)
        h.rm.stop_replicas(stop_replica_request(CONTROLLER, {"t": {0: 3}}, False))
        latest = [ListOffsetsPartitionRequest("t", 0, -1)]
        (copied,) = await asyncio.to_thread(in_worker.offsets_for_timestamp, latest, READ_UNCOMMITTED)
        (live,) = h.rm.offset_lookups().offsets_for_timestamp(latest, READ_UNCOMMITTED)
        assert (copied.error_code, copied.offset) == (ErrorCode.NONE, 3)
        assert live.error_code != ErrorCode.NONE

    run(scenario, tmp_path)


def test_high_watermark_checkpoint_round_trip(tmp_path: Path) -> None:
    kept = ("kept", 0)

    async def first_run(h: Harness) -> None:
        await h.lead(kept, (0, 1))
        await h.rm.append_records({kept: batch(4)}, 1, 1000)
        await h.fetch(request(kept, 2), replica_id=1, max_wait_ms=0)  # the follower confirms 0-1

    run(first_run, tmp_path)
    assert read_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {kept: 2}

    async def second_run(h: Harness) -> None:
        await h.lead(kept, (0, 1), epoch=2)
        hosted = h.rm.partition(*kept)
        assert (hosted.high_watermark, hosted.log_end_offset) == (2, 4)  # not 0, not the LEO

    run(second_run, tmp_path)


def test_high_watermark_checkpoint_is_written_periodically(tmp_path: Path) -> None:
    async def main() -> None:
        harness = Harness(tmp_path)
        periodic = harness.replica_manager(checkpoint_interval_ms=10)
        periodic.start()
        await harness.lead(("ticking", 0), (0,), rm=periodic)
        await periodic.append_records({("ticking", 0): batch(3)}, 1, 1000)
        path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
        await asyncio.sleep(0.05)
        assert ("ticking", 0) not in read_checkpoint(path)  # the clock has not moved yet
        harness.clock.advance(10)  # the first write is due 10 ms after the start
        for _ in range(500):  # written in a worker thread; allow a slow machine
            if read_checkpoint(path).get(("ticking", 0)) == 3:
                break
            await asyncio.sleep(0.01)
        assert read_checkpoint(path)[("ticking", 0)] == 3
        await periodic.shutdown()
        await harness.close()

    asyncio.run(main())


def test_waiting_fetch_completes_when_its_offset_leaves_the_log(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1))
        await h.rm.append_records({T0: batch(3)}, 1, 1000)
        follower = asyncio.create_task(h.fetch(request(T0, 3), replica_id=1))
        await settle()
        assert not follower.done()
        h.rm.partition(*T0).log.truncate_to(1)
        assert h.rm.fetch_purgatory.check_and_complete(T0) == 1
        [result] = await follower
        assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE

    run(scenario, tmp_path)


def test_a_throttled_partition_is_held_back_from_an_out_of_sync_follower(tmp_path: Path) -> None:
    """KIP-73 at the leader: once the throttled bytes pass the rate, a follower outside the ISR gets
    nothing for the partition and its fetch waits (no empty answer at once); an in-sync one is
    never held back."""

    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0, 1, 2), isr=(0, 2))
        await h.rm.append_records({T0: batch(4, size=1000)}, 1, 1000)
        h.rm.leader_quota.rate = 1
        h.rm.leader_quota.set_throttled_replicas(T0[0], f"{T0[1]}:0")
        first = await h.fetch(request(T0, 0, max_bytes=1000), replica_id=1, max_wait_ms=0)
        assert first[0].size > 0  # under the rate until these bytes are counted
        held = asyncio.create_task(h.fetch(request(T0, 1), replica_id=1, max_wait_ms=500))
        await settle()
        assert not held.done()
        await h.rm.append_records({T0: batch(1)}, 1, 1000)
        await settle()
        assert not held.done()  # new data does not complete it either
        h.clock.advance(500)
        h.rm.fetch_purgatory.expire_due()
        assert (await held)[0].size == 0
        in_sync = await h.fetch(request(T0, 1), replica_id=2, max_wait_ms=0)
        assert in_sync[0].size > 0


def txn_batch(producer_id: int = 7) -> memoryview:
    records = [SimpleRecord(b"t", timestamp=1000)]
    data = build_batch(
        records, producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    return memoryview(bytearray(data))


def test_a_read_committed_fetch_is_woken_when_a_marker_moves_the_lso(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        h.rm.partition(*T0).log.append_as_leader(txn_batch(), 1)  # the storage path, as a coordinator would
        h.rm.partition(*T0).maybe_increment_high_watermark()
        consumer = asyncio.create_task(
            h.rm.fetch_messages([request(T0, 0)], 1, 1 << 20, 60_000, READ_COMMITTED, -1)
        )
        await settle()
        assert not consumer.done()  # the open transaction holds the LSO at 0
        responses = await h.rm.write_txn_markers(TxnMarker(7, 0, 0, False), [T0, T1], 1000)
        assert responses[T0].error_code == ErrorCode.NONE and responses[T0].base_offset == 1
        assert responses[T1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        [result] = await consumer
        assert (result.high_watermark, result.last_stable_offset) == (2, 2) and result.size > 0
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions or ()] == [(7, 0)]

    run(scenario, tmp_path)


def test_a_marker_with_an_old_producer_epoch_is_refused(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(T0, (0,))
        await h.rm.write_txn_markers(TxnMarker(7, 3, 0, True), [T0], 1000)
        responses = await h.rm.write_txn_markers(TxnMarker(7, 2, 0, True), [T0], 1000)
        assert responses[T0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH

    run(scenario, tmp_path)
