"""The controller of a cluster: membership changes (a leader dies, a follower dies, a broker comes back),
failover start-up that keeps live leaders, the requests it sends to other brokers (recorded by
a RecordingChannel standing in for the RemoteChannel), and resignation when a fenced write fails."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.channel import ClusterChannel, ControllerChannel, LocalChannel
from odradek.controller.controller import Controller, known_brokers
from odradek.controller.local import LocalMetadataStore
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.controller.store import StoredTopic
from odradek.controller.zk.errors import ControllerMovedError
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from odradek.scheduler import Scheduler
from tests.controller.test_local_controller import RecordingBroker, run

SCHEDULER = Scheduler(SYSTEM_CLOCK)  # lanes only: these tests register no timers

BROKERS = {b: BrokerInfo(b, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),)) for b in (0, 1, 2)}
ASSIGNMENT = {0: (0, 1), 1: (1, 2), 2: (2, 0)}
T = TypeVar("T")


class RecordingChannel(ControllerChannel):
    """Answers every request with success and records it as (api name, broker id, request); a
    request to a broker not in the channel (as the controller last synced it) or in `gone` fails
    as RemoteChannel fails one to a broker that left; one to a broker in `stalled` is recorded and
    never answered (a broker cut off but still registered). `synced` keeps every membership given."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, object]] = []
        self.gone: set[int] = set()
        self.stalled: set[int] = set()
        self.synced: list[frozenset[int]] = []

    async def sync_brokers(self, live: Iterable[BrokerInfo]) -> None:
        self.synced.append(frozenset(b.broker_id for b in live))

    def reached(self) -> frozenset[int]:
        return self.synced[-1] if self.synced else frozenset()

    def _record(self, api: str, broker_id: int, request: object, response: T) -> asyncio.Future[T]:
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if broker_id in self.gone or broker_id not in self.reached():
            answer.set_exception(
                KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} left the channel")
            )
        else:
            self.sent.append((api, broker_id, request))
            if broker_id not in self.stalled:
                answer.set_result(response)
        return answer

    def leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest
    ) -> asyncio.Future[LeaderAndIsrResponse]:
        return self._record("LeaderAndIsr", broker_id, request, LeaderAndIsrResponse())

    def update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest
    ) -> asyncio.Future[UpdateMetadataResponse]:
        return self._record("UpdateMetadata", broker_id, request, UpdateMetadataResponse())

    def stop_replica(
        self, broker_id: int, request: StopReplicaRequest
    ) -> asyncio.Future[StopReplicaResponse]:
        return self._record("StopReplica", broker_id, request, StopReplicaResponse())


class Cluster:
    """Controller on broker 0 over a local store, brokers 1 and 2 behind a RecordingChannel."""

    def __init__(self, path: Path, reelect_live_leaders: bool = False) -> None:
        self.store = LocalMetadataStore(path, SCHEDULER)
        self.store.load()
        self.broker = RecordingBroker()
        self.remote = RecordingChannel()
        self.resigned = asyncio.Event()
        self.controller = Controller(
            0,
            self.store,
            ClusterChannel(LocalChannel(0, self.broker), self.remote),
            reelect_live_leaders=reelect_live_leaders,
            scheduler=SCHEDULER,
            on_resign=self.resigned.set,
        )

    def states(self) -> dict[int, PartitionState]:
        return dict(self.store.topics()["t"].states)


async def _started_with_topic(path: Path) -> Cluster:
    cluster = Cluster(path)
    await cluster.controller.startup(known_brokers(BROKERS.values()))
    await cluster.store.create_topic(StoredTopic("t", uuid.uuid4(), ASSIGNMENT))
    await cluster.controller.idle()
    return cluster


def test_a_dead_leaders_partitions_move_and_dead_followers_leave_the_isr(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()
        cluster.remote.sent.clear()
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[1]])
        await cluster.controller.idle()
        after = cluster.states()
        assert (after[1].leader, after[1].isr, after[1].leader_epoch) == (1, (1,), before[1].leader_epoch + 1)
        assert (after[2].leader, after[2].isr, after[2].leader_epoch) == (0, (0,), before[2].leader_epoch + 1)
        assert after[0] == before[0]  # leader 0 and follower 1 both live
        sent = [(api, broker) for api, broker, _ in cluster.remote.sent]
        assert ("UpdateMetadata", 1) in sent and ("LeaderAndIsr", 1) in sent
        assert all(broker != 2 for _, broker in sent)
        await cluster.controller.shutdown()

    run(scenario)


def test_a_leaderless_partition_comes_back_with_its_isr_member(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        cluster.controller.brokers_changed([BROKERS[0]])
        await cluster.controller.idle()
        assert (cluster.states()[1].leader, cluster.states()[1].isr) == (-1, (1, 2))
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[2]])
        await cluster.controller.idle()
        assert (cluster.states()[1].leader, cluster.states()[1].isr) == (2, (2,))
        await cluster.controller.shutdown()

    run(scenario)


def test_a_broker_that_never_answers_does_not_hold_up_the_next_events(tmp_path):
    """Broker 1 is registered but answers nothing (cut off from the controller, not yet expired):
    the controller queues its requests and goes on, so broker 2's death is handled at once."""

    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        cluster.remote.stalled.add(1)
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[1]])
        await asyncio.wait_for(cluster.controller.idle(), 5)
        cluster.controller.brokers_changed([BROKERS[0]])
        await asyncio.wait_for(cluster.controller.idle(), 5)
        assert (cluster.states()[2].leader, cluster.states()[2].isr) == (0, (0,))
        assert ("UpdateMetadata", 1) in [(api, broker) for api, broker, _ in cluster.remote.sent]
        await cluster.controller.shutdown()

    run(scenario)


def test_failover_start_up_keeps_live_leaders_and_moves_dead_ones(tmp_path):
    async def scenario() -> None:
        first = await _started_with_topic(tmp_path)
        await first.controller.shutdown()
        before = first.states()
        successor = Cluster(tmp_path)
        await successor.controller.startup(known_brokers([BROKERS[0], BROKERS[1]]))
        after = successor.states()
        assert successor.controller.epoch == 2
        assert after[0] == before[0]
        assert (after[2].leader, after[2].leader_epoch, after[2].controller_epoch) == (0, 1, 2)
        await successor.controller.shutdown()

    run(scenario)


def test_a_controller_whose_fenced_write_fails_resigns(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)

        async def moved(*_: object) -> None:
            raise ControllerMovedError("another controller was elected")

        cluster.store.write_partition_states = moved  # type: ignore[method-assign]
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[1]])
        await asyncio.wait_for(cluster.resigned.wait(), 5)
        await cluster.controller.shutdown()

    run(scenario)


def test_the_channel_reaches_every_live_broker_after_each_membership_change(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        assert cluster.remote.reached() == {1, 2} and cluster.controller.unreached_brokers() == set()
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[1]])
        await cluster.controller.idle()
        assert cluster.remote.reached() == {1}
        cluster.remote.sent.clear()
        cluster.controller.brokers_changed(BROKERS.values())
        await cluster.controller.idle()
        assert cluster.remote.reached() == {1, 2} and cluster.controller.unreached_brokers() == set()
        to_joined = [(api, request) for api, broker, request in cluster.remote.sent if broker == 2]
        assert [api for api, _ in to_joined] == ["UpdateMetadata", "LeaderAndIsr"]
        assert to_joined[1][1].type == 1  # full: every partition it holds a replica of
        await cluster.controller.shutdown()

    run(scenario)


def test_a_broker_registered_again_between_two_reads_fails_then_starts(tmp_path):
    """Broker 1's id stays in /brokers/ids but its broker epoch changed (it restarted between two
    reads of the children): as Kafka's bounced brokers, its leadership moves and it leaves the ISRs,
    then it gets everything it holds, on a channel connection made anew."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.controller.startup(known_brokers(BROKERS.values(), {0: 10, 1: 11, 2: 12}))
        await cluster.store.create_topic(StoredTopic("t", uuid.uuid4(), ASSIGNMENT))
        await cluster.controller.idle()
        before = cluster.states()
        cluster.remote.sent.clear()
        cluster.controller.brokers_changed(BROKERS.values(), {0: 10, 1: 21, 2: 12})
        await cluster.controller.idle()
        after = cluster.states()
        assert (after[1].leader, after[1].isr, after[1].leader_epoch) == (2, (2,), before[1].leader_epoch + 1)
        assert (after[0].leader, after[0].isr) == (0, (0,))
        assert cluster.remote.synced[-2:] == [frozenset({2}), frozenset({1, 2})]
        assert cluster.controller.broker_epochs == {0: 10, 1: 21, 2: 12}
        full = [r for api, b, r in cluster.remote.sent if (api, b) == ("LeaderAndIsr", 1) and r.type == 1]
        assert len(full) == 1
        await cluster.controller.shutdown()

    run(scenario)
