"""Online migration between classic groups and KIP-848 consumer groups (Kafka 4's
group.consumer.migration.policy), as pure decisions over `consumer_group` values.

Upgrade: a ConsumerGroupHeartbeat joining a classic group with members converts it when the policy
allows it (`bidirectional` or `upgrade`), the group uses the embedded "consumer" protocol and its
size is within group.consumer.max.size (else GROUP_ID_NOT_FOUND "Group <id> is not a consumer
group", as Kafka answers; also for a member's malformed subscription or assignment). The consumer
group takes the classic generation as its group and assignment epoch; each classic member becomes a
member at that epoch, Stable, subscribed to the topics of its subscription, assigned (and targeted)
the partitions of its last assignment, and keeps its classic session timeout and protocols
(ClassicMemberMetadata). Records: the classic GroupMetadata tombstone (the offsets stay), then each
member's metadata, the group epoch, each member's target, the target epoch and each member's
current assignment (Kafka's order). JoinGroup / SyncGroup parked in a classic rebalance are answered
REBALANCE_IN_PROGRESS so their members rejoin the consumer group.

Classic members of a consumer group (Kafka's classicGroup*ToConsumerGroup):
- JoinGroup: protocol type "consumer" with a protocol every classic member supports
  (INCONSISTENT_GROUP_PROTOCOL), MEMBER_ID_REQUIRED for a v4+ first join; the member is created or
  updated from its subscription (topics, rack), the group epoch bumped on a new member or a changed
  subscription, the target assignment computed, and the member reconciled with the partitions its
  subscription says it owns (none for an eager assignor, which revoked all before joining). The
  answer: generation = member epoch, protocol = the member's first, no leader (every classic
  member is a follower; the assignment comes from SyncGroup).
- SyncGroup: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION (generation != member epoch),
  INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS when the group epoch moved past the member's
  and it is not revoking; else the member's assigned partitions in the consumer protocol's
  assignment format (the version of its subscription).
- Heartbeat: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS when the member must
  rejoin: the group epoch is ahead of it, it has partitions to revoke, or the partitions it waits
  for were released.
- LeaveGroup: the member is removed and the group epoch bumped.
- OffsetCommit / OffsetFetch (consumer_group.validate_offset_*): a classic member commits with its
  generation (= member epoch, ILLEGAL_GENERATION otherwise) at any OffsetCommit version.
- A classic member's session deadline is its own session timeout, refreshed by each of its requests.

Downgrade (`maybe_downgrade`, after a ConsumerGroupHeartbeat leave or a timer's fencing removed
members): when only classic members remain and the policy allows it (`bidirectional` or
`downgrade`, at most group.max.size members), the consumer group is tombstoned and a classic group
written in its place (Kafka's ClassicGroup.fromConsumerGroup: generation = the group epoch, each
member's assignment its target, the protocol all support, the first member leader, offsets kept),
then a rebalance is prepared so the members rejoin. Otherwise the classic members go on in the
consumer group.

Timers of a classic member: its session timeout (each of its requests renews it); a sync timeout
armed by its JoinGroup and ended by its SyncGroup; a join timeout armed (if none runs) when a
Heartbeat or SyncGroup tells it to rejoin, ended by its JoinGroup; both its rebalance timeout, and
either passing fences it (consumer_group.advance).

A static classic member joining under a new member id takes over the member of its instance id
(epoch, assignment, target; no rebalance), a known member id of another member is FENCED_INSTANCE_ID.

Deviations (not done yet): a static classic member replacing the last consumer-protocol member of
its instance id does not downgrade the group (Kafka's validateOnlineDowngradeWithReplacedMemberId);
the group goes back to classic only when a consumer-protocol member leaves or is fenced.

Callers: GroupCoordinator (decisions on the shard), tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from odradek.coordinator import classic as classic_state
from odradek.coordinator import consumer_group
from odradek.coordinator.classic import HeartbeatArgs as ClassicHeartbeatArgs
from odradek.coordinator.classic import JoinArgs, JoinResult, LeaveResult, LeavingMember, SyncArgs, SyncResult
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.consumer_group import (
    CgRecord,
    ClassicChange,
    ClassicGroupRecord,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    CurrentAssignmentRecord,
    Decision,
    GroupEpochRecord,
    MemberMetadataRecord,
    MemberState,
    RegexRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicInfo,
    TopicPartitions,
    TopicsView,
)
from odradek.coordinator.group import Group, GroupState, Member, Now, Protocol
from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assignment_partitions
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import ProtocolDecodeError, Reader, Writer

# ---------------------------------------------------------------------------------------------
# the embedded consumer protocol: what a classic member's subscription says, its assignment's bytes


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: Mapping[str, frozenset[int]]
    rack_id: str | None


def parse_subscription(metadata: bytes) -> Subscription | None:
    """ConsumerProtocolSubscription: version, topics, user data, v1+ owned partitions, v2+
    generation, v3+ rack; None when malformed."""
    r = Reader(metadata)
    try:
        version = r.int16()
        topics = tuple(r.string() for _ in range(max(r.array_length(), 0)))
        r.nullable_bytes()
        owned: dict[str, frozenset[int]] = {}
        rack: str | None = None
        if version >= 1 and r.remaining:
            for _ in range(max(r.array_length(), 0)):
                topic = r.string()
                owned[topic] = frozenset(r.int32() for _ in range(max(r.array_length(), 0)))
        if version >= 2 and r.remaining:
            r.int32()
        if version >= 3 and r.remaining:
            rack = r.nullable_string()
    except ProtocolDecodeError:
        return None
    return Subscription(version, topics, owned, rack)


def serialize_assignment(partitions: Mapping[str, frozenset[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment (every version has this layout): version, [topic, [partition]],
    null user data."""
    w = Writer()
    w.int16(max(0, min(version, 3)))
    w.array_length(len(partitions))
    for topic, parts in sorted(partitions.items()):
        w.nullable_string(topic)
        w.array_length(len(parts))
        for p in sorted(parts):
            w.int32(p)
    w.nullable_bytes(None)  # user data
    return w.getvalue()


def _by_id(
    partitions: Mapping[str, frozenset[int]] | Mapping[str, tuple[int, ...]], view: TopicsView
) -> dict[uuid.UUID, frozenset[int]]:
    found: dict[uuid.UUID, frozenset[int]] = {}
    for name, parts in partitions.items():
        info = view.topic(name)
        if info is not None and parts:
            found[info.topic_id] = found.get(info.topic_id, frozenset()) | frozenset(parts)
    return found


def _by_name(partitions: TopicPartitions, names: Mapping[uuid.UUID, str]) -> dict[str, frozenset[int]]:
    return {names[t]: frozenset(p) for t, p in partitions.items() if t in names and p}


# ---------------------------------------------------------------------------------------------
# upgrade


def can_upgrade(classic: Group, config: GroupConfig) -> bool:
    """Kafka's validateOnlineUpgrade."""
    return (
        config.upgrade_enabled
        and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
        and len(classic.members) <= config.consumer_max_size
    )


def upgrade(
    classic: Group, view: TopicsView, now: Now
) -> tuple[ConsumerGroup, list[CgRecord], ClassicChange] | None:
    """The consumer group a classic group with members becomes, its records, and what becomes of
    the classic group (its offsets only) and of its parked requests; None when a member's
    subscription is malformed."""
    epoch = classic.generation_id
    members: dict[str, ConsumerMember] = {}
    target: dict[str, TopicPartitions] = {}
    names: set[str] = set()
    for m in classic.members.values():
        subscription = parse_subscription(m.protocol_metadata(classic.protocol_name))
        assigned = assignment_partitions(m.assignment)
        if subscription is None or assigned is None:
            return None
        partitions = _by_id(assigned, view)
        names.update(subscription.topics)
        members[m.member_id] = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(subscription.topics)),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=epoch,
            previous_member_epoch=epoch,
            state=MemberState.STABLE,
            assigned=partitions,
            session_deadline_ms=now.monotonic_ms + m.session_timeout_ms,
            classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
        )
        target[m.member_id] = partitions
    topics: dict[str, TopicInfo] = {}
    for name in sorted(names):
        info = view.topic(name)
        if info is not None:
            topics[name] = info
    group = ConsumerGroup(
        classic.group_id,
        group_epoch=epoch,
        assignment_epoch=epoch,
        metadata_hash=consumer_group.topics_metadata_hash(topics.values()),
        members=members,
        static_members={m.instance_id: m.member_id for m in members.values() if m.instance_id is not None},
        target=target,
        topics=topics,
    )
    gid = classic.group_id
    records: list[CgRecord] = [ClassicGroupRecord(gid, None)]
    records.extend(MemberMetadataRecord(gid, m.member_id, m) for m in members.values())
    records.append(GroupEpochRecord(gid, epoch, group.metadata_hash))
    records.extend(TargetMemberRecord(gid, member_id, p) for member_id, p in target.items())
    records.append(TargetEpochRecord(gid, epoch, now.wall_ms))
    records.extend(CurrentAssignmentRecord(gid, m.member_id, m) for m in members.values())
    replies: list[tuple[int, object]] = []
    for m in classic.members.values():
        if m.join_ticket is not None:
            replies.append((m.join_ticket, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id)))
        if m.sync_ticket is not None:
            replies.append((m.sync_ticket, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
    left = Group(gid, offsets=classic.offsets) if classic.offsets else None
    return group, records, ClassicChange(left, tuple(replies))


def heartbeat_upgrading(
    group: ConsumerGroup | None,
    classic: Group | None,
    args: consumer_group.HeartbeatArgs,
    new_member_id: str,
    view: TopicsView,
    now: Now,
    config: GroupConfig,
) -> Decision:
    """A ConsumerGroupHeartbeat, converting the classic group of the same id first when it has
    members and may be upgraded (else it is refused GROUP_ID_NOT_FOUND)."""
    joining = args.member_epoch == 0
    if classic is None or not classic.members or not joining or group is not None:
        members = classic is not None and bool(classic.members)
        return consumer_group.heartbeat(group, args, members, new_member_id, view, now, config)
    if not can_upgrade(classic, config):
        message = f"Group {args.group_id} is not a consumer group"
        return Decision(None, consumer_group.HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, message))
    converted = upgrade(classic, view, now)
    if converted is None:
        message = (
            f"Cannot upgrade the classic group {args.group_id} to consumer group because the embedded "
            "consumer protocol is malformed."
        )
        return Decision(None, consumer_group.HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, message))
    upgraded, records, change = converted
    decision = consumer_group.heartbeat(upgraded, args, False, new_member_id, view, now, config)
    result = decision.reply
    if not isinstance(result, consumer_group.HeartbeatResult) or result.error_code != ErrorCode.NONE:
        return Decision(None, result)  # refused: the classic group stays as it was
    return Decision(decision.group, result, (*records, *decision.records), change)


# ---------------------------------------------------------------------------------------------
# classic members of a consumer group


class _Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _supported(group: ConsumerGroup, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
    """Kafka's supportsClassicProtocols: a protocol every classic member supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    classic_members = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(p.name == q.name for q in c.protocols) for c in classic_members) for p in protocols)


def classic_join(
    group: ConsumerGroup, args: JoinArgs, new_member_id: str, view: TopicsView, now: Now, config: GroupConfig
) -> Decision:
    """A JoinGroup to a consumer group with members (see the module)."""
    member_id = args.member_id or new_member_id
    if member_id not in group.members and len(group.members) >= config.consumer_max_size:
        return Decision(group, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, args.member_id))
    if not _supported(group, args.protocol_type, args.protocols):
        return Decision(group, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, args.member_id))
    if not args.member_id and args.require_known_member_id:
        return Decision(group, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
    subscription = parse_subscription(args.protocols[0].metadata)
    if subscription is None:  # Kafka fails it with an IllegalStateException
        return Decision(group, JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR, args.member_id))
    records: list[CgRecord] = []
    static_id = group.static_members.get(args.group_instance_id) if args.group_instance_id else None
    if static_id is not None and static_id != member_id:
        if args.member_id:
            return Decision(group, JoinResult(ErrorCode.FENCED_INSTANCE_ID, args.member_id))
        # a static member joining again under a new member id takes over the assignment of its
        # instance id's member (Kafka's replaceStaticMember): no rebalance
        group = _replace_static(group, static_id, member_id, records)
    existing = group.members.get(member_id)
    if existing is not None and existing.classic is None and not records:
        return Decision(group, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, args.member_id))
    member = existing or ConsumerMember(member_id)
    updated = replace(
        member,
        instance_id=args.group_instance_id if args.group_instance_id is not None else member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        server_assignor=None,
        subscribed_topic_names=tuple(sorted(subscription.topics)),
        client_id=args.client_id,
        client_host=args.client_host,
        classic=ClassicMemberMetadata(args.session_timeout_ms, args.protocols),
    )
    bump = existing is None or updated.subscribed_topic_names != member.subscribed_topic_names
    if existing is None or updated.metadata() != member.metadata():
        records.append(MemberMetadataRecord(group.group_id, member_id, updated))
    statics = dict(group.static_members)
    if updated.instance_id is not None:
        statics[updated.instance_id] = member_id
    group = replace(group, members={**group.members, member_id: updated}, static_members=statics)
    version = view.version
    if bump or version is None or version != group.metadata_version:
        group, _ = consumer_group._refresh_metadata(group, view, now, records, bump)
        group = replace(group, metadata_version=version)
    if group.group_epoch > group.assignment_epoch:
        group = consumer_group._compute_target(group, now, config, records)
    before = group.members[member_id]
    reconciled = before
    if not before.is_reconciled_to(group.assignment_epoch):
        target = group.target.get(member_id, {})
        owned = _by_id(subscription.owned, view)
        try:
            reconciled = consumer_group.reconcile(
                before, group.assignment_epoch, target, owned, group.partition_owners()
            )
        except consumer_group._Refused:  # an unknown state: start over with nothing owned
            reconciled = consumer_group.reconcile(
                replace(before, state=MemberState.STABLE), group.assignment_epoch, target, {}, {}
            )
    if reconciled.assignment_state() != before.assignment_state():
        records.append(CurrentAssignmentRecord(group.group_id, member_id, reconciled))
    deadline = (
        now.monotonic_ms + max(reconciled.rebalance_timeout_ms, 0)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS
        else None
    )
    reconciled = replace(
        reconciled,
        revocation_deadline_ms=deadline,
        session_deadline_ms=now.monotonic_ms + args.session_timeout_ms,
        classic_deadline_ms=now.monotonic_ms + max(args.rebalance_timeout_ms, 0),  # until its SyncGroup
    )
    group = replace(group, members={**group.members, member_id: reconciled})
    result = JoinResult(
        ErrorCode.NONE,
        member_id,
        reconciled.member_epoch,
        CONSUMER_PROTOCOL_TYPE,
        args.protocols[0].name,
        leader="",
    )
    return Decision(group, result, tuple(records))


def _replace_static(group: ConsumerGroup, old_id: str, new_id: str, records: list[CgRecord]) -> ConsumerGroup:
    """The member `old_id` (a static member) replaced by `new_id` with its epoch, assignment and
    target; the old member's records tombstoned, the new one's written."""
    old = group.members[old_id]
    successor = replace(old, member_id=new_id)
    target = group.target.get(old_id, {})
    group = consumer_group._without_member(group, old_id, records)
    records.append(MemberMetadataRecord(group.group_id, new_id, successor))
    records.append(TargetMemberRecord(group.group_id, new_id, target))
    records.append(CurrentAssignmentRecord(group.group_id, new_id, successor))
    assert old.instance_id is not None
    return replace(
        group,
        members={**group.members, new_id: successor},
        static_members={**group.static_members, old.instance_id: new_id},
        target={**group.target, new_id: target},
    )


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is not None:
        found_id = group.static_members.get(instance_id)
        if found_id is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
        if found_id != member_id:
            raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
    return member


def _refreshed(
    group: ConsumerGroup, member: ConsumerMember, now: Now, rejoin: bool = False, synced: bool = False
) -> ConsumerGroup:
    """The member's session renewed; told to rejoin, it has its rebalance timeout to do so (a join
    timeout, kept if already running); synced, its sync timeout ends."""
    assert member.classic is not None
    deadline = member.classic_deadline_ms
    if synced:
        deadline = None
    if rejoin and deadline is None:
        deadline = now.monotonic_ms + max(member.rebalance_timeout_ms, 0)
    fresh = replace(
        member,
        session_deadline_ms=now.monotonic_ms + member.classic.session_timeout_ms,
        classic_deadline_ms=deadline,
    )
    return replace(group, members={**group.members, member.member_id: fresh})


def classic_sync(group: ConsumerGroup, args: SyncArgs, now: Now) -> Decision:
    """A SyncGroup of a classic member of a consumer group: its assignment."""
    try:
        member = _classic_member(group, args.member_id, args.group_instance_id)
        assert member.classic is not None
        if args.generation_id != member.member_epoch:
            raise _Refused(ErrorCode.ILLEGAL_GENERATION)
        protocol = member.classic.protocols[0]
        if (args.protocol_type is not None and args.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            args.protocol_name is not None and args.protocol_name != protocol.name
        ):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return Decision(
                _refreshed(group, member, now, rejoin=True), SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            )
    except _Refused as refused:
        return Decision(group, SyncResult(refused.code))
    subscription = parse_subscription(protocol.metadata)
    version = subscription.version if subscription is not None else 0
    assignment = serialize_assignment(_by_name(member.assigned, group.topic_names()), version)
    result = SyncResult(ErrorCode.NONE, assignment, CONSUMER_PROTOCOL_TYPE, protocol.name)
    return Decision(_refreshed(group, member, now, synced=True), result)


def classic_heartbeat(group: ConsumerGroup, args: ClassicHeartbeatArgs, now: Now) -> Decision:
    """A Heartbeat of a classic member of a consumer group (see the module)."""
    try:
        member = _classic_member(group, args.member_id, args.group_instance_id)
        if args.generation_id != member.member_epoch:
            raise _Refused(ErrorCode.ILLEGAL_GENERATION)
    except _Refused as refused:
        return Decision(group, refused.code)
    rejoin = (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waits_on_unreleased(group, member))
    )
    code = ErrorCode.REBALANCE_IN_PROGRESS if rejoin else ErrorCode.NONE
    return Decision(_refreshed(group, member, now, rejoin=rejoin), code)


def _waits_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a target partition not yet assigned to the member is
    still held by another member."""
    owners = group.partition_owners()
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        for p in partitions - member.assigned.get(topic_id, frozenset()):
            if owners.get((topic_id, p), member.member_id) != member.member_id:
                return True
    return False


def classic_leave(
    group: ConsumerGroup, leaving: tuple[LeavingMember, ...], view: TopicsView, now: Now
) -> Decision:
    """A LeaveGroup to a consumer group: each classic member named leaves; one group epoch bump."""
    answers: list[tuple[LeavingMember, int]] = []
    records: list[CgRecord] = []
    removed = False
    for who in leaving:
        member_id = who.member_id
        try:
            if who.group_instance_id is not None:
                found = group.static_members.get(who.group_instance_id)
                if found is None:
                    raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
                if member_id and found != member_id:
                    raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
                member_id = found
            member = group.members.get(member_id)
            if member is None or member.classic is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
        except _Refused as refused:
            answers.append((who, refused.code))
            continue
        group = consumer_group._without_member(group, member_id, records)
        removed = True
        answers.append((who, ErrorCode.NONE))
    if removed:
        group, _ = consumer_group._refresh_metadata(group, view, now, records, bump=True, reuse_regexes=True)
    return Decision(group, LeaveResult(ErrorCode.NONE, tuple(answers)), tuple(records))


def has_classic_state(group: ConsumerGroup | None) -> bool:
    """A consumer group with members takes the classic requests of its id."""
    return group is not None and bool(group.members)


# ---------------------------------------------------------------------------------------------
# downgrade


def maybe_downgrade(
    before: ConsumerGroup | None, decision: Decision, classic: Group | None, now: Now, config: GroupConfig
) -> Decision:
    """After a decision that removed members (a consumer-protocol member left or was fenced): when
    only classic members remain and the policy allows it (`bidirectional`, `downgrade`; at most
    group.max.size members), the group becomes a classic group again (Kafka's convertToClassicGroup):
    generation = the group epoch, each member with its classic protocols and its target assignment,
    the protocol every member supports, the first member its leader; then a rebalance is prepared so
    the members rejoin. Records: the consumer group's tombstones, then the classic GroupMetadata."""
    after = decision.group
    if before is None or after is None or not after.members or len(after.members) >= len(before.members):
        return decision
    if any(m.classic is None for m in after.members.values()):
        return decision
    if not config.downgrade_enabled or len(after.members) > config.max_size:
        return decision
    names = after.topic_names()
    members: dict[str, Member] = {}
    for m in after.members.values():
        assert m.classic is not None
        subscription = parse_subscription(m.classic.protocols[0].metadata) if m.classic.protocols else None
        version = subscription.version if subscription is not None else 0
        target = after.target.get(m.member_id, {})
        members[m.member_id] = Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic.session_timeout_ms,
            CONSUMER_PROTOCOL_TYPE,
            m.classic.protocols,
            assignment=serialize_assignment(_by_name(target, names), version),
            session_deadline_ms=now.monotonic_ms + m.classic.session_timeout_ms,
        )
    stable = Group(
        after.group_id,
        state=GroupState.STABLE,
        state_timestamp_ms=now.wall_ms,
        generation_id=after.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        leader_id=next(iter(members)),
        members=members,
        static_members={m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id},
        offsets=classic.offsets if classic is not None else {},
    )
    stable = replace(stable, protocol_name=classic_state._select_protocol(stable))
    if stable.protocol_name is None:
        return decision
    gid = after.group_id
    records: list[CgRecord] = list(decision.records)
    for member_id in after.members:
        records.append(CurrentAssignmentRecord(gid, member_id, None))
        records.append(TargetMemberRecord(gid, member_id, None))
        records.append(MemberMetadataRecord(gid, member_id, None))
    records.extend(RegexRecord(gid, regex, None) for regex in after.regexes)
    records.append(TargetEpochRecord(gid, None))
    records.append(GroupEpochRecord(gid, None))
    records.append(ClassicGroupRecord(gid, stable))
    # a stable group's rebalance answers nothing parked (there is nothing parked)
    rebalancing = classic_state._prepare_rebalance(stable, now, config, classic_state._Out())
    return Decision(None, decision.reply, tuple(records), ClassicChange(rebalancing))
