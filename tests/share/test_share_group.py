"""Share group membership as pure decisions (coordinator/share_group.py): joining, heartbeating,
leaving, fencing by epoch and by session, the `simple` assignor's sharing and balance, errors as
Kafka's, and the records a decision writes read back by the replay (share_group_records.py)."""

from __future__ import annotations

import uuid

from odradek.coordinator import share_group as sg
from odradek.coordinator.consumer_group import TopicInfo
from odradek.coordinator.group import Now
from odradek.coordinator.share_assignor import assign_simple
from odradek.coordinator.share_group_records import ShareGroupReplay, encode
from odradek.protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
SETTINGS = sg.ShareSettings(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=3)


class View:
    def __init__(self, topics: dict[str, TopicInfo], version: int = 1) -> None:
        self.topics, self.version = topics, version

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def matching(self, regex: str) -> frozenset[str]:
        return frozenset()


VIEW = View({"a": TopicInfo("a", T1, 4), "b": TopicInfo("b", T2, 2)})


def beat(
    group: sg.ShareGroup | None, member: str, epoch: int, topics: tuple[str, ...] | None = ("a",), at: int = 0
) -> sg.Decision:
    args = sg.HeartbeatArgs(
        "g", member, epoch, subscribed_topic_names=topics, client_id="c", client_host="/h"
    )
    return sg.heartbeat(group, args, False, VIEW, Now(at, at), SETTINGS)


def test_join_gets_every_partition_then_a_second_member_shares_them() -> None:
    first = beat(None, "m1", 0)
    assert first.reply.error_code == ErrorCode.NONE
    assert first.reply.member_epoch == 1 and first.reply.assignment == {T1: frozenset(range(4))}
    assert first.reply.heartbeat_interval_ms == 100
    second = beat(first.group, "m2", 0)
    assert second.reply.member_epoch == 2
    group = second.group
    # m1 moves to the new epoch at its next heartbeat: no revocation phase
    third = beat(group, "m1", 1, None)
    assert third.reply.member_epoch == 2
    held = [third.group.members[m].assigned[T1] for m in ("m1", "m2")]
    assert held[0] | held[1] == frozenset(range(4)) and not held[0] & held[1]
    assert sorted(len(h) for h in held) == [2, 2]


def test_more_members_than_partitions_share_each_partition() -> None:
    target = assign_simple({f"m{i}": frozenset({T2}) for i in range(5)}, {T2: 2}, {})
    # ceil(5 / 2) = 3 members per partition: 6 places over 5 members, one of them holds both
    assert sorted(len(t[T2]) for t in target.values()) == [1, 1, 1, 1, 2]
    assert {p: sum(p in t[T2] for t in target.values()) for p in (0, 1)} == {0: 3, 1: 3}


def test_assignor_is_sticky_when_balance_allows() -> None:
    before = {"m1": {T1: frozenset({0, 1})}, "m2": {T1: frozenset({2, 3})}}
    after = assign_simple({"m1": frozenset({T1}), "m2": frozenset({T1})}, {T1: 4}, before)
    assert after == before


def test_epochs_fence_and_unknown_members_are_refused() -> None:
    group = beat(None, "m1", 0).group
    assert beat(group, "m1", 5, None).reply.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(group, "nobody", 1, None).reply.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(None, "m1", 3, None).reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_first_heartbeat_without_topics_and_bad_epochs_are_invalid() -> None:
    for args in (
        sg.HeartbeatArgs("g", "m", 0),
        sg.HeartbeatArgs("g", "", 1),
        sg.HeartbeatArgs("g", "m", -2, subscribed_topic_names=("a",)),
        sg.HeartbeatArgs("", "m", 0, subscribed_topic_names=("a",)),
    ):
        result = sg.validate(args)
        assert result is not None and result.error_code == ErrorCode.INVALID_REQUEST


def test_group_max_size_and_another_kind_of_group() -> None:
    group = None
    for m in ("m1", "m2", "m3"):
        group = beat(group, m, 0).group
    assert beat(group, "m4", 0).reply.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    args = sg.HeartbeatArgs("g", "m", 0, subscribed_topic_names=("a",))
    refused = sg.heartbeat(None, args, True, VIEW, Now(0, 0), SETTINGS).reply
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.error_message == "Group g is not a share group."


def test_leave_and_session_expiry_remove_members() -> None:
    group = beat(beat(None, "m1", 0).group, "m2", 0, at=500).group
    left = beat(group, "m2", -1, None)
    assert left.reply.member_epoch == -1 and set(left.group.members) == {"m1"}
    assert left.group.group_epoch == group.group_epoch + 1
    expired = sg.advance(group, VIEW, Now(1200, 1200))
    assert expired.fenced == ("m1",) and set(expired.group.members) == {"m2"}


def test_delete_only_an_empty_group() -> None:
    group = beat(None, "m1", 0).group
    assert sg.delete("g", group).reply == ErrorCode.NON_EMPTY_GROUP
    empty = beat(group, "m1", -1, None).group
    deleted = sg.delete("g", empty)
    assert deleted.reply == ErrorCode.NONE and deleted.group is None


def test_records_replay_to_the_same_group() -> None:
    replay = ShareGroupReplay()
    group = None
    for decision_of in (
        lambda g: beat(g, "m1", 0),
        lambda g: beat(g, "m2", 0, ("a", "b")),
        lambda g: beat(g, "m1", 1, None),
        lambda g: beat(g, "m2", -1, None),
    ):
        decision = decision_of(group)
        for record in decision.records:
            replay.apply(*encode(record))
        group = decision.group
    loaded = replay.groups()["g"]
    assert loaded.group_epoch == group.group_epoch and loaded.assignment_epoch == group.assignment_epoch
    assert set(loaded.members) == {"m1"}
    assert loaded.members["m1"].assigned == group.members["m1"].assigned
    assert loaded.members["m1"].subscribed_topic_names == ("a",)


def test_describe() -> None:
    group = beat(None, "m1", 0).group
    described = sg.describe("g", group, False)
    assert (described.state, described.assignor_name, described.group_epoch) == ("Stable", "simple", 1)
    assert sg.describe("x", None, True).error_message == "Group x is not a share group."
    assert sg.describe("x", None, False).error_message == "Group x not found."


def test_a_groups_own_session_timeout_and_heartbeat_interval() -> None:
    own = sg.with_group_configs(
        SETTINGS, {"share.session.timeout.ms": "5000", "share.heartbeat.interval.ms": "7"}
    )
    args = sg.HeartbeatArgs("g", "m1", 0, subscribed_topic_names=("a",))
    decision = sg.heartbeat(None, args, False, VIEW, Now(0, 0), own)
    assert decision.reply.heartbeat_interval_ms == 7
    assert decision.group.members["m1"].session_deadline_ms == 5000
    assert sg.with_group_configs(SETTINGS, {}) == SETTINGS


def test_initialized_share_partitions_are_kept_written_and_replayed() -> None:
    replay = ShareGroupReplay()
    first = beat(None, "m1", 0, ("a", "b"))
    assert first.group.initialized == {T1: ("a", frozenset(range(4))), T2: ("b", frozenset(range(2)))}
    forgotten = sg.forget_topics("g", first.group, [T2])
    assert forgotten.group.initialized == {T1: ("a", frozenset(range(4)))}
    added = sg.add_initialized("g", forgotten.group, {T2: "b"}, [(T2, 1)])
    assert added.group.initialized[T2] == ("b", frozenset({1}))
    for decision in (first, forgotten, added):
        for record in decision.records:
            replay.apply(*encode(record))
    assert replay.groups()["g"].initialized == added.group.initialized
    assert sg.forget_topics("g", added.group, [uuid.UUID(int=9)]).records == ()
