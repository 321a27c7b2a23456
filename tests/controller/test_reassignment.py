"""Partition reassignment (KIP-455) in the controller: Kafka's assignment arithmetic and checks, the
two phases (the full replica set told to every replica; once the target is in the ISR, leader and
replicas moved to it and the removed replicas deleted), cancellation, replacing a reassignment in
progress, listing, failover resuming from the store, and a single node's answers."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.controller import reassignment
from odradek.controller.controller import known_brokers
from odradek.controller.local import LocalMetadataStore
from odradek.controller.metadata import PartitionState
from odradek.controller.store import ReplicaAssignment, StoredTopic
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from odradek.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from odradek.protocol.messages.stop_replica import StopReplicaRequest
from tests.controller.test_controller_isr_changes import answer, ask
from tests.controller.test_controller_membership import BROKERS, Cluster, _started_with_topic
from tests.controller.test_local_controller import SCHEDULER, Node, run

LIVE = (0, 1, 2)


def alter(*partitions: tuple[int, list[int] | None], topic: str = "t") -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=topic,
                partitions=[
                    AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=p, replicas=r)
                    for p, r in partitions
                ],
            )
        ]
    )


def codes(response: AlterPartitionReassignmentsResponse) -> list[int]:
    assert response.error_code == ErrorCode.NONE
    return [p.error_code for t in response.responses for p in t.partitions]


def in_progress(cluster: Cluster) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    listed = cluster.controller.list_partition_reassignments(ListPartitionReassignmentsRequest())
    return [
        (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
        for t in listed.topics
        for p in t.partitions
    ]


# -- the pure rules -----------------------------------------------------------------------------


def test_reassign_to_is_kafkas_arithmetic() -> None:
    moving = reassignment.reassign_to(ReplicaAssignment((1, 2)), (2, 3))
    assert moving == ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    assert (moving.original, moving.target) == ((2, 1), (2, 3))  # RS order, as Kafka's originReplicas
    replaced = reassignment.reassign_to(moving, (4, 1))  # from the original replicas, not RS
    assert replaced == ReplicaAssignment((4, 1, 2), adding=(4,), removing=(2,))
    assert reassignment.reassign_to(moving, (2, 1)) == ReplicaAssignment((2, 1))  # cancelled: ORS in RS order


@pytest.mark.parametrize(
    ("replicas", "message"),
    [
        ([], "Empty replica list"),
        ([1, 1], "Duplicate replica ids"),
        ([1, -3], "Invalid broker id"),
        ([1, 7], "brokers that are not alive"),
    ],
)
def test_bad_targets_are_invalid_replica_assignments(replicas: list[int], message: str) -> None:
    with pytest.raises(KafkaError) as info:
        reassignment.target_of(ReplicaAssignment((1, 2)), replicas, LIVE)
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and message in str(info.value.message)


def test_cancelling_targets_the_original_replicas() -> None:
    moving = ReplicaAssignment((2, 0, 1), adding=(0,), removing=(1,))
    assert reassignment.target_of(moving, None, LIVE) == (2, 1)
    with pytest.raises(KafkaError) as info:
        reassignment.target_of(ReplicaAssignment((1, 2)), None, LIVE)
    assert info.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_a_dead_original_replica_may_stay_in_the_target() -> None:
    assert reassignment.target_of(ReplicaAssignment((1, 5)), [5, 2], LIVE) == (5, 2)


def test_the_leader_moves_to_the_first_target_replica_in_the_isr() -> None:
    state = PartitionState(0, 3, (0, 1, 2), (0, 1, 2), 1, 4)
    assert reassignment.election_over(state, (1, 2), LIVE) == reassignment.Election(1, (1, 2))
    assert reassignment.election_over(state, (2, 0), LIVE) == reassignment.Election(0, (0, 2))


# -- the controller -----------------------------------------------------------------------------


def test_a_reassignment_adds_then_completes_when_the_target_is_in_the_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)  # partition 0: replicas (0, 1) led by 0
        before = cluster.states()[0]
        cluster.remote.sent.clear()
        assert codes(await cluster.controller.alter_partition_reassignments(alter((0, [1, 2])))) == [0]
        started = cluster.states()[0]
        assert (started.replicas, started.leader, started.isr) == ((1, 2, 0), 0, (0, 1))
        assert started.leader_epoch == before.leader_epoch + 1
        topic = cluster.store.topics()["t"]
        assert topic.replica_assignment(0) == ReplicaAssignment((1, 2, 0), adding=(2,), removing=(0,))
        assert in_progress(cluster) == [("t", 0, [1, 2, 0], [2], [0])]
        await cluster.controller.idle()
        told = {b for api, b, _ in cluster.remote.sent if api == "LeaderAndIsr"}
        assert told == {1, 2}

        grown = answer(
            await cluster.controller.alter_partition(
                ask(0, 0, started.leader_epoch, started.partition_epoch, [0, 1, 2])
            )
        )
        assert grown.isr == [0, 1, 2]
        await cluster.controller.idle()
        done = cluster.states()[0]
        assert (done.replicas, done.leader, done.isr) == ((1, 2), 1, (1, 2))
        assert done.leader_epoch == started.leader_epoch + 1
        assert cluster.store.topics()["t"].replica_assignment(0) == ReplicaAssignment((1, 2))
        assert in_progress(cluster) == []
        stops = [r for r in cluster.broker.requests if isinstance(r, StopReplicaRequest)]
        assert [
            (p.partition_index, p.delete_partition) for p in stops[-1].topic_states[0].partition_states
        ] == [(0, True)]
        reloaded = LocalMetadataStore(tmp_path, SCHEDULER)
        reloaded.load()
        assert reloaded.topics()["t"].replica_assignment(0) == ReplicaAssignment((1, 2))
        await cluster.controller.shutdown()

    run(scenario)


def test_a_target_already_in_the_isr_completes_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)  # partition 1: replicas (1, 2), ISR (1, 2)
        assert codes(await cluster.controller.alter_partition_reassignments(alter((1, [2])))) == [0]
        state = cluster.states()[1]
        assert (state.replicas, state.leader, state.isr) == ((2,), 2, (2,))
        assert in_progress(cluster) == []
        await cluster.controller.shutdown()

    run(scenario)


def test_cancel_reverts_to_the_original_replicas_and_stops_the_added_ones(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await cluster.controller.alter_partition_reassignments(alter((0, [1, 2])))
        cluster.remote.sent.clear()
        assert codes(await cluster.controller.alter_partition_reassignments(alter((0, None)))) == [0]
        state = cluster.states()[0]
        assert (state.replicas, state.leader, state.isr) == ((1, 0), 0, (0, 1))  # ORS in RS order, as Kafka
        assert in_progress(cluster) == []
        await cluster.controller.idle()
        assert [b for api, b, _ in cluster.remote.sent if api == "StopReplica"] == [2]
        again = await cluster.controller.alter_partition_reassignments(alter((0, None)))
        assert codes(again) == [ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
        await cluster.controller.shutdown()

    run(scenario)


def test_errors_are_per_partition_and_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()
        response = await cluster.controller.alter_partition_reassignments(
            alter((0, [1, 7]), (9, [1]), (2, [2, 2]))
        )
        assert codes(response) == [
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ]
        unknown = await cluster.controller.alter_partition_reassignments(alter((0, [1]), topic="nope"))
        assert codes(unknown) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert cluster.states() == before
        await cluster.controller.shutdown()
        stopped = await cluster.controller.alter_partition_reassignments(alter((0, [1])))
        assert stopped.error_code == ErrorCode.NOT_CONTROLLER

    run(scenario)


def test_a_replication_factor_change_is_refused_when_not_allowed(tmp_path: Path) -> None:
    """v1's allow_replication_factor_change false: a target of another size answers
    INVALID_REPLICATION_FACTOR with Kafka 4.4's message (the size before any move in progress
    counts); the same size moves, and an invalid target is refused as before; the flag is echoed."""

    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)  # partition 0: replicas (0, 1)
        before = cluster.states()
        request = alter((0, [0, 1, 2]), (1, [2]), (2, [1, 7]))
        request.allow_replication_factor_change = False
        response = await cluster.controller.alter_partition_reassignments(request)
        assert not response.allow_replication_factor_change
        assert codes(response) == [
            ErrorCode.INVALID_REPLICATION_FACTOR,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ]
        messages = [p.error_message for p in response.responses[0].partitions[:2]]
        assert messages == [
            "The replication factor is changed from 2 to 3",
            "The replication factor is changed from 2 to 1",
        ]
        assert cluster.states() == before
        moving = alter((0, [1, 2]))
        moving.allow_replication_factor_change = False
        assert codes(await cluster.controller.alter_partition_reassignments(moving)) == [0]
        again = alter((0, [2, 0, 1]))  # while (1, 2, 0) is moving: the original two replicas count
        again.allow_replication_factor_change = False
        assert codes(await cluster.controller.alter_partition_reassignments(again)) == [
            ErrorCode.INVALID_REPLICATION_FACTOR
        ]
        allowed = await cluster.controller.alter_partition_reassignments(alter((1, [2])))
        assert allowed.allow_replication_factor_change and codes(allowed) == [0]
        await cluster.controller.shutdown()

    run(scenario)


def test_a_new_controller_finishes_reassignments_found_complete(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await cluster.controller.alter_partition_reassignments(alter((0, [1, 2])))
        state = cluster.states()[0]
        await cluster.controller.shutdown()
        moved = PartitionState(0, state.leader_epoch, state.replicas, (0, 1, 2), 1, state.partition_epoch)
        await cluster.store.write_partition_states({"t": {0: moved}}, cluster.store.controller_epoch)

        successor = Cluster(tmp_path)
        assert successor.store.topics()["t"].replica_assignment(0).adding == (2,)
        await successor.controller.startup(known_brokers(BROKERS.values()))
        await successor.controller.idle()
        done = successor.states()[0]
        assert (done.replicas, done.leader, done.isr) == ((1, 2), 1, (1, 2))
        assert in_progress(successor) == []
        await successor.controller.shutdown()

    run(scenario)


def test_a_single_node_moves_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.store.create_topic(StoredTopic("t", uuid.uuid4(), {0: (0,)}))
        await node.settle()
        before = node.store.topics()["t"].states[0]
        assert codes(await node.controller.alter_partition_reassignments(alter((0, [0])))) == [0]
        assert node.store.topics()["t"].states[0] == before
        refused = await node.controller.alter_partition_reassignments(alter((0, [1])))
        assert codes(refused) == [ErrorCode.INVALID_REPLICA_ASSIGNMENT]
        await node.stop()

    run(scenario)
