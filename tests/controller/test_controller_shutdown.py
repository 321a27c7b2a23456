"""The controller's answer to a broker's ControlledShutdown: the partitions it leads move to another
live ISR member (leader epoch + 1), it leaves the ISR of the partitions it follows, LeaderAndIsr
reaches the partitions' live replicas and UpdateMetadata every live broker; partitions with no other
ISR member remain; while it shuts down it joins no ISR and is elected nowhere, until it leaves the
live brokers; a broker that is not live, a stale broker epoch and a non-controller are refused."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.controller.store import StoredTopic
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from tests.controller.test_controller_isr_changes import answer, ask
from tests.controller.test_controller_membership import BROKERS, Cluster, _started_with_topic
from tests.controller.test_local_controller import run


def shut_down(broker_id: int, broker_epoch: int = -1) -> ControlledShutdownRequest:
    return ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)


def test_leadership_moves_off_the_broker_and_it_leaves_the_isr_it_follows(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)  # t: 0 -> (0, 1), 1 -> (1, 2), 2 -> (2, 0)
        before = cluster.states()
        cluster.remote.sent.clear()
        cluster.broker.requests.clear()
        response = await cluster.controller.controlled_shutdown(shut_down(1))
        assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, [])
        after = cluster.states()
        assert (after[1].leader, after[1].isr) == (2, (2,))  # led by 1: moved to 2
        assert (after[0].leader, after[0].isr) == (0, (0,))  # followed by 1: out of the ISR
        assert after[2] == before[2]
        for index in (0, 1):
            assert after[index].leader_epoch == before[index].leader_epoch + 1
            assert after[index].partition_epoch == before[index].partition_epoch + 1
        sent = {(api, broker) for api, broker, _ in cluster.remote.sent}
        assert {("LeaderAndIsr", 1), ("LeaderAndIsr", 2)} <= sent  # the live replicas, 1 included
        assert {("UpdateMetadata", 1), ("UpdateMetadata", 2)} <= sent
        assert cluster.broker.kinds() == ["LeaderAndIsr", "UpdateMetadata"]  # broker 0, in-process
        (stop,) = [request for api, broker, request in cluster.remote.sent if api == "StopReplica"]
        assert [api for api, broker, _ in cluster.remote.sent if broker == 1][-1] == "StopReplica"
        stopped = {
            (t.topic_name, p.partition_index, p.delete_partition)
            for t in stop.topic_states
            for p in t.partition_states
        }
        assert stopped == {("t", 0, False), ("t", 1, False)}  # it follows both now; logs kept

    run(scenario)


async def change_isr(cluster: Cluster, partition: int, isr: list[int]) -> None:
    state = cluster.states()[partition]
    request = ask(state.leader, partition, state.leader_epoch, state.partition_epoch, isr)
    answer(await cluster.controller.alter_partition(request))


def test_a_partition_without_another_isr_member_remains_with_its_leader(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await change_isr(cluster, 1, [1])
        response = await cluster.controller.controlled_shutdown(shut_down(1))
        remaining = [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
        assert (response.error_code, remaining) == (ErrorCode.NONE, [("t", 1)])
        assert cluster.states()[1].leader == 1
        # its follower caught up: the leader, shutting down, may add it, and then the partition moves
        await change_isr(cluster, 1, [1, 2])
        assert (await cluster.controller.controlled_shutdown(shut_down(1))).remaining_partitions == []
        assert cluster.states()[1].leader == 2

    run(scenario)


def test_a_broker_shutting_down_joins_no_isr_and_leads_no_new_partition(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await cluster.controller.controlled_shutdown(shut_down(1))
        state = cluster.states()[0]  # led by 0, 1 out of its ISR
        expand = ask(0, 0, state.leader_epoch, state.partition_epoch, [0, 1])
        refused = await cluster.controller.alter_partition(expand)
        assert refused.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
        await cluster.store.create_topic(StoredTopic("u", uuid.uuid4(), {0: (1, 2)}))
        await cluster.controller.idle()
        created = cluster.store.topics()["u"].states[0]
        assert (created.leader, created.isr) == (2, (2,))
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[2]])  # 1 is gone ...
        cluster.controller.brokers_changed(BROKERS.values())  # ... and back: no longer shutting down
        await cluster.controller.idle()
        assert answer(await cluster.controller.alter_partition(expand)).isr == [0, 1]

    run(scenario)


def test_refusals(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()
        response = await cluster.controller.controlled_shutdown(shut_down(7))
        assert response.error_code == ErrorCode.BROKER_NOT_AVAILABLE
        cluster.store.broker_epochs = lambda: {1: 40}  # type: ignore[method-assign]
        response = await cluster.controller.controlled_shutdown(shut_down(1, broker_epoch=39))
        assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert cluster.states() == before and not cluster.controller.shutting_down
        await cluster.controller.shutdown()
        response = await cluster.controller.controlled_shutdown(shut_down(1, broker_epoch=40))
        assert response.error_code == ErrorCode.NOT_CONTROLLER

    run(scenario)
