"""Kafka's fencing of controller requests on a broker (pure rules and the ReplicaManager applying them),
and the background partition loader: not-ready partitions, shutdown in the middle of a load."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.controller.channel import (
    ControllerIdentity,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.controller.waiters import wait_until
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.replication import fencing
from odradek.replication.replica_manager import ReplicaManager
from odradek.scheduler import Lane, Lanes, Scheduler
from odradek.server.metadata_cache import MetadataCache
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.manager import LogManager

BROKER = BrokerInfo(0, (Endpoint("PLAINTEXT", "localhost", 9092),))
TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_DNS, "t")


def state(leader_epoch: int, replicas: tuple[int, ...] = (0,), leader: int = 0) -> PartitionState:
    return PartitionState(leader, leader_epoch, replicas, replicas, 1, leader_epoch)


def leader_and_isr(controller_epoch: int, states: dict[int, PartitionState], topic_id: uuid.UUID = TOPIC_ID):
    return leader_and_isr_request(
        ControllerIdentity(0, controller_epoch), {"t": (topic_id, states)}, [BROKER]
    )


def codes(response: Any) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partition_errors]


# -- the pure rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "requested", "replicas", "request_id", "known_id", "expected"),
    [
        (-1, 0, (0,), TOPIC_ID, None, ErrorCode.NONE),
        (3, 4, (1, 0), TOPIC_ID, TOPIC_ID, ErrorCode.NONE),
        (3, 3, (0,), TOPIC_ID, TOPIC_ID, ErrorCode.STALE_CONTROLLER_EPOCH),
        (3, 2, (0,), TOPIC_ID, TOPIC_ID, ErrorCode.STALE_CONTROLLER_EPOCH),
        (3, 4, (1, 2), TOPIC_ID, TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (3, 4, (0,), uuid.uuid4(), TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID),
    ],
)
def test_leader_and_isr_partition_rules(current, requested, replicas, request_id, known_id, expected):
    assert fencing.leader_and_isr_error(current, requested, replicas, 0, request_id, known_id) == expected


@pytest.mark.parametrize(
    ("current", "requested", "expected"),
    [
        (None, 3, ErrorCode.NONE),
        (3, -1, ErrorCode.NONE),
        (3, -2, ErrorCode.NONE),
        (3, 4, ErrorCode.NONE),
        (3, 3, ErrorCode.FENCED_LEADER_EPOCH),
        (3, 2, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_stop_replica_partition_rules(current, requested, expected):
    assert fencing.stop_replica_error(current, requested) == expected


# -- the ReplicaManager ----------------------------------------------------------------------------


class GatedLogManager(LogManager):
    """A LogManager whose log creation waits for `gate` (a slow disk), counting the calls."""

    def __init__(self, directory: Path) -> None:
        super().__init__([directory], LogConfig(), ManualClock())
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0
        self.order: list[tuple[str, int]] = []

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        self.calls += 1
        self.order.append((topic, partition))
        self.entered.set()
        self.gate.wait(10)
        return super().get_or_create_log(topic, partition, config)


def replica_manager(log_manager: LogManager, cache: MetadataCache, scheduler: Scheduler) -> ReplicaManager:
    return ReplicaManager(0, log_manager, cache, scheduler.clock, scheduler=scheduler)


async def serving(rm: ReplicaManager, *indexes: int) -> bool:
    return await wait_until(lambda: all(rm.serves_as_leader("t", i) for i in indexes), 10, rm.ready_changed)


def run(scenario: Any, tmp_path: Path, log_manager: LogManager | None = None) -> None:
    async def main() -> None:
        manager = log_manager or LogManager([tmp_path], LogConfig(), ManualClock())
        scheduler = Scheduler(ManualClock(), Lanes({Lane.LOG_LOAD: 1}))
        rm = replica_manager(manager, MetadataCache(0), scheduler)
        try:
            await scenario(rm)
        finally:
            await rm.shutdown()
            manager.shutdown()
            await scheduler.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_leader_and_isr_refuses_old_and_equal_leader_epochs_per_partition(tmp_path):
    async def scenario(rm: ReplicaManager) -> None:
        rm.become_leader_or_follower(leader_and_isr(1, {0: state(3), 1: state(3)}))
        assert await serving(rm, 0, 1)
        mixed = rm.become_leader_or_follower(
            leader_and_isr(1, {0: state(2), 1: state(3), 2: state(0, replicas=(1, 2), leader=1)})
        )
        expected = [ErrorCode.STALE_CONTROLLER_EPOCH] * 2 + [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert mixed.error_code == ErrorCode.NONE and codes(mixed) == expected
        other_id = rm.become_leader_or_follower(leader_and_isr(1, {0: state(9)}, uuid.uuid4()))
        assert codes(other_id) == [ErrorCode.INCONSISTENT_TOPIC_ID]
        newer = rm.become_leader_or_follower(leader_and_isr(1, {0: state(4, replicas=(1, 0), leader=1)}))
        assert codes(newer) == [0]
        assert await wait_until(lambda: not rm.partition("t", 0).is_leader, 10, rm.ready_changed)
        assert [p.leader_epoch for p in rm.partitions()] == [4, 3]

    run(scenario, tmp_path)


def test_stop_replica_is_fenced_by_leader_epoch(tmp_path):
    """(The whole-request fence by controller epoch is the broker's: test_control_plane_handlers.)"""

    async def scenario(rm: ReplicaManager) -> None:
        rm.become_leader_or_follower(leader_and_isr(2, {0: state(3), 1: state(3)}))
        assert await serving(rm, 0, 1)
        request = stop_replica_request(ControllerIdentity(0, 2), {"t": {0: 3, 1: 4}}, delete=False)
        assert [p.error_code for p in rm.stop_replicas(request).partition_errors] == [
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.NONE,
        ]
        assert rm.partition("t", 0) is not None and rm.partition("t", 1) is None
        assert (tmp_path / "t-1").is_dir()  # stopped, not deleted

    run(scenario, tmp_path)


def test_a_partition_still_loading_answers_not_leader_or_follower(tmp_path):
    log_manager = GatedLogManager(tmp_path)

    async def scenario(rm: ReplicaManager) -> None:
        cache = rm.metadata_cache
        assert isinstance(cache, MetadataCache)
        rm.become_leader_or_follower(leader_and_isr(1, {0: state(0)}))
        cache.update_metadata(
            update_metadata_request(ControllerIdentity(0, 1), {"t": (TOPIC_ID, {0: state(0)})}, [BROKER])
        )
        records = memoryview(build_batch([SimpleRecord(b"v")]))
        refused = await rm.append_records({("t", 0): records}, 1, 1000)
        assert refused[("t", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        unknown = await rm.append_records({("u", 0): records}, 1, 1000)
        assert unknown[("u", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        log_manager.gate.set()
        assert await serving(rm, 0)
        accepted = await rm.append_records({("t", 0): records}, 1, 1000)
        assert accepted[("t", 0)].error_code == ErrorCode.NONE

    run(scenario, tmp_path, log_manager)


def test_shutdown_waits_only_for_the_partition_in_progress(tmp_path):
    log_manager = GatedLogManager(tmp_path)

    async def scenario(rm: ReplicaManager) -> None:
        rm.become_leader_or_follower(leader_and_isr(1, {p: state(0) for p in range(500)}))
        assert await asyncio.to_thread(log_manager.entered.wait, 10)
        stopping = asyncio.create_task(rm.shutdown())
        await asyncio.sleep(0)
        log_manager.gate.set()
        await stopping
        assert log_manager.calls == 1 and len(rm.partitions()) <= 1

    run(scenario, tmp_path, log_manager)


def test_internal_topics_load_before_the_partitions_queued_ahead_of_them(tmp_path):
    log_manager = GatedLogManager(tmp_path)

    async def scenario(rm: ReplicaManager) -> None:
        rm.become_leader_or_follower(leader_and_isr(1, {p: state(0) for p in range(5)}))
        assert await asyncio.to_thread(log_manager.entered.wait, 10)
        offsets = {0: state(0)}
        topics = {"__consumer_offsets": (uuid.uuid4(), offsets)}
        rm.become_leader_or_follower(leader_and_isr_request(ControllerIdentity(0, 1), topics, [BROKER]))
        log_manager.gate.set()
        assert await wait_until(lambda: len(rm.partitions()) == 6, 10, rm.ready_changed)
        assert log_manager.order[:2] == [("t", 0), ("__consumer_offsets", 0)]

    run(scenario, tmp_path, log_manager)


def test_a_state_accepted_as_the_last_loader_finishes_still_loads(tmp_path):
    """A LeaderAndIsr handled in the same turn of the loop in which the last loader ran out of work
    (before that task's done callbacks ran) must start a loader of its own."""

    async def scenario(rm: ReplicaManager) -> None:
        loop = asyncio.get_running_loop()

        def on_change(change: Any) -> None:
            if change.partition == 0 and change.is_leader:
                loop.call_soon(rm.become_leader_or_follower, leader_and_isr(1, {1: state(0)}))

        rm.add_leadership_listener(on_change)
        rm.become_leader_or_follower(leader_and_isr(1, {0: state(0)}))
        assert await serving(rm, 0, 1)

    run(scenario, tmp_path)


def test_an_accepted_state_stops_the_partitions_fetcher_before_its_log_is_prepared(tmp_path):
    """A fetched append landing between the loader writing the new leader epoch's start offset and
    the state taking effect would leave an old-epoch batch past that start, and followers would
    truncate and refetch it forever: the fetcher stops as soon as the state is accepted."""
    remote = BrokerInfo(1, (Endpoint("PLAINTEXT", "127.0.0.1", 1),))  # nothing listens there

    async def scenario(rm: ReplicaManager) -> None:
        follow = leader_and_isr_request(
            ControllerIdentity(0, 1), {"t": (TOPIC_ID, {0: state(3, (1, 0), leader=1)})}, [remote]
        )
        rm.become_leader_or_follower(follow)
        assert await wait_until(lambda: rm.fetchers.following() == {("t", 0): 1}, 10, rm.ready_changed)
        lead = leader_and_isr(1, {0: state(4, (1, 0))})
        rm.become_leader_or_follower(lead)
        assert rm.fetchers.following() == {}  # at once, before the loader ran
        assert await serving(rm, 0)
        assert rm.fetchers.following() == {}

    run(scenario, tmp_path)
