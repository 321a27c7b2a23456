"""The controller's answer to a leader's AlterPartition: accepted changes are written (partition
epoch + 1, leader epoch unchanged) and reach every broker by UpdateMetadata; a broker leaving before it
answered does not keep the others from being told; stale epochs, brokers that are not live replicas
and unknown partitions are refused with Kafka's errors and change nothing; a broker that stopped
being controller answers NOT_CONTROLLER."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from tests.controller.test_controller_membership import _started_with_topic
from tests.controller.test_local_controller import run


def ask(
    leader: int, partition: int, leader_epoch: int, partition_epoch: int, isr: list[int]
) -> AlterPartitionRequest:
    data = AlterPartitionRequest.PartitionData(
        partition_index=partition, leader_epoch=leader_epoch, new_isr=isr, partition_epoch=partition_epoch
    )
    return AlterPartitionRequest(
        broker_id=leader,
        broker_epoch=-1,
        topics=[AlterPartitionRequest.TopicData(topic_name="t", partitions=[data])],
    )


def answer(response: AlterPartitionResponse) -> AlterPartitionResponse.PartitionData:
    assert response.error_code == ErrorCode.NONE
    return response.topics[0].partitions[0]


def test_a_leaders_isr_change_is_written_and_announced(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()[1]  # replicas (1, 2), led by 1
        cluster.remote.sent.clear()
        shrunk = answer(
            await cluster.controller.alter_partition(
                ask(1, 1, before.leader_epoch, before.partition_epoch, [1])
            )
        )
        after = cluster.states()[1]
        assert (shrunk.error_code, shrunk.isr, shrunk.leader_id) == (0, [1], 1)
        assert after.isr == (1,) and after.leader_epoch == before.leader_epoch
        assert shrunk.partition_epoch == after.partition_epoch == before.partition_epoch + 1
        await cluster.controller.idle()  # the leader is answered first, the brokers told after
        announced = [(api, b) for api, b, _ in cluster.remote.sent]
        assert ("UpdateMetadata", 1) in announced and ("UpdateMetadata", 2) in announced
        assert not any(api == "LeaderAndIsr" for api, _ in announced)
        grown = answer(
            await cluster.controller.alter_partition(
                ask(1, 1, after.leader_epoch, after.partition_epoch, [1, 2])
            )
        )
        assert grown.isr == [1, 2] and cluster.states()[1].isr == (1, 2)

    run(scenario)


def test_a_retried_change_already_written_is_answered_with_the_current_state(tmp_path: Path) -> None:
    """The leader's AlterPartition was written but its answer lost (a cut connection); it asks again
    with the old partition epoch and must learn the new one (as Kafka's controller answers), not be
    refused INVALID_UPDATE_VERSION for ever (found by the chaos runs: a leader stuck unable to shrink
    or grow its ISR)."""

    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()[1]
        request = ask(1, 1, before.leader_epoch, before.partition_epoch, [1])
        first = answer(await cluster.controller.alter_partition(request))
        again = answer(await cluster.controller.alter_partition(request))
        assert (again.error_code, again.isr, again.partition_epoch) == (0, [1], first.partition_epoch)
        assert cluster.states()[1].partition_epoch == before.partition_epoch + 1  # written once
        stale = ask(1, 1, before.leader_epoch, before.partition_epoch, [1, 2])  # another change
        refused = (await cluster.controller.alter_partition(stale)).topics[0].partitions[0]
        assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION

    run(scenario)


def test_a_broker_that_left_does_not_keep_the_others_from_the_announcement(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        state = cluster.states()[1]
        cluster.remote.sent.clear()
        cluster.remote.gone.add(1)
        await cluster.controller.alter_partition(ask(1, 1, state.leader_epoch, state.partition_epoch, [1]))
        await cluster.controller.idle()
        assert [(api, b) for api, b, _ in cluster.remote.sent] == [("UpdateMetadata", 2)]

    run(scenario)


def test_stale_or_ineligible_isr_changes_are_refused_and_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        state = cluster.states()[1]
        cases = [
            (
                ask(2, 1, state.leader_epoch, state.partition_epoch, [2]),
                ErrorCode.FENCED_LEADER_EPOCH,
            ),  # not leader
            (ask(1, 1, state.leader_epoch - 1, state.partition_epoch, [1]), ErrorCode.FENCED_LEADER_EPOCH),
            (ask(1, 1, state.leader_epoch, state.partition_epoch + 5, [1]), ErrorCode.INVALID_UPDATE_VERSION),
            (ask(1, 1, state.leader_epoch, state.partition_epoch, [1, 0]), ErrorCode.INELIGIBLE_REPLICA),
            (
                ask(1, 1, state.leader_epoch, state.partition_epoch, [2]),
                ErrorCode.INELIGIBLE_REPLICA,
            ),  # no leader
            (ask(1, 9, 0, 0, [1]), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        for request, code in cases:
            response = await cluster.controller.alter_partition(request)
            assert response.topics[0].partitions[0].error_code == code
        assert cluster.states()[1] == state
        unknown = ask(7, 1, state.leader_epoch, state.partition_epoch, [1])  # broker 7 is not live
        assert (await cluster.controller.alter_partition(unknown)).error_code == ErrorCode.STALE_BROKER_EPOCH
        await cluster.controller.shutdown()
        refused = await cluster.controller.alter_partition(
            ask(1, 1, state.leader_epoch, state.partition_epoch, [1])
        )
        assert refused.error_code == ErrorCode.NOT_CONTROLLER

    run(scenario)


def test_a_change_whose_asker_gave_up_is_still_written_and_announced(tmp_path: Path) -> None:
    """The leader's AlterPartition handler was cancelled (its connection closed) while the change
    waited in the controller's queue: the answer goes nowhere, and the change is written and reaches
    every broker all the same (setting the cancelled answer once failed the event after the write,
    so nobody was told)."""

    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        before = cluster.states()[1]
        cluster.remote.sent.clear()
        asked = asyncio.ensure_future(
            cluster.controller.alter_partition(ask(1, 1, before.leader_epoch, before.partition_epoch, [1]))
        )
        await asyncio.sleep(0)  # queued
        asked.cancel()
        await cluster.controller.idle()
        assert cluster.states()[1].isr == (1,)
        announced = [(api, b) for api, b, _ in cluster.remote.sent]
        assert ("UpdateMetadata", 1) in announced and ("UpdateMetadata", 2) in announced

    run(scenario)
