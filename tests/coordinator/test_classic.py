"""The classic group state machine, driven with a ManualClock and no I/O."""

from __future__ import annotations

import itertools
import struct
from typing import Any

from odradek.clock import ManualClock
from odradek.coordinator import classic
from odradek.coordinator.classic import (
    CommitArgs,
    Failure,
    FailureKind,
    HeartbeatArgs,
    JoinArgs,
    JoinResult,
    LeaveResult,
    LeavingMember,
    OffsetDeleteResult,
    SyncArgs,
    SyncResult,
)
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.group import CommittedOffset, Group, GroupState, Now, Protocol, TopicPartition
from odradek.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey
from odradek.protocol.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class Driver:
    """One group, its replies by ticket and the records its decisions wrote."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig(initial_rebalance_delay_ms=0)
        self.clock = ManualClock()
        self.group: Group | None = None
        self.replies: dict[int, object] = {}
        self.records: list = []
        self._tickets = itertools.count(1)
        self._ids = itertools.count(1)

    def now(self) -> Now:
        return Now(self.clock.time_ms(), self.clock.monotonic_ms())

    def apply(self, decision: classic.Decision) -> classic.Decision:
        self.group = decision.group
        self.replies.update((r.ticket, r.value) for r in decision.replies)
        self.records.extend(decision.records)
        return decision

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[Protocol, ...] = (Protocol("range", subscription("t")),),
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_member_id: bool = True,
    ) -> int:
        ticket = next(self._tickets)
        args = JoinArgs(
            "g",
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            session_ms,
            rebalance_ms,
            protocol_type,
            protocols,
            require_member_id,
        )
        self.apply(
            classic.join_group(self.group, args, ticket, f"client-{next(self._ids)}", self.now(), self.config)
        )
        return ticket

    def join_new(self, **kwargs: Any) -> str:
        """KIP-394 two-step join; returns the member id (the join may still be parked)."""
        first = self.join(**kwargs)
        result = self.replies[first]
        assert isinstance(result, JoinResult) and result.error_code == ErrorCode.MEMBER_ID_REQUIRED
        self.last_join = self.join(result.member_id, **kwargs)
        return result.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> int:
        ticket = next(self._tickets)
        args = SyncArgs("g", generation, member_id, None, "consumer", None, assignments or {})
        self.apply(classic.sync_group(self.group, args, ticket, self.now(), self.config))
        return ticket

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> object:
        ticket = next(self._tickets)
        args = HeartbeatArgs("g", generation, member_id, instance)
        self.apply(classic.heartbeat(self.group, args, ticket, self.now(), self.config))
        return self.replies[ticket]

    def leave(self, *members: LeavingMember) -> LeaveResult:
        ticket = next(self._tickets)
        self.apply(classic.leave_group(self.group, members, ticket, self.now(), self.config))
        result = self.replies[ticket]
        assert isinstance(result, LeaveResult)
        return result

    def commit(
        self, offsets: dict[TopicPartition, int], generation: int = -1, member_id: str = ""
    ) -> classic.Decision:
        ticket = next(self._tickets)
        committed = {tp: CommittedOffset(o, -1, "", self.clock.time_ms()) for tp, o in offsets.items()}
        args = CommitArgs("g", generation, member_id, None, committed)
        decision = self.apply(classic.commit_offsets(self.group, args, ticket, self.now(), self.config))
        self.last_commit = self.replies[ticket]
        return decision

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        if self.group is not None:
            self.apply(classic.advance(self.group, self.now(), self.config))

    def state(self) -> GroupState:
        assert self.group is not None
        return self.group.state


def stable_group_of_one(d: Driver) -> str:
    member = d.join_new()
    result = d.replies[d.last_join]
    assert isinstance(result, JoinResult)
    d.sync(member, result.generation_id, {member: b"assignment-1"})
    assert d.state() is GroupState.STABLE
    return member


# ---------------------------------------------------------------------------------------------
# joining


def test_first_join_without_member_id_requires_one_then_completes() -> None:
    d = Driver()
    first = d.join()
    required = d.replies[first]
    assert isinstance(required, JoinResult)
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
    assert d.group is not None and required.member_id in d.group.pending_members
    second = d.join(required.member_id)
    result = d.replies[second]
    assert isinstance(result, JoinResult)
    assert result.error_code == ErrorCode.NONE
    assert result.generation_id == 1 and result.leader == required.member_id
    assert result.protocol_name == "range" and result.protocol_type == "consumer"
    assert [m.member_id for m in result.members] == [required.member_id]
    assert result.members[0].metadata == subscription("t")
    assert d.state() is GroupState.COMPLETING_REBALANCE


def test_join_below_v4_gets_member_id_directly() -> None:
    d = Driver()
    ticket = d.join(require_member_id=False)
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.NONE and result.member_id


def test_leader_sync_makes_group_stable_and_stores_assignment() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    assert d.group is not None and d.group.members[member].assignment == b"assignment-1"
    key, value = d.records[-1]
    assert key == GroupMetadataKey("g")
    assert isinstance(value, GroupMetadataValue)
    assert value.generation == 1 and value.leader == member and value.members[0].assignment == b"assignment-1"


def test_second_member_triggers_rebalance_and_both_get_assignments() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    assert d.state() is GroupState.PREPARING_REBALANCE
    assert d.last_join not in d.replies  # parked until the leader rejoins
    assert d.heartbeat(leader, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    follower_join = d.last_join
    leader_join = d.join(leader)
    leader_result, follower_result = d.replies[leader_join], d.replies[follower_join]
    assert isinstance(leader_result, JoinResult) and isinstance(follower_result, JoinResult)
    assert leader_result.generation_id == follower_result.generation_id == 2
    assert {m.member_id for m in leader_result.members} == {leader, follower}
    assert follower_result.members == () and follower_result.leader == leader
    follower_sync = d.sync(follower, 2)
    assert follower_sync not in d.replies  # waits for the leader's assignment
    leader_sync = d.sync(leader, 2, {leader: b"L", follower: b"F"})
    assert d.replies[follower_sync] == SyncResult(ErrorCode.NONE, b"F", "consumer", "range")
    assert d.replies[leader_sync] == SyncResult(ErrorCode.NONE, b"L", "consumer", "range")
    assert d.state() is GroupState.STABLE


def test_follower_rejoining_stable_group_with_same_metadata_gets_current_generation() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    d.join(leader)
    d.sync(leader, 2, {leader: b"L", follower: b"F"})
    again = d.join(follower)
    result = d.replies[again]
    assert isinstance(result, JoinResult) and result.generation_id == 2 and result.members == ()
    assert d.state() is GroupState.STABLE


def test_protocol_selection_picks_common_protocol_most_preferred() -> None:
    d = Driver()
    both = (Protocol("cooperative-sticky", b"c"), Protocol("range", b"r"))
    a = d.join_new(protocols=both)
    b_first = d.join(protocols=(Protocol("range", b"r2"), Protocol("cooperative-sticky", b"c2")))
    b = d.replies[b_first]
    assert isinstance(b, JoinResult)
    d.join(b.member_id, protocols=(Protocol("range", b"r2"), Protocol("cooperative-sticky", b"c2")))
    c_first = d.join(protocols=both)
    c = d.replies[c_first]
    assert isinstance(c, JoinResult)
    last = d.join(c.member_id, protocols=both)
    d.join(a, protocols=both)
    result = d.replies[last]
    assert isinstance(result, JoinResult) and result.protocol_name == "cooperative-sticky"


def test_inconsistent_protocol_type_and_no_common_protocol_are_refused() -> None:
    d = Driver()
    stable_group_of_one(d)
    wrong_type = d.join(protocol_type="connect")
    no_common = d.join(protocols=(Protocol("roundrobin", b""),))
    for ticket in (wrong_type, no_common):
        result = d.replies[ticket]
        assert isinstance(result, JoinResult) and result.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert d.state() is GroupState.STABLE


def test_empty_protocol_type_is_refused_and_creates_no_group() -> None:
    d = Driver()
    ticket = d.join(protocol_type="")
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert d.group is None


def test_invalid_session_timeout() -> None:
    d = Driver()
    ticket = d.join(session_ms=1000)
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.INVALID_SESSION_TIMEOUT


def test_join_with_unknown_member_id() -> None:
    d = Driver()
    ticket = d.join("ghost")
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    stable_group_of_one(d)
    ticket = d.join("ghost")
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, max_size=1))
    stable_group_of_one(d)
    ticket = d.join()
    result = d.replies[ticket]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_initial_rebalance_delay_waits_and_extends_for_new_members() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    a = d.join_new()
    a_join = d.last_join
    d.tick(2000)
    d.join_new()
    b_join = d.last_join
    d.tick(1000)  # first delay over, but a member arrived during it: wait another delay
    assert a_join not in d.replies and d.state() is GroupState.PREPARING_REBALANCE
    d.tick(3000)
    a_result, b_result = d.replies[a_join], d.replies[b_join]
    assert isinstance(a_result, JoinResult) and isinstance(b_result, JoinResult)
    assert a_result.generation_id == b_result.generation_id == 1 and a_result.leader == a


# ---------------------------------------------------------------------------------------------
# timeouts


def test_member_without_heartbeat_is_removed_after_session_timeout() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    d.join(leader)
    d.sync(leader, 2, {leader: b"L", follower: b"F"})
    d.sync(follower, 2)
    for _ in range(4):
        d.tick(SESSION_MS // 3)
        assert d.heartbeat(leader, 2) in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
    assert d.group is not None and follower not in d.group.members
    assert d.state() is GroupState.PREPARING_REBALANCE
    rejoin = d.join(leader)
    result = d.replies[rejoin]
    assert isinstance(result, JoinResult) and result.generation_id == 3
    assert [m.member_id for m in result.members] == [leader]


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    d.join(leader)
    d.sync(leader, 2, {leader: b"L", follower: b"F"})
    d.sync(follower, 2)
    rejoin = d.join(leader, protocols=(Protocol("range", subscription("t", "u")),))  # new metadata
    assert d.state() is GroupState.PREPARING_REBALANCE
    for _ in range(REBALANCE_MS // 5000 - 1):
        d.tick(5000)
        assert d.heartbeat(follower, 2) == ErrorCode.REBALANCE_IN_PROGRESS  # alive, but never rejoins
    d.tick(4999)
    assert rejoin not in d.replies
    d.tick(1)
    result = d.replies[rejoin]
    assert isinstance(result, JoinResult) and result.generation_id == 3
    assert [m.member_id for m in result.members] == [leader]


def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    d.join(leader)
    d.sync(leader, 2, {leader: b"L", follower: b"F"})
    d.tick(SESSION_MS // 2)
    d.heartbeat(follower, 2)
    d.heartbeat(leader, 2)
    d.tick(REBALANCE_MS)
    assert d.group is not None and follower not in d.group.members


def test_pending_member_expires_after_session_timeout() -> None:
    d = Driver()
    ticket = d.join()
    pending = d.replies[ticket]
    assert isinstance(pending, JoinResult)
    d.tick(SESSION_MS)
    assert d.group is not None and not d.group.pending_members
    rejoin = d.join(pending.member_id)
    result = d.replies[rejoin]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------------------------------------
# heartbeat, sync and leave errors


def test_heartbeat_errors() -> None:
    d = Driver()
    assert d.heartbeat("ghost", 0) == ErrorCode.UNKNOWN_MEMBER_ID
    member = stable_group_of_one(d)
    assert d.heartbeat("ghost", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.heartbeat(member, 0) == ErrorCode.ILLEGAL_GENERATION
    assert d.heartbeat(member, 1) == ErrorCode.NONE


def test_sync_errors() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    stale = d.sync(member, 0)
    assert d.replies[stale] == SyncResult(ErrorCode.ILLEGAL_GENERATION)
    unknown = d.sync("ghost", 1)
    assert d.replies[unknown] == SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
    d.join_new()
    rebalancing = d.sync(member, 1)
    assert d.replies[rebalancing] == SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)


def test_last_member_leaving_empties_group_and_bumps_generation() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    result = d.leave(LeavingMember(member, None))
    assert result.members == ((LeavingMember(member, None), ErrorCode.NONE),)
    assert d.state() is GroupState.EMPTY
    assert d.group is not None and d.group.generation_id == 2 and d.group.protocol_name is None
    key, value = d.records[-1]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue) and value.members == ()


def test_leave_of_unknown_members() -> None:
    d = Driver()
    gone = LeavingMember("ghost", None)
    assert d.leave(gone).members == ((gone, ErrorCode.UNKNOWN_MEMBER_ID),)
    stable_group_of_one(d)
    assert d.leave(gone).members == ((gone, ErrorCode.UNKNOWN_MEMBER_ID),)
    assert d.state() is GroupState.STABLE


def test_leave_while_others_wait_in_join_completes_rebalance() -> None:
    d = Driver()
    leader = stable_group_of_one(d)
    follower = d.join_new()
    follower_join = d.last_join
    d.leave(LeavingMember(leader, None))
    result = d.replies[follower_join]
    assert isinstance(result, JoinResult) and result.leader == follower and result.generation_id == 2


# ---------------------------------------------------------------------------------------------
# static membership


def test_static_member_rejoin_replaces_member_id_without_rebalance() -> None:
    d = Driver()
    first = d.join(instance="host-1")
    joined = d.replies[first]
    assert isinstance(joined, JoinResult) and joined.error_code == ErrorCode.NONE  # no MEMBER_ID_REQUIRED
    old_id = joined.member_id
    d.sync(old_id, 1, {old_id: b"A"})
    again = d.join(instance="host-1")
    result = d.replies[again]
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.NONE
    assert result.member_id != old_id and result.generation_id == 1
    assert result.skip_assignment  # the static leader keeps the current assignment
    assert d.state() is GroupState.STABLE
    assert d.group is not None and d.group.members[result.member_id].assignment == b"A"
    assert d.heartbeat(old_id, 1, instance="host-1") == ErrorCode.FENCED_INSTANCE_ID
    assert d.heartbeat(result.member_id, 1, instance="host-1") == ErrorCode.NONE
    assert isinstance(d.records[-1][1], GroupMetadataValue)


def test_static_member_leave_by_instance_id() -> None:
    d = Driver()
    ticket = d.join(instance="host-1")
    result = d.replies[ticket]
    assert isinstance(result, JoinResult)
    fenced = LeavingMember("someone-else", "host-1")
    assert d.leave(fenced).members == ((fenced, ErrorCode.FENCED_INSTANCE_ID),)
    ok = LeavingMember("", "host-1")
    assert d.leave(ok).members == ((ok, ErrorCode.NONE),)
    assert d.state() is GroupState.EMPTY


# ---------------------------------------------------------------------------------------------
# offsets


TP = TopicPartition("t", 0)


def test_simple_consumer_commit_creates_empty_group() -> None:
    d = Driver()
    decision = d.commit({TP: 42})
    assert d.last_commit == {TP: ErrorCode.NONE}
    assert d.state() is GroupState.EMPTY and d.group is not None and d.group.offsets[TP].offset == 42
    assert decision.records[0][0] == OffsetCommitKey("g", "t", 0)
    assert decision.on_failure == Failure(FailureKind.COMMIT, decision.replies[0].ticket, (TP,))


def test_commit_to_unknown_group_with_generation_is_illegal() -> None:
    d = Driver()
    d.commit({TP: 1}, generation=3, member_id="m")
    assert d.last_commit == {TP: ErrorCode.ILLEGAL_GENERATION}
    assert d.group is None


def test_commit_validation_in_managed_group() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    d.commit({TP: 1})
    assert d.last_commit == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    d.commit({TP: 1}, generation=1, member_id="ghost")
    assert d.last_commit == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    d.commit({TP: 1}, generation=0, member_id=member)
    assert d.last_commit == {TP: ErrorCode.ILLEGAL_GENERATION}
    d.commit({TP: 1}, generation=1, member_id=member)
    assert d.last_commit == {TP: ErrorCode.NONE}
    assert d.group is not None and d.group.offsets[TP].offset == 1


def test_commit_during_completing_rebalance() -> None:
    d = Driver()
    member = d.join_new()
    assert d.state() is GroupState.COMPLETING_REBALANCE
    d.commit({TP: 1}, generation=1, member_id=member)
    assert d.last_commit == {TP: ErrorCode.REBALANCE_IN_PROGRESS}
    assert d.group is not None and not d.group.offsets


def test_failed_commit_answers_error_and_keeps_state() -> None:
    d = Driver()
    d.commit({TP: 5})
    before = d.group
    assert before is not None
    failure = Failure(FailureKind.COMMIT, 99, (TP,))
    decision = classic.write_failed(before, failure, ErrorCode.COORDINATOR_NOT_AVAILABLE, d.now(), d.config)
    assert decision.group is before
    assert decision.replies[0].value == {TP: ErrorCode.COORDINATOR_NOT_AVAILABLE}


def test_failed_sync_store_rebalances() -> None:
    d = Driver()
    member = d.join_new()
    before = d.group
    decision = classic.write_failed(
        before, Failure(FailureKind.SYNC, 7), ErrorCode.NOT_COORDINATOR, d.now(), d.config
    )
    assert decision.replies[0].value == SyncResult(ErrorCode.NOT_COORDINATOR)
    assert decision.group is not None and decision.group.state is GroupState.PREPARING_REBALANCE
    assert member in decision.group.members


def test_offsets_of_empty_group_expire_after_retention() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=60_000))
    member = stable_group_of_one(d)
    d.commit({TP: 7}, generation=1, member_id=member)
    d.leave(LeavingMember(member, None))
    assert d.group is not None
    d.clock.advance(59_999)
    assert classic.expire_offsets(d.group, d.now(), d.config).group is d.group
    d.clock.advance(1)
    decision = classic.expire_offsets(d.group, d.now(), d.config)
    assert decision.group is None
    assert (OffsetCommitKey("g", "t", 0), None) in decision.records
    assert (GroupMetadataKey("g"), None) in decision.records


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=60_000))
    member = stable_group_of_one(d)  # subscribed to "t"
    other = TopicPartition("old-topic", 0)
    d.commit({TP: 7, other: 3}, generation=1, member_id=member)
    assert d.group is not None
    d.clock.advance(60_000)
    decision = classic.expire_offsets(d.group, d.now(), d.config)
    assert decision.group is not None and set(decision.group.offsets) == {TP}
    assert decision.records == ((OffsetCommitKey("g", "old-topic", 0), None),)


def test_simple_group_offsets_expire_by_commit_time() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=60_000))
    d.commit({TP: 1})
    d.clock.advance(30_000)
    d.commit({TopicPartition("t", 1): 1})
    d.clock.advance(30_000)
    assert d.group is not None
    decision = classic.expire_offsets(d.group, d.now(), d.config)
    assert decision.group is not None and set(decision.group.offsets) == {TopicPartition("t", 1)}


def test_explicit_expire_timestamp_wins() -> None:
    group = Group("g", offsets={TP: CommittedOffset(1, -1, "", 0, expire_timestamp_ms=500)})
    config = GroupConfig()
    assert classic.expire_offsets(group, Now(499, 0), config).group is group
    assert classic.expire_offsets(group, Now(500, 0), config).group is None


def test_delete_group() -> None:
    d = Driver()
    ticket = 1000
    assert classic.delete_group(None, ticket, d.now()).replies[0].value == ErrorCode.GROUP_ID_NOT_FOUND
    member = stable_group_of_one(d)
    d.commit({TP: 7}, generation=1, member_id=member)
    assert d.group is not None
    assert classic.delete_group(d.group, ticket, d.now()).replies[0].value == ErrorCode.NON_EMPTY_GROUP
    d.leave(LeavingMember(member, None))
    decision = classic.delete_group(d.group, ticket, d.now())
    assert decision.group is None and decision.replies[0].value == ErrorCode.NONE
    assert set(decision.records) == {(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)}


def test_delete_offsets_refuses_subscribed_topics_of_active_group() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    other = TopicPartition("other", 0)
    d.commit({TP: 7, other: 1}, generation=1, member_id=member)
    decision = classic.delete_offsets(d.group, (TP, other), 5, d.now())
    result = decision.replies[0].value
    assert result == OffsetDeleteResult(
        ErrorCode.NONE, {TP: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: ErrorCode.NONE}
    )
    assert decision.group is not None and set(decision.group.offsets) == {TP}
    assert decision.records == ((OffsetCommitKey("g", "other", 0), None),)
    missing = classic.delete_offsets(None, (TP,), 6, d.now()).replies[0].value
    assert missing == OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND)


def test_non_consumer_group_with_members_refuses_offset_delete() -> None:
    d = Driver()
    member = d.join_new(protocol_type="connect", protocols=(Protocol("v1", b""),))
    assert d.group is not None and member in d.group.members
    result = classic.delete_offsets(d.group, (TP,), 5, d.now()).replies[0].value
    assert result == OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP)


def test_group_states_survive_unchanged_on_errors() -> None:
    d = Driver()
    member = stable_group_of_one(d)
    before = d.group
    d.heartbeat(member, 9)
    d.sync("ghost", 1)
    d.join(protocol_type="other")
    assert d.group == before
