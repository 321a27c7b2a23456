"""Online migration between classic and consumer groups (coordinator/migration.py) as pure
decisions: the upgrade of a classic group (epochs, members, records, parked requests), classic
members' JoinGroup / SyncGroup / Heartbeat / LeaveGroup in a consumer group, the downgrade when the
last consumer-protocol member leaves, group.consumer.migration.policy, and the records' replay."""

from __future__ import annotations

from dataclasses import replace

from odradek.coordinator import consumer_group as cg
from odradek.coordinator import migration
from odradek.coordinator.classic import (
    HeartbeatArgs,
    JoinArgs,
    JoinResult,
    LeavingMember,
    SyncArgs,
    SyncResult,
)
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.consumer_group import (
    ClassicGroupRecord,
    ConsumerGroup,
    HeartbeatResult,
    MemberState,
)
from odradek.coordinator.consumer_records import ConsumerGroupReplay, encode
from odradek.coordinator.group import CommittedOffset, Group, GroupState, Member, Protocol
from odradek.protocol.consumer_protocol import assignment_partitions
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import Writer
from odradek.protocol.topic_partition import TopicPartition
from tests.coordinator.test_consumer_group import T1, VIEW, now

CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5000)


def subscription(
    topics: tuple[str, ...], owned: dict[str, list[int]] | None = None, version: int = 1
) -> bytes:
    w = Writer()
    w.int16(version)
    w.array_length(len(topics))
    for t in topics:
        w.nullable_string(t)
    w.nullable_bytes(None)
    if version >= 1:
        owned = owned or {}
        w.array_length(len(owned))
        for t, parts in owned.items():
            w.nullable_string(t)
            w.array_length(len(parts))
            for p in parts:
                w.int32(p)
    return w.getvalue()


def classic_member(member_id: str, partitions: list[int], **kw: object) -> Member:
    fields: dict[str, object] = {
        "assignment": migration.serialize_assignment({"orders": frozenset(partitions)}, 1),
        **kw,
    }
    return Member(
        member_id,
        None,
        "client",
        "/127.0.0.1",
        30_000,
        10_000,
        "consumer",
        (Protocol("range", subscription(("orders",))),),
        **fields,  # type: ignore[arg-type]
    )


TP = TopicPartition("orders", 0)


def classic_group() -> Group:
    members = {"c1": classic_member("c1", [0, 1]), "c2": classic_member("c2", [2, 3], sync_ticket=7)}
    return Group(
        "g",
        GroupState.STABLE,
        generation_id=5,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="c1",
        members=members,
        offsets={TP: CommittedOffset(42, -1, "", 1)},
    )


def upgraded() -> tuple[ConsumerGroup, cg.Decision]:
    decision = migration.heartbeat_upgrading(
        None,
        classic_group(),
        cg.HeartbeatArgs(
            "g", "m1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("orders",), owned={}
        ),
        "x",
        VIEW,
        now(),
        CONFIG,
    )
    assert isinstance(decision.reply, HeartbeatResult) and decision.reply.error_code == ErrorCode.NONE
    assert decision.group is not None
    return decision.group, decision


def test_the_upgrade_keeps_the_generation_assignments_and_offsets() -> None:
    group, decision = upgraded()
    assert isinstance(decision.reply, HeartbeatResult)
    assert decision.reply.member_epoch == 6  # the join bumped the classic generation 5
    assert decision.reply.assignment == {}  # every partition is still held by a classic member
    c1 = group.members["c1"]
    assert (c1.member_epoch, c1.assigned, c1.classic is not None) == (5, {T1: frozenset({0, 1})}, True)
    assert c1.classic is not None and c1.classic.session_timeout_ms == 10_000
    assert group.group_epoch == 6 and set(group.members) == {"c1", "c2", "m1"}
    assert decision.records[0] == ClassicGroupRecord("g", None)  # the classic metadata's tombstone first
    assert decision.classic is not None
    assert decision.classic.group is not None and not decision.classic.group.members
    assert decision.classic.group.offsets[TP].offset == 42
    assert decision.classic.replies == ((7, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)),)


def test_the_upgraded_groups_records_replay_to_the_same_members() -> None:
    group, decision = upgraded()
    replay = ConsumerGroupReplay()
    for record in decision.records:
        if isinstance(record, ClassicGroupRecord):
            continue  # the loader's classic side
        key, value = encode(record)
        replay.apply(key, value)
    loaded = replay.groups()["g"]
    assert loaded.group_epoch == group.group_epoch and loaded.assignment_epoch == group.assignment_epoch
    for member_id, member in group.members.items():
        again = loaded.members[member_id]
        assert again.classic == member.classic
        assert again.assignment_state() == member.assignment_state()


def test_the_policy_and_malformed_subscriptions_refuse_the_upgrade() -> None:
    args = cg.HeartbeatArgs(
        "g", "m1", 0, rebalance_timeout_ms=1, subscribed_topic_names=("orders",), owned={}
    )
    for policy in ("downgrade", "disabled"):
        config = replace(CONFIG, consumer_migration_policy=policy)
        refused = migration.heartbeat_upgrading(None, classic_group(), args, "x", VIEW, now(), config)
        assert isinstance(refused.reply, HeartbeatResult)
        assert refused.reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND and refused.records == ()
    broken = replace(classic_group(), members={"c1": classic_member("c1", [0], assignment=b"\x00")})
    refused = migration.heartbeat_upgrading(None, broken, args, "x", VIEW, now(), CONFIG)
    assert (
        isinstance(refused.reply, HeartbeatResult)
        and refused.reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    )
    connect = replace(classic_group(), protocol_type="connect")
    assert not migration.can_upgrade(connect, CONFIG)


def test_a_classic_member_rejoins_revokes_and_gets_its_new_assignment() -> None:
    group, _ = upgraded()
    # heartbeat: the group epoch moved past the member's generation
    assert migration.classic_heartbeat(group, HeartbeatArgs("g", 5, "c1", None), now()).reply == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    assert migration.classic_heartbeat(group, HeartbeatArgs("g", 4, "c1", None), now()).reply == (
        ErrorCode.ILLEGAL_GENERATION
    )
    # c2 (partitions 2 and 3) rejoins cooperatively still owning both: its target is {2}, so it
    # must revoke 3 first (its generation stays 5)
    protocols = (Protocol("range", subscription(("orders",), {"orders": [2, 3]})),)
    join = JoinArgs("g", "c2", None, "client", "/127.0.0.1", 10_000, 30_000, "consumer", protocols)
    decision = migration.classic_join(group, join, "x", VIEW, now(), CONFIG)
    result = decision.reply
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.NONE
    assert (result.generation_id, result.protocol_name, result.leader) == (5, "range", "")
    assert decision.group is not None
    group = decision.group
    assert group.members["c2"].state is MemberState.UNREVOKED_PARTITIONS
    sync = migration.classic_sync(group, SyncArgs("g", 5, "c2", None, "consumer", "range", {}), now())
    assert isinstance(sync.reply, SyncResult) and sync.reply.error_code == ErrorCode.NONE
    assert assignment_partitions(sync.reply.assignment) == {"orders": (2,)}
    assert migration.classic_heartbeat(group, HeartbeatArgs("g", 5, "c2", None), now()).reply == (
        ErrorCode.REBALANCE_IN_PROGRESS  # revoking: rejoin once done
    )
    # it rejoins owning only what it kept: the next epoch, and partition 3 is free for m1
    protocols = (Protocol("range", subscription(("orders",), {"orders": [2]})),)
    decision = migration.classic_join(group, replace(join, protocols=protocols), "x", VIEW, now(), CONFIG)
    assert isinstance(decision.reply, JoinResult) and decision.reply.generation_id == 6
    assert decision.group is not None
    group = decision.group
    assert (T1, 3) not in group.partition_owners()
    assert migration.classic_sync(
        group, SyncArgs("g", 6, "c2", None, "consumer", "roundrobin", {}), now()
    ).reply == SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    assert migration.classic_sync(
        group, SyncArgs("g", 5, "c2", None, "consumer", "range", {}), now()
    ).reply == SyncResult(ErrorCode.ILLEGAL_GENERATION)


def test_classic_join_checks_protocols_and_member_ids() -> None:
    group, _ = upgraded()
    wrong = JoinArgs("g", "", None, "c", "h", 10_000, 30_000, "connect", (Protocol("range", b""),), True)
    assert migration.classic_join(group, wrong, "new", VIEW, now(), CONFIG).reply == JoinResult(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""
    )
    unsupported = replace(wrong, protocol_type="consumer", protocols=(Protocol("roundrobin", b""),))
    assert migration.classic_join(group, unsupported, "new", VIEW, now(), CONFIG).reply == JoinResult(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""
    )
    first = replace(unsupported, protocols=(Protocol("range", subscription(("orders",))),))
    assert migration.classic_join(group, first, "new", VIEW, now(), CONFIG).reply == JoinResult(
        ErrorCode.MEMBER_ID_REQUIRED, "new"
    )
    # the consumer-protocol member is not a classic one
    assert migration.classic_heartbeat(group, HeartbeatArgs("g", 6, "m1", None), now()).reply == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group() -> None:
    group, _ = upgraded()
    leave = cg.HeartbeatArgs("g", "m1", -1)
    left = cg.heartbeat(group, leave, False, "x", VIEW, now(), CONFIG)
    downgraded = migration.maybe_downgrade(group, left, classic_group(), now(), CONFIG)
    assert downgraded.group is None and downgraded.classic is not None
    classic = downgraded.classic.group
    assert classic is not None and classic.state is GroupState.PREPARING_REBALANCE
    assert classic.generation_id == 7 and classic.protocol_name == "range" and classic.leader_id == "c1"
    assert set(classic.members) == {"c1", "c2"} and classic.offsets[TP].offset == 42
    # each member's assignment is its target (the rebalance that follows gives out the rest)
    assert assignment_partitions(classic.members["c1"].assignment) == {"orders": (0, 1)}
    assert assignment_partitions(classic.members["c2"].assignment) == {"orders": (2,)}
    assert downgraded.records[-1] == ClassicGroupRecord("g", replace(classic_stable(classic)))
    kept = migration.maybe_downgrade(
        group, left, classic_group(), now(), replace(CONFIG, consumer_migration_policy="upgrade")
    )
    assert kept is left
    # a classic member leaving does not downgrade while a consumer-protocol member remains
    gone = migration.classic_leave(group, (LeavingMember("c1", None),), VIEW, now())
    assert migration.maybe_downgrade(group, gone, classic_group(), now(), CONFIG) is gone


def classic_stable(rebalancing: Group) -> Group:
    """The group as written: Stable, before its rebalance was prepared."""
    return replace(
        rebalancing,
        state=GroupState.STABLE,
        join_deadline_ms=None,
        initial_delay=None,
    )


def test_a_classic_member_that_does_not_sync_or_rejoin_in_time_is_fenced() -> None:
    group, _ = upgraded()
    protocols = (Protocol("range", subscription(("orders",), {"orders": [2, 3]})),)
    join = JoinArgs("g", "c2", None, "client", "/127.0.0.1", 10_000, 30_000, "consumer", protocols)
    joined = migration.classic_join(group, join, "x", VIEW, now(1000), CONFIG).group
    assert joined is not None and joined.members["c2"].classic_deadline_ms == 31_000  # its sync timeout
    synced = migration.classic_sync(joined, SyncArgs("g", 5, "c2", None, "consumer", "range", {}), now(2000))
    assert synced.group is not None and synced.group.members["c2"].classic_deadline_ms is None
    # told to rejoin (it must revoke), it has its rebalance timeout to do so
    told = migration.classic_heartbeat(synced.group, HeartbeatArgs("g", 5, "c2", None), now(3000)).group
    assert told is not None and told.members["c2"].classic_deadline_ms == 33_000
    again = migration.classic_heartbeat(told, HeartbeatArgs("g", 5, "c2", None), now(4000)).group
    assert again is not None and again.members["c2"].classic_deadline_ms == 33_000  # kept, not pushed back
    fresh = replace(
        again,
        members={
            k: replace(m, session_deadline_ms=10**9, revocation_deadline_ms=None)
            for k, m in again.members.items()
        },
    )
    decision, lines = cg.advance(fresh, VIEW, now(33_000))
    assert decision.group is not None and "c2" not in decision.group.members
    assert "did not join or sync" in lines[0]


def test_a_static_classic_member_rejoining_under_a_new_id_takes_over_its_assignment() -> None:
    base = classic_group()
    statics = {"c1": replace(classic_member("c1", [0, 1]), group_instance_id="i1"), "c2": base.members["c2"]}
    static_classic = replace(base, members=statics, static_members={"i1": "c1"})
    args = cg.HeartbeatArgs(
        "g", "m1", 0, rebalance_timeout_ms=1, subscribed_topic_names=("orders",), owned={}
    )
    decision = migration.heartbeat_upgrading(None, static_classic, args, "x", VIEW, now(), CONFIG)
    group = decision.group
    assert group is not None and group.static_members == {"i1": "c1"}
    protocols = (Protocol("range", subscription(("orders",))),)
    join = JoinArgs("g", "", "i1", "client", "/127.0.0.1", 10_000, 30_000, "consumer", protocols)
    replaced = migration.classic_join(group, join, "c1-again", VIEW, now(), CONFIG)
    assert isinstance(replaced.reply, JoinResult) and replaced.reply.error_code == ErrorCode.NONE
    assert replaced.reply.member_id == "c1-again"
    after = replaced.group
    assert after is not None and "c1" not in after.members and after.static_members == {"i1": "c1-again"}
    assert after.group_epoch == group.group_epoch  # no rebalance
    assert after.members["c1-again"].assigned == group.members["c1"].assigned
    fenced = migration.classic_join(after, replace(join, member_id="c1"), "y", VIEW, now(), CONFIG)
    assert fenced.reply == JoinResult(ErrorCode.FENCED_INSTANCE_ID, "c1")
