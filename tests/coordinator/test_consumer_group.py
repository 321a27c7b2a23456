"""The pure decisions of KIP-848 consumer groups (coordinator/consumer_group.py): joining, epochs,
the target assignment, revoke-before-assign reconciliation, fencing, static members, timeouts,
regex subscriptions, validation, and the records each decision writes (and their replay)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from odradek.coordinator import consumer_group as cg
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatArgs,
    HeartbeatResult,
    MemberState,
    TopicInfo,
)
from odradek.coordinator.consumer_records import ConsumerGroupReplay, encode
from odradek.coordinator.group import Now
from odradek.protocol.errors import ErrorCode

CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5000)
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class View:
    """Topics by name, as the metadata cache would show them."""

    def __init__(self, **topics: tuple[uuid.UUID, int]) -> None:
        self.topics = {name: TopicInfo(name, tid, n) for name, (tid, n) in topics.items()}
        self.version: int | None = None  # None: every heartbeat looks again

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def matching(self, regex: str) -> frozenset[str]:
        import re

        return frozenset(n for n in self.topics if re.fullmatch(regex, n))


VIEW = View(orders=(T1, 4))


def now(ms: int = 1000) -> Now:
    return Now(ms, ms)


def join(member: str, topics: tuple[str, ...] = ("orders",), **kw: object) -> HeartbeatArgs:
    fields: dict[str, object] = {
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": topics,
        "owned": {},
        **kw,
    }
    return HeartbeatArgs("g", member, 0, **fields)  # type: ignore[arg-type]


def beat(
    member: str, epoch: int, owned: dict[uuid.UUID, frozenset[int]] | None, **kw: object
) -> HeartbeatArgs:
    return HeartbeatArgs("g", member, epoch, owned=owned, **kw)  # type: ignore[arg-type]


def run(
    group: ConsumerGroup | None, args: HeartbeatArgs, view: View = VIEW, at: int = 1000
) -> tuple[ConsumerGroup, HeartbeatResult, cg.Decision]:
    invalid = cg.validate(args, CONFIG)
    assert invalid is None, invalid
    decision = cg.heartbeat(group, args, False, "generated", view, now(at), CONFIG)
    assert isinstance(decision.reply, HeartbeatResult)
    assert decision.group is not None
    return decision.group, decision.reply, decision


def answer(decision: cg.Decision) -> HeartbeatResult:
    assert isinstance(decision.reply, HeartbeatResult)
    return decision.reply


def all_of(n: int) -> frozenset[int]:
    return frozenset(range(n))


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    group, reply, decision = run(None, join("m1"))
    assert reply.error_code == ErrorCode.NONE
    assert (reply.member_id, reply.member_epoch, reply.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert reply.assignment == {T1: all_of(4)}
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, ConsumerGroupState.STABLE)
    kinds = [type(r).__name__ for r in decision.records]
    assert kinds == [
        "MemberMetadataRecord",
        "GroupEpochRecord",
        "TargetMemberRecord",
        "TargetEpochRecord",
        "CurrentAssignmentRecord",
    ]


def test_v0_member_without_id_gets_the_coordinators_id() -> None:
    args = replace(join(""), version=0)
    assert cg.validate(args, CONFIG) is None
    decision = cg.heartbeat(None, args, False, "generated", VIEW, now(), CONFIG)
    assert isinstance(decision.reply, HeartbeatResult) and answer(decision).member_id == "generated"


def test_second_member_waits_for_revocation_before_getting_partitions() -> None:
    group, _, _ = run(None, join("m1"))
    group, reply2, _ = run(group, join("m2"))
    assert group.group_epoch == 2 and group.state is ConsumerGroupState.RECONCILING
    # m2's target partitions are still owned by m1: withheld, m2 moves to epoch 2 unreleased
    assert reply2.member_epoch == 2 and reply2.assignment == {}
    assert group.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    m2_target = group.target["m2"][T1]
    assert len(m2_target) == 2 and group.target["m1"][T1] == all_of(4) - m2_target
    # m1 heartbeats still owning everything: asked to revoke, epoch unchanged
    group, reply1, _ = run(group, beat("m1", 1, {T1: all_of(4)}))
    assert reply1.member_epoch == 1 and reply1.assignment == {T1: all_of(4) - m2_target}
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.members["m1"].revocation_deadline_ms == 1000 + 30_000
    # m2 still gets nothing while m1 holds them
    group, reply2, _ = run(group, beat("m2", 2, {}))
    assert reply2.assignment is None and group.members["m2"].assigned == {}
    # m1 acknowledges the revocation: moves to epoch 2
    group, reply1, _ = run(group, beat("m1", 1, {T1: all_of(4) - m2_target}))
    assert reply1.member_epoch == 2 and group.members["m1"].state is MemberState.STABLE
    assert group.members["m1"].revocation_deadline_ms is None
    # now m2 gets its partitions
    group, reply2, _ = run(group, beat("m2", 2, {}))
    assert reply2.assignment == {T1: m2_target}
    assert group.state is ConsumerGroupState.STABLE


def test_leaving_member_bumps_the_epoch_and_the_other_takes_everything() -> None:
    group, _, _ = run(None, join("m1"))
    group, _, _ = run(group, join("m2"))
    group, _, _ = run(group, beat("m1", 1, {T1: all_of(4)}))
    kept = group.members["m1"].assigned[T1]
    group, _, _ = run(group, beat("m1", 1, {T1: kept}))
    group, _, _ = run(group, beat("m2", 2, {}))
    decision = cg.heartbeat(group, beat("m2", -1, None), False, "x", VIEW, now(), CONFIG)
    assert isinstance(decision.reply, HeartbeatResult) and answer(decision).member_epoch == -1
    group = decision.group  # type: ignore[assignment]
    assert set(group.members) == {"m1"} and group.group_epoch == 3
    assert [type(r).__name__ for r in decision.records][:3] == [
        "CurrentAssignmentRecord",
        "TargetMemberRecord",
        "MemberMetadataRecord",
    ]
    group, reply, _ = run(group, beat("m1", 2, {T1: kept}))
    assert reply.member_epoch == 3 and reply.assignment == {T1: all_of(4)}


def test_epochs_are_fenced_except_the_previous_one_with_owned_partitions_in_the_assignment() -> None:
    group, _, _ = run(None, join("m1"))
    newer = cg.heartbeat(group, beat("m1", 5, {}), False, "x", VIEW, now(), CONFIG)
    assert answer(newer).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    group = replace(
        group, members={"m1": replace(group.members["m1"], member_epoch=3, previous_member_epoch=2)}
    )
    group = replace(group, group_epoch=3, assignment_epoch=3)
    # the previous epoch with owned partitions within the assignment: accepted (a lost response)
    group, reply, _ = run(group, beat("m1", 2, {T1: frozenset({0})}))
    assert reply.error_code == ErrorCode.NONE and reply.member_epoch == 3
    outside = cg.heartbeat(group, beat("m1", 2, {T2: frozenset({0})}), False, "x", VIEW, now(), CONFIG)
    assert answer(outside).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    older = cg.heartbeat(group, beat("m1", 1, {}), False, "x", VIEW, now(), CONFIG)
    assert answer(older).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    unknown = cg.heartbeat(group, beat("m9", 3, {}), False, "x", VIEW, now(), CONFIG)
    assert answer(unknown).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_unknown_group_classic_group_and_full_group() -> None:
    missing = cg.heartbeat(None, beat("m1", 3, {}), False, "x", VIEW, now(), CONFIG)
    assert answer(missing).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    classic = cg.heartbeat(None, join("m1"), True, "x", VIEW, now(), CONFIG)
    assert answer(classic).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    small = replace(CONFIG, consumer_max_size=1)
    group, _, _ = run(None, join("m1"))
    full = cg.heartbeat(group, join("m2"), False, "x", VIEW, now(), small)
    assert answer(full).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    again = cg.heartbeat(group, beat("m1", 1, None), False, "x", VIEW, now(), small)
    assert answer(again).error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (replace(join("m"), group_id=""), ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
        (join(""), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (join("m", instance_id=""), ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
        (join("m", rack_id=""), ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
        (join("m", rebalance_timeout_ms=-1), ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be"),
        (join("m", owned=None), ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty"),
        (join("m", owned={T1: frozenset({0})}), ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty"),
        (join("m", topics=()), ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex"),
        (beat("m", -2, None), ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
        (beat("m", -3, None), ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        (join("m", subscribed_topic_regex="("), ErrorCode.INVALID_REGULAR_EXPRESSION, "not a valid regular"),
        (join("m", server_assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky"),
    ],
)
def test_validation(args: HeartbeatArgs, code: int, message: str) -> None:
    refused = cg.validate(args, CONFIG)
    assert refused is not None and refused.error_code == code
    assert (
        refused.error_message is not None
        and refused.error_message.startswith(message)
        or (refused.error_message is not None and message in refused.error_message)
    )


def test_static_member_temporary_leave_and_takeover_keeps_the_assignment() -> None:
    group, _, _ = run(None, join("a", instance_id="i1"))
    assert group.static_members == {"i1": "a"}
    unreleased = cg.heartbeat(group, join("b", instance_id="i1"), False, "x", VIEW, now(), CONFIG)
    assert answer(unreleased).error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    fenced = cg.heartbeat(group, beat("b", 1, {}, instance_id="i1"), False, "x", VIEW, now(), CONFIG)
    assert answer(fenced).error_code == ErrorCode.FENCED_INSTANCE_ID
    left = cg.heartbeat(group, beat("a", -2, None, instance_id="i1"), False, "x", VIEW, now(), CONFIG)
    assert answer(left).member_epoch == -2 and left.group is not None
    assert left.group.group_epoch == 1  # a temporary leave does not move the epoch
    group, reply, _ = run(left.group, join("b", instance_id="i1"))
    assert set(group.members) == {"b"} and group.static_members == {"i1": "b"}
    assert reply.member_epoch == 1 and reply.assignment == {T1: all_of(4)}
    assert group.group_epoch == 1


def test_session_timeout_fences_and_revocation_timeout_fences() -> None:
    group, _, _ = run(None, join("m1"), at=0)
    group, _, _ = run(group, join("m2"), at=0)
    group, _, _ = run(group, beat("m1", 1, {T1: all_of(4)}), at=10_000)  # m1 asked to revoke
    assert group.next_deadline_ms() == 40_000  # m1's revocation deadline, before the sessions
    decision, lines = cg.advance(group, VIEW, now(40_000))
    assert decision.group is not None and set(decision.group.members) == {"m2"}
    assert decision.group.group_epoch == 3 and "rebalance timeout" in lines[0]
    decision, lines = cg.advance(decision.group, VIEW, now(45_000))
    assert decision.group is not None and not decision.group.members and "session timeout" in lines[0]
    assert decision.group.state is ConsumerGroupState.EMPTY


def test_regex_subscription_follows_topics_created_later() -> None:
    view = View(**{"topic-a": (T1, 2)})
    group, reply, _ = run(None, join("m1", topics=(), subscribed_topic_regex="topic-.*"), view=view)
    assert reply.assignment == {T1: all_of(2)} and group.regexes == {"topic-.*": frozenset({"topic-a"})}
    view.topics["topic-b"] = TopicInfo("topic-b", T2, 3)
    view.topics["other"] = TopicInfo("other", uuid.UUID(int=3), 1)
    group, reply, decision = run(group, beat("m1", 1, None), view=view)
    assert group.group_epoch == 2 and reply.member_epoch == 2
    assert reply.assignment == {T1: all_of(2), T2: all_of(3)}
    assert any(isinstance(r, cg.RegexRecord) for r in decision.records)


def test_topic_deletion_moves_the_epoch_and_drops_its_partitions() -> None:
    view = View(orders=(T1, 4), more=(T2, 2))
    group, reply, _ = run(None, join("m1", topics=("orders", "more")), view=view)
    assert reply.assignment == {T1: all_of(4), T2: all_of(2)}
    del view.topics["more"]
    group, reply, _ = run(group, beat("m1", 1, {T1: all_of(4), T2: all_of(2)}), view=view)
    # the deleted topic's partitions are revoked first; the member keeps epoch 1 until it acknowledges
    assert group.group_epoch == 2 and reply.member_epoch == 1 and reply.assignment == {T1: all_of(4)}
    group, reply, _ = run(group, beat("m1", 1, {T1: all_of(4)}), view=view)
    assert reply.member_epoch == 2


def test_range_assignor_on_request() -> None:
    group, _, _ = run(None, join("m1", server_assignor="range"))
    assert group.assignor_name(CONFIG) == "range"
    description = cg.describe("g", group, False, CONFIG)
    assert description.assignor_name == "range" and description.state == "Stable"
    assert description.members[0].target_assignment == {T1: all_of(4)}


def test_describe_unknown_and_classic_groups() -> None:
    assert cg.describe("g", None, False, CONFIG).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    classic = cg.describe("g", None, True, CONFIG)
    assert classic.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "not a consumer group" in (
        classic.error_message or ""
    )


def test_offset_commit_and_fetch_checks() -> None:
    group, _, _ = run(None, join("m1"))
    assert cg.validate_offset_commit(group, "m1", 1) == ErrorCode.NONE
    assert cg.validate_offset_commit(group, "m1", 1, 9) == ErrorCode.NONE
    assert cg.validate_offset_commit(group, "m1", 1, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert cg.validate_offset_commit(group, "m1", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert cg.validate_offset_commit(group, "m9", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert cg.validate_offset_commit(group, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert cg.validate_offset_commit(ConsumerGroup("g"), "", -1) == ErrorCode.NONE
    assert cg.validate_offset_fetch(group, "", -1) == ErrorCode.NONE
    assert cg.validate_offset_fetch(group, "m1", 2) == ErrorCode.STALE_MEMBER_EPOCH


def test_records_replay_to_the_same_group() -> None:
    records: list[cg.CgRecord] = []
    group, _, decision = run(None, join("m1", instance_id="i1", rack_id="r1"))
    records.extend(decision.records)
    group, _, decision = run(group, join("m2"))
    records.extend(decision.records)
    group, _, decision = run(group, beat("m1", 1, {T1: all_of(4)}))
    records.extend(decision.records)
    replay = ConsumerGroupReplay()
    for record in records:
        replay.apply(*encode(record))
    loaded = replay.groups()["g"]
    assert (loaded.group_epoch, loaded.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert loaded.metadata_hash == group.metadata_hash
    assert loaded.static_members == {"i1": "m1"}
    assert {k: dict(v) for k, v in loaded.target.items()} == {k: dict(v) for k, v in group.target.items()}
    for member_id, member in group.members.items():
        restored = loaded.members[member_id]
        assert restored.assignment_state() == member.assignment_state()
        assert restored.metadata() == member.metadata()
    # the group leaves: tombstones delete the member, then the group stays (empty)
    decision = cg.heartbeat(group, beat("m2", -1, None), False, "x", VIEW, now(), CONFIG)
    for record in decision.records:
        replay.apply(*encode(record))
    assert set(replay.groups()["g"].members) == {"m1"}


def test_metadata_is_looked_at_again_only_when_its_version_moves() -> None:
    view = View(orders=(T1, 4))
    view.version = 7
    group, _, _ = run(None, join("m1", topics=(), subscribed_topic_regex="o.*"), view=view)
    view.topics["others"] = TopicInfo("others", T2, 1)
    group, reply, _ = run(group, beat("m1", 1, None), view=view)
    assert group.group_epoch == 1 and reply.member_epoch == 1  # same version: not looked at
    view.version = 8
    group, reply, _ = run(group, beat("m1", 1, None), view=view)
    assert group.group_epoch == 2 and reply.assignment == {T1: all_of(4), T2: all_of(1)}


@pytest.mark.parametrize("regex", ["a(?=b)", "(?<!x)y", r"(a)\1", "a++", "(?>a)"])
def test_regexes_re2j_refuses_are_refused(regex: str) -> None:
    refused = cg.validate(join("m", topics=(), subscribed_topic_regex=regex), CONFIG)
    assert refused is not None and refused.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_regex_resolves_to_the_topics_the_member_may_describe() -> None:
    view = View(**{"topic-a": (T1, 2), "topic-b": (T2, 2)})
    args = join("m1", topics=(), subscribed_topic_regex="topic-.*")
    hide_b = lambda names: frozenset(n for n in names if n != "topic-b")  # noqa: E731
    group, reply, _ = run(None, replace(args, describable=hide_b), view=view)
    assert reply.assignment == {T1: all_of(2)} and group.regexes == {"topic-.*": frozenset({"topic-a"})}
    # a timer fencing another member keeps the resolution made for the members' principal (a
    # heartbeat resolves every regex of the group for its own principal, as Kafka does)
    group, _, _ = run(group, replace(join("m2"), describable=hide_b), view=view)
    members = {
        "m1": replace(group.members["m1"], session_deadline_ms=10**9),
        "m2": replace(group.members["m2"], session_deadline_ms=0),
    }
    decision, fenced = cg.advance(replace(group, members=members), view, now(1))
    assert decision.group is not None and set(decision.group.members) == {"m1"} and len(fenced) == 1
    assert decision.group.regexes == {"topic-.*": frozenset({"topic-a"})}
