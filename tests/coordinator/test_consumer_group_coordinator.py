"""KIP-848 consumer groups through the GroupCoordinator and its shards, over the in-memory
`__consumer_offsets` log of test_coordinator.py: records written then replayed by a restart, session
timeouts on the injected clock, routing errors, offsets with member epochs, classic/consumer
conflicts, listing, describing, deleting, and offsets of subscribed topics kept from expiration."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.controller.channel import ControllerIdentity, update_metadata_request
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.coordinator.classic import CommitArgs
from odradek.coordinator.consumer_group import HeartbeatArgs, HeartbeatResult
from odradek.coordinator.group import CommittedOffset, TopicPartition
from odradek.protocol.errors import ErrorCode
from tests.coordinator.test_coordinator import Harness, run

ORDERS = uuid.UUID(int=7)
TP = TopicPartition("orders", 0)


def add_topic(h: Harness, name: str, topic_id: uuid.UUID, partitions: int) -> None:
    states = {p: PartitionState(0, 0, (0,), (0,), 1, 0) for p in range(partitions)}
    broker = BrokerInfo(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))
    h.broker.metadata_cache.update_metadata(
        update_metadata_request(ControllerIdentity(0, 1), {name: (topic_id, states)}, [broker])
    )


async def started(tmp_path: Path, h: Harness | None = None) -> Harness:
    h = h or Harness(tmp_path)
    await h.start()
    add_topic(h, "orders", ORDERS, 4)
    return h


async def beat(
    h: Harness, member: str, epoch: int, owned: set[int] | None = None, **kw: object
) -> HeartbeatResult:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("subscribed_topic_names", ("orders",))
    args = HeartbeatArgs(
        "g",
        member,
        epoch,
        owned={ORDERS: frozenset(owned)} if owned is not None else ({} if epoch == 0 else None),
        **kw,  # type: ignore[arg-type]
    )
    return await h.coordinator.consumer_group_heartbeat(args)


def test_group_written_then_replayed_after_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        first = await beat(h, "m1", 0)
        assert (first.error_code, first.member_epoch, first.assignment) == (
            ErrorCode.NONE,
            1,
            {ORDERS: frozenset(range(4))},
        )
        await h.coordinator.shutdown()

        again = Harness(tmp_path, h.log)
        await started(tmp_path, again)
        description = await again.coordinator.consumer_group_describe("g")
        assert (description.error_code, description.group_epoch, description.assignment_epoch) == (0, 1, 1)
        assert [m.member_id for m in description.members] == ["m1"]
        assert description.members[0].member_epoch == 1
        assert description.members[0].assignment == {ORDERS: frozenset(range(4))}
        # the member goes on with its epoch: not fenced, nothing moved
        hb = await beat(again, "m1", 1, {0, 1, 2, 3})
        assert (hb.error_code, hb.member_epoch) == (ErrorCode.NONE, 1)
        await again.coordinator.shutdown()

    run(scenario)


def test_session_timeout_removes_the_member(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        await beat(h, "m1", 0)
        h.clock.advance(44_999)
        h.coordinator.wake()
        assert [m.member_id for m in (await h.coordinator.consumer_group_describe("g")).members] == ["m1"]
        h.clock.advance(1)
        h.coordinator.wake()
        description = await h.coordinator.consumer_group_describe("g")
        assert description.state == "Empty" and description.members == () and description.group_epoch == 2
        assert (await beat(h, "m1", 1, set())).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        await h.coordinator.shutdown()

    run(scenario)


def test_not_coordinator_after_unload_and_failed_writes_keep_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        h.log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        failed = await beat(h, "m1", 0)
        assert failed.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka's map of the append error
        h.log.fail_with = ErrorCode.NONE
        described = await h.coordinator.consumer_group_describe("g")
        assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        partition = h.coordinator.partition_for("g")
        assert partition is not None
        h.coordinator.on_partition_unloaded(partition)
        assert (await beat(h, "m1", 0)).error_code == ErrorCode.NOT_COORDINATOR
        assert (await h.coordinator.consumer_group_describe("g")).error_code == ErrorCode.NOT_COORDINATOR
        await h.coordinator.shutdown()

    run(scenario)


def test_offsets_carry_the_member_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        await beat(h, "m1", 0)
        offsets = {TP: CommittedOffset(10, -1, "", h.clock.time_ms())}
        commit = h.coordinator.commit_offsets
        assert await commit(CommitArgs("g", 1, "m1", None, offsets)) == {TP: ErrorCode.NONE}
        assert await commit(CommitArgs("g", 0, "m1", None, offsets)) == {TP: ErrorCode.STALE_MEMBER_EPOCH}
        assert await commit(CommitArgs("g", 1, "m9", None, offsets)) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
        assert await commit(CommitArgs("g", -1, "", None, offsets)) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
        error, fetched = await h.coordinator.fetch_offsets("g", (TP,), "m1", 1)
        stored = fetched[TP]
        assert error == ErrorCode.NONE and stored is not None and stored.offset == 10
        assert (await h.coordinator.fetch_offsets("g", (TP,), "m1", 3))[0] == ErrorCode.STALE_MEMBER_EPOCH
        assert (await h.coordinator.fetch_offsets("g", (TP,), None, -1))[0] == ErrorCode.NONE
        await h.coordinator.shutdown()

    run(scenario)


def test_classic_and_consumer_groups_of_one_id(tmp_path: Path) -> None:
    """A classic group whose subscriptions are not the consumer protocol's cannot be upgraded
    (GROUP_ID_NOT_FOUND, as Kafka); a classic member joins a consumer group with members (as a
    classic member, migration.py), and an empty consumer group gives way to a classic one."""

    async def scenario() -> None:
        h = await started(tmp_path)
        await h.stable_member()  # a classic group "g" with a member (its metadata is not a subscription)
        refused = await beat(h, "m1", 0)
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert "malformed" in (refused.error_message or "")
        description = await h.coordinator.consumer_group_describe("g")
        assert description.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert "not a consumer group" in (description.error_message or "")
        await h.coordinator.shutdown()

        other = await started(tmp_path / "other")
        await beat(other, "m1", 0)
        joined = await other.join()
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED  # joining the consumer group
        assert (await other.join(joined.member_id)).error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # b"meta"
        await beat(other, "m1", -1)  # the consumer group is empty: a classic member may take the id
        joined = await other.join()
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert (
            await other.coordinator.consumer_group_describe("g")
        ).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await other.coordinator.shutdown()

    run(scenario)


def test_list_describe_groups_and_delete(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        await beat(h, "m1", 0)
        await h.coordinator.commit_offsets(
            CommitArgs("g", 1, "m1", None, {TP: CommittedOffset(3, -1, "", h.clock.time_ms())})
        )
        error, listings = h.coordinator.list_groups()
        assert error == ErrorCode.NONE
        assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listings] == [
            ("g", "consumer", "Stable", "consumer")
        ]
        assert (await h.coordinator.describe_group("g")).state == "Dead"
        assert await h.coordinator.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
        assert (await beat(h, "m1", -1)).member_epoch == -1
        assert await h.coordinator.delete_group("g") == ErrorCode.NONE
        assert h.coordinator.list_groups() == (ErrorCode.NONE, [])
        assert (await h.coordinator.fetch_offsets("g", None)) == (ErrorCode.NONE, {})
        await h.coordinator.shutdown()

        again = Harness(tmp_path, h.log)
        await started(tmp_path, again)
        assert again.coordinator.list_groups() == (ErrorCode.NONE, [])
        await again.coordinator.shutdown()

    run(scenario)


def test_offsets_of_subscribed_topics_do_not_expire(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        await beat(h, "m1", 0)
        old = {
            TP: CommittedOffset(3, -1, "", h.clock.time_ms()),
            TopicPartition("gone", 0): CommittedOffset(4, -1, "", h.clock.time_ms()),
        }
        await h.coordinator.commit_offsets(CommitArgs("g", 1, "m1", None, old))
        for _ in range(12):  # past offsets.retention.minutes (10), beating within the session
            h.clock.advance(60_000)
            await beat(h, "m1", 1, {0, 1, 2, 3})
        h.coordinator.wake()
        _, fetched = await h.coordinator.fetch_offsets("g", None)
        assert set(fetched) == {TP}
        await h.coordinator.shutdown()

    run(scenario)


def test_offset_delete_keeps_the_offsets_of_subscribed_topics(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = await started(tmp_path)
        await beat(h, "m1", 0)
        other = TopicPartition("other", 0)
        offsets = {TP: CommittedOffset(3, -1, "", 0), other: CommittedOffset(4, -1, "", 0)}
        await h.coordinator.commit_offsets(CommitArgs("g", 1, "m1", None, offsets))
        result = await h.coordinator.delete_offsets("g", (TP, other))
        assert result.error_code == ErrorCode.NONE
        assert result.partitions == {TP: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: ErrorCode.NONE}
        _, fetched = await h.coordinator.fetch_offsets("g", None)
        assert set(fetched) == {TP}
        await h.coordinator.shutdown()

    run(scenario)
