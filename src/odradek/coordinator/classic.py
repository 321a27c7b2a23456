"""The classic group membership protocol as pure transitions over `Group` values.

Owns Kafka's classic (pre-KIP-848) group state machine:

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader SyncGroup stored--> Stable
    Stable / CompletingRebalance --join with new metadata, leader rejoin, member leaves or expires-->
        PreparingRebalance
    PreparingRebalance --no member left--> Empty (next generation, no protocol)

with session timeouts, rebalance timeouts, group.initial.rebalance.delay.ms (a join to an Empty group
waits that long, extended while new members arrive, bounded by the rebalance timeout), static
membership (group.instance.id: a rejoin under a known instance id replaces the member id and fences
the old one), KIP-394 (JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and a pending
member id), pending SyncGroup expiry (members that never sync are removed after the rebalance
timeout), offset commits (simple consumers with generation -1 included), offset expiration
(offsets.retention.minutes), group and offset deletion. Protocol metadata and assignments are opaque.

Shape: every entry point is `f(group | None, args, ticket, now, config) -> Decision`. A Decision
holds the next group (None: the group is gone), the replies to send (by the ticket the runtime gave
each request; JoinGroup and SyncGroup park their ticket in the member until the rebalance answers it),
the records to append to `__consumer_offsets`, and how to answer if that append fails. Nothing here
reads a clock, draws randomness or performs I/O: the runtime passes `now` and new member ids.

Deviations from Kafka: a JoinGroup or SyncGroup that replaces a still-parked one from the same member
answers the older one with REBALANCE_IN_PROGRESS instead of leaving it unanswered.
Callers: the coordinator shard runtime and tests.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from odradek.coordinator.config import GroupConfig
from odradek.coordinator.group import (
    CommittedOffset,
    Group,
    GroupState,
    InitialDelay,
    Member,
    Now,
    Protocol,
    TopicPartition,
)
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from odradek.protocol.errors import ErrorCode

NONE = ErrorCode.NONE
_REBALANCE_STATES = (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

# ---------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True, slots=True)
class JoinArgs:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    require_known_member_id: bool = False


@dataclass(frozen=True, slots=True)
class SyncArgs:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class HeartbeatArgs:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class CommitArgs:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, CommittedOffset]


# ---------------------------------------------------------------------------------------------
# outputs


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error_code: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error_code: int
    members: tuple[tuple[LeavingMember, int], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error_code: int
    partitions: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    ticket: int
    value: object


Record = tuple[OffsetCommitKey | GroupMetadataKey, OffsetCommitValue | GroupMetadataValue | None]


class FailureKind(enum.Enum):
    COMMIT = "commit"
    SYNC = "sync"
    STATIC_JOIN = "static_join"
    DELETE_GROUP = "delete_group"
    DELETE_OFFSETS = "delete_offsets"


@dataclass(frozen=True, slots=True)
class Failure:
    """How to answer when a decision's records cannot be appended (the group stays as it was)."""

    kind: FailureKind
    ticket: int
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    group: Group | None
    replies: tuple[Reply, ...] = ()
    records: tuple[Record, ...] = ()
    on_failure: Failure | None = None


class _Out:
    """Replies and records collected while one decision is computed (local to that computation)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.records: list[Record] = []

    def reply(self, ticket: int, value: object) -> None:
        self.replies.append(Reply(ticket, value))

    def decision(self, group: Group | None, on_failure: Failure | None = None) -> Decision:
        return Decision(group, tuple(self.replies), tuple(self.records), on_failure)


def _answer(group: Group | None, ticket: int, value: object) -> Decision:
    return Decision(group, (Reply(ticket, value),))


# ---------------------------------------------------------------------------------------------
# JoinGroup


def join_group(
    group: Group | None, args: JoinArgs, ticket: int, new_member_id: str, now: Now, config: GroupConfig
) -> Decision:
    """JoinGroup. `new_member_id` is the id handed out if this join needs one."""
    if not config.min_session_timeout_ms <= args.session_timeout_ms <= config.max_session_timeout_ms:
        return _answer(group, ticket, JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, args.member_id))
    if group is None and args.member_id:
        return _answer(None, ticket, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, args.member_id))
    current = group if group is not None else Group(args.group_id, state_timestamp_ms=now.wall_ms)
    if not _supports_protocols(current, args.protocol_type, args.protocols):
        return _answer(group, ticket, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, args.member_id))
    if not args.member_id and _is_full(current, args.group_instance_id, config):
        return _answer(group, ticket, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
    out = _Out()
    if not args.member_id:
        return _join_new_member(current, args, ticket, new_member_id, now, config, out)
    return _join_known_member(current, args, ticket, now, config, out)


def _is_full(group: Group, group_instance_id: str | None, config: GroupConfig) -> bool:
    """No room for one more member (a known static member rejoining takes no extra room)."""
    if group_instance_id is not None and group_instance_id in group.static_members:
        return False
    return len(group.members) + len(group.pending_members) >= config.max_size


def _supports_protocols(group: Group, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
    if not group.members:
        return bool(protocol_type) and bool(protocols)
    if protocol_type != group.protocol_type:
        return False
    return any(
        all(any(p.name == proposed.name for p in m.protocols) for m in group.members.values())
        for proposed in protocols
    )


def _join_new_member(
    group: Group, args: JoinArgs, ticket: int, member_id: str, now: Now, config: GroupConfig, out: _Out
) -> Decision:
    if args.group_instance_id is not None and args.group_instance_id in group.static_members:
        return _replace_static_member(group, args, ticket, member_id, now, config, out)
    if args.require_known_member_id and args.group_instance_id is None:
        pending = {**group.pending_members, member_id: now.monotonic_ms + args.session_timeout_ms}
        return _answer(
            replace(group, pending_members=pending),
            ticket,
            JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id),
        )
    group = _add_member_and_rebalance(group, args, member_id, ticket, now, config, out)
    return _settled(group, now, config, out)


def _join_known_member(
    group: Group, args: JoinArgs, ticket: int, now: Now, config: GroupConfig, out: _Out
) -> Decision:
    member_id = args.member_id
    if member_id in group.pending_members:
        pending = {k: v for k, v in group.pending_members.items() if k != member_id}
        group = _add_member_and_rebalance(
            replace(group, pending_members=pending), args, member_id, ticket, now, config, out
        )
        return _settled(group, now, config, out)
    error = _validate_member(group, member_id, args.group_instance_id)
    if error is not None:
        return _answer(group, ticket, JoinResult(error, member_id))
    member = group.members[member_id]
    same_metadata = member.protocols == args.protocols
    if group.state is GroupState.COMPLETING_REBALANCE and same_metadata:
        # A retry of a join whose answer was lost: repeat the generation's answer.
        return _answer(group, ticket, _generation_result(group, member_id, group.leader_id == member_id))
    if group.state is GroupState.STABLE and same_metadata and group.leader_id != member_id:
        return _answer(group, ticket, _generation_result(group, member_id, False))
    group = _update_member_and_rebalance(group, member, args, ticket, now, config, out)
    return _settled(group, now, config, out)


def _generation_result(group: Group, member_id: str, with_members: bool, skip: bool = False) -> JoinResult:
    members = _joined_members(group) if with_members else ()
    return JoinResult(
        NONE,
        member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        skip,
        members,
    )


def _joined_members(group: Group) -> tuple[JoinedMember, ...]:
    return tuple(
        JoinedMember(m.member_id, m.group_instance_id, m.protocol_metadata(group.protocol_name))
        for m in group.members.values()
    )


def _validate_member(group: Group, member_id: str, group_instance_id: str | None) -> int | None:
    """FENCED_INSTANCE_ID when the instance id belongs to another member id, UNKNOWN_MEMBER_ID when
    the member id is not in the group, else None."""
    if group_instance_id is not None and group_instance_id in group.static_members:
        if group.static_members[group_instance_id] != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return None
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


def _add_member_and_rebalance(
    group: Group, args: JoinArgs, member_id: str, ticket: int, now: Now, config: GroupConfig, out: _Out
) -> Group:
    member = Member(
        member_id=member_id,
        group_instance_id=args.group_instance_id,
        client_id=args.client_id,
        client_host=args.client_host,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        session_timeout_ms=args.session_timeout_ms,
        protocol_type=args.protocol_type,
        protocols=args.protocols,
        join_ticket=ticket,
        is_new=True,
        session_deadline_ms=now.monotonic_ms + config.new_member_join_timeout_ms,
    )
    static = dict(group.static_members)
    if args.group_instance_id is not None:
        static[args.group_instance_id] = member_id
    delay = group.initial_delay
    group = replace(
        group,
        members={**group.members, member_id: member},
        static_members=static,
        protocol_type=group.protocol_type if group.members else args.protocol_type,
        leader_id=group.leader_id if group.leader_id is not None else member_id,
        initial_delay=replace(delay, new_member_added=True) if delay is not None else None,
    )
    return _maybe_prepare_rebalance(group, now, config, out)


def _update_member_and_rebalance(
    group: Group, member: Member, args: JoinArgs, ticket: int, now: Now, config: GroupConfig, out: _Out
) -> Group:
    if member.join_ticket is not None:
        out.reply(member.join_ticket, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
    updated = replace(
        member,
        protocols=args.protocols,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        session_timeout_ms=args.session_timeout_ms,
        join_ticket=ticket,
    )
    group = _with_member(group, updated)
    return _maybe_prepare_rebalance(group, now, config, out)


def _replace_static_member(
    group: Group, args: JoinArgs, ticket: int, new_id: str, now: Now, config: GroupConfig, out: _Out
) -> Decision:
    """A known group.instance.id joins without a member id: the new member id takes the old one's
    place (and assignment); the old member id is fenced."""
    old_id = group.static_members[args.group_instance_id or ""]
    old = group.members[old_id]
    if old.join_ticket is not None:
        out.reply(old.join_ticket, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
    if old.sync_ticket is not None:
        out.reply(old.sync_ticket, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
    member = replace(
        old,
        member_id=new_id,
        client_id=args.client_id,
        client_host=args.client_host,
        protocols=args.protocols,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        session_timeout_ms=args.session_timeout_ms,
        join_ticket=None,
        sync_ticket=None,
        session_deadline_ms=now.monotonic_ms + args.session_timeout_ms,
    )
    members = {
        (new_id if k == old_id else k): (member if k == old_id else m) for k, m in group.members.items()
    }
    group = replace(
        group,
        members=members,
        static_members={**group.static_members, args.group_instance_id or "": new_id},
        leader_id=new_id if group.leader_id == old_id else group.leader_id,
        pending_sync=frozenset(new_id if k == old_id else k for k in group.pending_sync),
    )
    if group.state is GroupState.STABLE and _select_protocol(group) == group.protocol_name:
        is_leader = group.leader_id == new_id
        out.reply(ticket, _generation_result(group, new_id, is_leader, skip=is_leader))
        out.records.append(group_metadata_record(group))
        return out.decision(group, Failure(FailureKind.STATIC_JOIN, ticket))
    group = _with_member(group, replace(member, join_ticket=ticket))
    if group.state is not GroupState.PREPARING_REBALANCE:
        group = _prepare_rebalance(group, now, config, out)
    return _settled(group, now, config, out)


def _with_member(group: Group, member: Member) -> Group:
    return replace(group, members={**group.members, member.member_id: member})


# ---------------------------------------------------------------------------------------------
# rebalance phases


def _maybe_prepare_rebalance(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    if group.state in _REBALANCE_STATES:
        return _prepare_rebalance(group, now, config, out)
    return group


def _prepare_rebalance(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    members = group.members
    if group.state is GroupState.COMPLETING_REBALANCE:
        members = _reset_assignments(members, ErrorCode.REBALANCE_IN_PROGRESS, out)
    initial_delay = None
    if group.state is GroupState.EMPTY:
        delay = config.initial_rebalance_delay_ms
        initial_delay = InitialDelay(delay, max(group.max_rebalance_timeout_ms() - delay, 0))
        deadline = now.monotonic_ms + delay
    else:
        deadline = now.monotonic_ms + group.max_rebalance_timeout_ms()
    return replace(
        group,
        members=members,
        state=GroupState.PREPARING_REBALANCE,
        state_timestamp_ms=now.wall_ms,
        join_deadline_ms=deadline,
        initial_delay=initial_delay,
        pending_sync=frozenset(),
        sync_deadline_ms=None,
    )


def _reset_assignments(members: Mapping[str, Member], error: int, out: _Out) -> dict[str, Member]:
    """Clear every assignment; parked SyncGroups get `error`."""
    reset = {}
    for member_id, member in members.items():
        if member.sync_ticket is not None:
            out.reply(member.sync_ticket, SyncResult(error))
        reset[member_id] = replace(member, assignment=b"", sync_ticket=None)
    return reset


def _complete_join(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    """End PreparingRebalance: drop dynamic members that did not rejoin, elect a leader among those
    who did, start the next generation and answer every parked JoinGroup."""
    for member in list(group.members.values()):
        if member.join_ticket is None and member.group_instance_id is None:
            group = _remove_member(group, member.member_id, out)
    leader = group.leader_id
    if group.members and (leader is None or group.members[leader].join_ticket is None):
        joined = [m.member_id for m in group.members.values() if m.join_ticket is not None]
        if not joined:
            # Only static members that have not rejoined: wait another rebalance timeout.
            return replace(group, join_deadline_ms=now.monotonic_ms + group.max_rebalance_timeout_ms())
        leader = joined[0]
    group = replace(
        group,
        generation_id=group.generation_id + 1,
        leader_id=leader,
        state_timestamp_ms=now.wall_ms,
        join_deadline_ms=None,
        initial_delay=None,
    )
    if not group.members:
        group = replace(group, state=GroupState.EMPTY, protocol_name=None)
        out.records.append(group_metadata_record(group))
        return group
    group = replace(group, state=GroupState.COMPLETING_REBALANCE, protocol_name=_select_protocol(group))
    everyone = _joined_members(group)
    members = {}
    for member_id, member in group.members.items():
        if member.join_ticket is not None:
            result = _generation_result(group, member_id, False)
            out.reply(member.join_ticket, replace(result, members=everyone if member_id == leader else ()))
        members[member_id] = replace(
            member,
            join_ticket=None,
            is_new=False,
            session_deadline_ms=now.monotonic_ms + member.session_timeout_ms,
        )
    return replace(
        group,
        members=members,
        pending_sync=frozenset(members),
        sync_deadline_ms=now.monotonic_ms + group.max_rebalance_timeout_ms(),
    )


def _select_protocol(group: Group) -> str | None:
    """The protocol every member supports that most members prefer (first vote breaks ties)."""
    members = list(group.members.values())
    if not members:
        return None
    candidates = {p.name for p in members[0].protocols}
    for member in members[1:]:
        candidates &= {p.name for p in member.protocols}
    votes = Counter(next(p.name for p in m.protocols if p.name in candidates) for m in members if candidates)
    return max(votes, key=votes.__getitem__) if votes else None


def _remove_member(group: Group, member_id: str, out: _Out) -> Group:
    """Take a member out of the group; its parked requests are answered UNKNOWN_MEMBER_ID."""
    member = group.members[member_id]
    if member.join_ticket is not None:
        out.reply(member.join_ticket, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
    if member.sync_ticket is not None:
        out.reply(member.sync_ticket, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
    members = {k: m for k, m in group.members.items() if k != member_id}
    static = {k: v for k, v in group.static_members.items() if v != member_id}
    leader = group.leader_id if group.leader_id != member_id else next(iter(members), None)
    return replace(
        group,
        members=members,
        static_members=static,
        leader_id=leader,
        pending_sync=group.pending_sync - {member_id},
    )


def _remove_member_and_update(
    group: Group, member_id: str, now: Now, config: GroupConfig, out: _Out
) -> Group:
    group = _remove_member(group, member_id, out)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        group = _prepare_rebalance(group, now, config, out)
    return group


def advance(group: Group, now: Now, config: GroupConfig) -> Decision:
    """Fire every timer of the group that is due at `now` and complete a rebalance that can complete."""
    out = _Out()
    return _settled(group, now, config, out)


def _settled(group: Group, now: Now, config: GroupConfig, out: _Out) -> Decision:
    group = _expire_sessions(group, now, config, out)
    group = _expire_pending_sync(group, now, config, out)
    if group.state is GroupState.PREPARING_REBALANCE:
        group = _maybe_complete_join(group, now, config, out)
    return out.decision(group)


def _expire_sessions(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    expired_pending = [k for k, deadline in group.pending_members.items() if deadline <= now.monotonic_ms]
    if expired_pending:
        pending = {k: v for k, v in group.pending_members.items() if k not in expired_pending}
        group = replace(group, pending_members=pending)
    for member in list(group.members.values()):
        if not member.keeps_session_alive() and member.session_deadline_ms <= now.monotonic_ms:
            group = _remove_member_and_update(group, member.member_id, now, config, out)
    return group


def _expire_pending_sync(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    if group.sync_deadline_ms is None or group.sync_deadline_ms > now.monotonic_ms:
        return group
    late = group.pending_sync
    group = replace(group, sync_deadline_ms=None, pending_sync=frozenset())
    for member_id in late:
        group = _remove_member(group, member_id, out)
    if late:
        group = _maybe_prepare_rebalance(group, now, config, out)
    return group


def _maybe_complete_join(group: Group, now: Now, config: GroupConfig, out: _Out) -> Group:
    due = group.join_deadline_ms is not None and group.join_deadline_ms <= now.monotonic_ms
    delay = group.initial_delay
    if delay is not None:
        if not due:
            return group
        if delay.new_member_added and delay.remaining_ms > 0:
            step = min(delay.delay_ms, delay.remaining_ms)
            return replace(
                group,
                join_deadline_ms=now.monotonic_ms + step,
                initial_delay=InitialDelay(delay.delay_ms, delay.remaining_ms - step),
            )
        return _complete_join(group, now, config, out)
    if due or group.all_members_joined():
        return _complete_join(group, now, config, out)
    return group


# ---------------------------------------------------------------------------------------------
# SyncGroup, Heartbeat, LeaveGroup


def sync_group(group: Group | None, args: SyncArgs, ticket: int, now: Now, config: GroupConfig) -> Decision:
    error = _validate_generation(group, args.member_id, args.group_instance_id, args.generation_id)
    if error is None and group is not None and not _same_protocol(group, args):
        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    if error is None and group is not None and group.state is GroupState.PREPARING_REBALANCE:
        error = ErrorCode.REBALANCE_IN_PROGRESS
    if error is not None or group is None:
        return _answer(group, ticket, SyncResult(error or ErrorCode.UNKNOWN_MEMBER_ID))
    out = _Out()
    group = replace(group, pending_sync=group.pending_sync - {args.member_id})
    member = group.members[args.member_id]
    if group.state is GroupState.STABLE:
        out.reply(ticket, SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name))
        group = _with_member(
            group, replace(member, session_deadline_ms=now.monotonic_ms + member.session_timeout_ms)
        )
        return _settled(group, now, config, out)
    if member.sync_ticket is not None:
        out.reply(member.sync_ticket, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
    group = _with_member(group, replace(member, sync_ticket=ticket))
    if args.member_id != group.leader_id:
        return _settled(group, now, config, out)
    return _complete_sync(group, args.assignments, ticket, now, out)


def _same_protocol(group: Group, args: SyncArgs) -> bool:
    return (args.protocol_type is None or args.protocol_type == group.protocol_type) and (
        args.protocol_name is None or args.protocol_name == group.protocol_name
    )


def _complete_sync(
    group: Group, assignments: Mapping[str, bytes], ticket: int, now: Now, out: _Out
) -> Decision:
    """The leader's assignment: store it, answer every parked SyncGroup, become Stable."""
    members = {}
    for member_id, member in group.members.items():
        assignment = bytes(assignments.get(member_id, b""))
        if member.sync_ticket is not None:
            out.reply(
                member.sync_ticket, SyncResult(NONE, assignment, group.protocol_type, group.protocol_name)
            )
        members[member_id] = replace(
            member,
            assignment=assignment,
            sync_ticket=None,
            session_deadline_ms=now.monotonic_ms + member.session_timeout_ms,
        )
    group = replace(group, members=members, state=GroupState.STABLE, state_timestamp_ms=now.wall_ms)
    out.records.append(group_metadata_record(group))
    return out.decision(group, Failure(FailureKind.SYNC, ticket))


def _validate_generation(
    group: Group | None, member_id: str, instance_id: str | None, generation: int
) -> int | None:
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    error = _validate_member(group, member_id, instance_id)
    if error is None and generation != group.generation_id:
        error = ErrorCode.ILLEGAL_GENERATION
    return error


def heartbeat(
    group: Group | None, args: HeartbeatArgs, ticket: int, now: Now, config: GroupConfig
) -> Decision:
    error = _validate_generation(group, args.member_id, args.group_instance_id, args.generation_id)
    if error is not None or group is None:
        return _answer(group, ticket, error or ErrorCode.UNKNOWN_MEMBER_ID)
    if group.state is GroupState.EMPTY:
        return _answer(group, ticket, ErrorCode.UNKNOWN_MEMBER_ID)
    member = group.members[args.member_id]
    group = _with_member(
        group, replace(member, session_deadline_ms=now.monotonic_ms + member.session_timeout_ms)
    )
    rebalancing = group.state is GroupState.PREPARING_REBALANCE
    return _answer(group, ticket, ErrorCode.REBALANCE_IN_PROGRESS if rebalancing else NONE)


def leave_group(
    group: Group | None, leaving: tuple[LeavingMember, ...], ticket: int, now: Now, config: GroupConfig
) -> Decision:
    """LeaveGroup of one or more members; each gets its own error code (v3+ batch semantics)."""
    if group is None:
        return _answer(
            None, ticket, LeaveResult(NONE, tuple((m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving))
        )
    out = _Out()
    results = []
    for request in leaving:
        group, error = _leave_one(group, request, now, config, out)
        results.append((request, error))
    out.reply(ticket, LeaveResult(NONE, tuple(results)))
    return _settled(group, now, config, out)


def _leave_one(
    group: Group, request: LeavingMember, now: Now, config: GroupConfig, out: _Out
) -> tuple[Group, int]:
    member_id = request.member_id
    if request.group_instance_id is not None:
        known = group.static_members.get(request.group_instance_id)
        if known is None:
            return group, ErrorCode.UNKNOWN_MEMBER_ID
        if member_id and member_id != known:
            return group, ErrorCode.FENCED_INSTANCE_ID
        member_id = known
    elif member_id in group.pending_members:
        pending = {k: v for k, v in group.pending_members.items() if k != member_id}
        return replace(group, pending_members=pending), NONE
    if member_id not in group.members:
        return group, ErrorCode.UNKNOWN_MEMBER_ID
    return _remove_member_and_update(group, member_id, now, config, out), NONE


# ---------------------------------------------------------------------------------------------
# offsets


def commit_offsets(
    group: Group | None, args: CommitArgs, ticket: int, now: Now, config: GroupConfig
) -> Decision:
    """OffsetCommit: members of the current generation, or anyone (generation -1) for a group
    without members. Offsets take effect once their records are appended."""
    if group is None and args.generation_id >= 0:
        return _answer(None, ticket, _all(args.offsets, ErrorCode.ILLEGAL_GENERATION))
    original = group
    if group is None:
        group = Group(args.group_id, state_timestamp_ms=now.wall_ms)
    error = _validate_commit(group, args)
    if error is None and group.state is GroupState.COMPLETING_REBALANCE:
        error = ErrorCode.REBALANCE_IN_PROGRESS
    if error is not None:
        return _answer(original, ticket, _all(args.offsets, error))
    member = group.members.get(args.member_id)
    if member is not None:
        group = _with_member(
            group, replace(member, session_deadline_ms=now.monotonic_ms + member.session_timeout_ms)
        )
    group = replace(group, offsets={**group.offsets, **args.offsets})
    out = _Out()
    out.reply(ticket, _all(args.offsets, NONE))
    out.records.extend(offset_commit_record(group.group_id, tp, o) for tp, o in args.offsets.items())
    return out.decision(group, Failure(FailureKind.COMMIT, ticket, tuple(args.offsets)))


def _validate_commit(group: Group, args: CommitArgs) -> int | None:
    if args.generation_id >= 0 or args.member_id or args.group_instance_id is not None:
        error = _validate_member(group, args.member_id, args.group_instance_id)
        if error is None and args.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        return error
    if group.state is not GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


def validate_txn_commit(group: Group | None, args: CommitArgs) -> int | None:
    """TxnOffsetCommit's checks (Kafka's): a member id or generation given must be the group's;
    a producer that gives neither (v0-v2) may commit to any group."""
    if group is None:
        return None
    if args.group_instance_id is not None or args.member_id:
        error = _validate_member(group, args.member_id, args.group_instance_id)
        if error is not None:
            return error
    if args.generation_id >= 0 and args.generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None


def with_txn_offsets(
    group: Group | None, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset], now: Now
) -> Group:
    """The group once a committed transaction's offsets take effect (the group created if needed)."""
    if group is None:
        group = Group(group_id, state_timestamp_ms=now.wall_ms)
    return replace(group, offsets={**group.offsets, **offsets})


def _all(partitions: Mapping[TopicPartition, object] | tuple[TopicPartition, ...], error: int) -> dict:
    return {tp: error for tp in partitions}


def delete_offsets(
    group: Group | None,
    partitions: tuple[TopicPartition, ...],
    ticket: int,
    now: Now,
    keep_topics: frozenset[str] = frozenset(),
) -> Decision:
    """OffsetDelete: a group with members keeps the offsets of topics it subscribes to;
    `keep_topics`: the topics a KIP-848 consumer group of the same id subscribes to."""
    if group is None:
        return _answer(None, ticket, OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND))
    if group.state is GroupState.EMPTY:
        subscribed: frozenset[str] = keep_topics
    elif group.is_consumer_group():
        topics = group.subscribed_topics()
        subscribed = topics if topics is not None else frozenset(tp.topic for tp in partitions)
    else:
        return _answer(group, ticket, OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP))
    errors = {
        tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp.topic in subscribed else NONE for tp in partitions
    }
    deletable = tuple(tp for tp, error in errors.items() if error == NONE)
    out = _Out()
    out.reply(ticket, OffsetDeleteResult(NONE, errors))
    group = _drop_offsets(group, deletable, now, out)
    return out.decision(group, Failure(FailureKind.DELETE_OFFSETS, ticket))


def _drop_offsets(group: Group, partitions: tuple[TopicPartition, ...], now: Now, out: _Out) -> Group | None:
    """Tombstone the offsets of `partitions`; an Empty group left without offsets dies."""
    gone = [tp for tp in partitions if tp in group.offsets]
    out.records.extend((OffsetCommitKey(group.group_id, tp.topic, tp.partition), None) for tp in gone)
    group = replace(group, offsets={tp: o for tp, o in group.offsets.items() if tp not in gone})
    if group.state is GroupState.EMPTY and not group.offsets and not group.pending_members:
        out.records.append((GroupMetadataKey(group.group_id), None))
        return None
    return group


def delete_group(group: Group | None, ticket: int, now: Now) -> Decision:
    """DeleteGroups for one group: only an Empty group can go; its offsets and metadata are tombstoned."""
    if group is None:
        return _answer(None, ticket, ErrorCode.GROUP_ID_NOT_FOUND)
    if group.state is not GroupState.EMPTY:
        return _answer(group, ticket, ErrorCode.NON_EMPTY_GROUP)
    out = _Out()
    out.reply(ticket, NONE)
    out.records.extend(
        (OffsetCommitKey(group.group_id, tp.topic, tp.partition), None) for tp in group.offsets
    )
    out.records.append((GroupMetadataKey(group.group_id), None))
    return out.decision(None, Failure(FailureKind.DELETE_GROUP, ticket))


def expire_offsets(
    group: Group, now: Now, config: GroupConfig, keep_topics: frozenset[str] = frozenset()
) -> Decision:
    """Drop offsets past offsets.retention.minutes, Kafka's rules: an Empty group that had members
    counts from when it became Empty; a Stable consumer group expires offsets of topics it no longer
    subscribes to by commit time; a group that only commits (no protocol type) by commit time.
    An explicit expire timestamp (OffsetCommit v1-v4 retention) wins. `keep_topics`: the topics a
    KIP-848 consumer group of the same id subscribes to, whose offsets never expire (Kafka's rule)."""
    retention = config.offsets_retention_ms
    if group.protocol_type is not None and group.state is GroupState.EMPTY:
        base_ms = group.state_timestamp_ms
        keep: frozenset[str] = keep_topics
    elif group.protocol_type is None:
        base_ms, keep = None, keep_topics
    elif (
        group.is_consumer_group()
        and group.state is GroupState.STABLE
        and group.subscribed_topics() is not None
    ):
        base_ms, keep = None, group.subscribed_topics() or frozenset()
    else:
        return Decision(group)
    expired = tuple(
        tp
        for tp, offset in group.offsets.items()
        if tp.topic not in keep and _is_expired(offset, base_ms, retention, now.wall_ms)
    )
    abandoned = group.state is GroupState.EMPTY and not group.offsets and not group.pending_members
    if not expired and not abandoned:
        return Decision(group)
    out = _Out()
    return out.decision(_drop_offsets(group, expired, now, out))


def _is_expired(offset: CommittedOffset, base_ms: int | None, retention_ms: int, now_ms: int) -> bool:
    if offset.expire_timestamp_ms is not None:
        return now_ms >= offset.expire_timestamp_ms
    start = base_ms if base_ms is not None else offset.commit_timestamp_ms
    return now_ms - start >= retention_ms


def write_failed(
    group: Group | None, failure: Failure, error: int, now: Now, config: GroupConfig
) -> Decision:
    """The answer when a decision's append failed with `error`; `group` is the state before it."""
    out = _Out()
    match failure.kind:
        case FailureKind.COMMIT:
            out.reply(failure.ticket, _all(failure.partitions, error))
        case FailureKind.SYNC:
            out.reply(failure.ticket, SyncResult(error))
            if group is not None and group.state is GroupState.COMPLETING_REBALANCE:
                group = replace(group, members=_reset_assignments(group.members, error, out))
                group = _prepare_rebalance(group, now, config, out)
        case FailureKind.STATIC_JOIN:
            result = _generation_result(group, "", False) if group is not None else JoinResult(error)
            out.reply(failure.ticket, replace(result, error_code=error))
        case FailureKind.DELETE_GROUP:
            out.reply(failure.ticket, error)
        case FailureKind.DELETE_OFFSETS:
            out.reply(failure.ticket, OffsetDeleteResult(error))
    return out.decision(group)


# ---------------------------------------------------------------------------------------------
# reads


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: int
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberDescription, ...] = ()


def describe_group(group_id: str, group: Group | None) -> GroupDescription:
    """DescribeGroups: protocol, metadata and assignments only once Stable (Kafka's summary); an
    unknown group is described as Dead."""
    if group is None:
        return GroupDescription(NONE, group_id, GroupState.DEAD.value)
    stable = group.state is GroupState.STABLE
    members = tuple(
        MemberDescription(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.protocol_metadata(group.protocol_name) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    protocol = (group.protocol_name or "") if stable else ""
    return GroupDescription(NONE, group_id, group.state.value, group.protocol_type or "", protocol, members)


def fetch_offsets(
    group: Group | None, partitions: tuple[TopicPartition, ...] | None
) -> dict[TopicPartition, CommittedOffset | None]:
    """OffsetFetch: the committed offset of each partition (None when there is none); all of the
    group's offsets when `partitions` is None."""
    offsets = group.offsets if group is not None else {}
    if partitions is None:
        return dict(offsets)
    return {tp: offsets.get(tp) for tp in partitions}


# ---------------------------------------------------------------------------------------------
# records


def group_metadata_record(group: Group) -> Record:
    members = tuple(
        MemberMetadataValue(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.protocol_metadata(group.protocol_name),
            assignment=m.assignment,
        )
        for m in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=group.state_timestamp_ms if group.state_timestamp_ms is not None else -1,
        members=members,
    )
    return GroupMetadataKey(group.group_id), value


def offset_commit_record(group_id: str, tp: TopicPartition, offset: CommittedOffset) -> Record:
    value = OffsetCommitValue(
        offset=offset.offset,
        leader_epoch=offset.leader_epoch,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp_ms,
        expire_timestamp=offset.expire_timestamp_ms if offset.expire_timestamp_ms is not None else -1,
    )
    return OffsetCommitKey(group_id, tp.topic, tp.partition), value
