"""Share groups (KIP-932): their membership as immutable values and the pure decisions of
ShareGroupHeartbeat, of the session timers and of ShareGroupDescribe.

Owns `ShareGroup` / `ShareMember`, `ShareGroupState` (Empty, Stable, Dead) and the records a
decision writes (`SgRecord`: typed values of the ShareGroup* records, encoded by
share_group_records.py).

The protocol (Kafka 4's GroupMetadataManager for share groups):
- A member joins with member epoch 0 and the member id it generated (v1), heartbeats with its
  current epoch and leaves with -1. Kafka's checks: an empty group id, an empty member id (epoch
  > 0 or -1), a first heartbeat without subscribed topics and an epoch below -1 are
  INVALID_REQUEST; an unknown member UNKNOWN_MEMBER_ID; an epoch other than the member's (or
  its previous one) FENCED_MEMBER_EPOCH; a new member of a full group (group.share.max.size)
  GROUP_MAX_SIZE_REACHED; a group id held by a classic or consumer group GROUP_ID_NOT_FOUND
  ("Group X is not a share group.").
- The group epoch is bumped when a member joins, leaves or changes its subscription, and when the
  subscribed topics' metadata changes (`metadata_hash`: names, ids, partition counts).
- When the group epoch is ahead of the assignment epoch, the target assignment of every member is
  computed by the `simple` assignor (share_assignor.py) at the group epoch.
- No revocation phase: a member moves to the target at its next heartbeat (partitions are shared,
  so nothing waits for another member to release them); its epoch becomes the assignment epoch.
  The answer carries the assignment when the member joined or its assignment changed.
- Timers: each heartbeat sets the member's session deadline (group.share.session.timeout.ms, or
  the group's own share.session.timeout.ms; its share.heartbeat.interval.ms likewise);
  one passing fences the member (removed, group epoch bumped).

Invariants: values are never mutated; deadlines are monotonic ms, never written; a decision's
records are exactly the difference between the group before and after.
Callers: the coordinator shard (decisions), share_group_records.py (values), GroupCoordinator, tests.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from odradek.coordinator.consumer_group import TopicInfo, TopicsView, frozen_partitions, topics_metadata_hash
from odradek.coordinator.group import Now
from odradek.coordinator.share_assignor import assign_simple
from odradek.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
ASSIGNOR_NAME = "simple"
TopicPartitions = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The coordinator's share group settings (group.share.*)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200


def with_group_configs(settings: ShareSettings, configs: Mapping[str, str]) -> ShareSettings:
    """The settings with a group's own share.session.timeout.ms and share.heartbeat.interval.ms."""
    session = configs.get("share.session.timeout.ms")
    heartbeat = configs.get("share.heartbeat.interval.ms")
    return replace(
        settings,
        session_timeout_ms=int(session) if session is not None else settings.session_timeout_ms,
        heartbeat_interval_ms=int(heartbeat) if heartbeat is not None else settings.heartbeat_interval_ms,
    )


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: TopicPartitions = field(default_factory=dict)
    session_deadline_ms: int = 0

    def metadata(self) -> tuple[object, ...]:
        """What ShareGroupMemberMetadata holds: a change is written."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)


@dataclass(frozen=True, slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: Mapping[str, ShareMember] = field(default_factory=dict)
    target: Mapping[str, TopicPartitions] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)  # subscribed topics, last heartbeat
    metadata_version: int | None = None  # the TopicsView version `topics` was read at (not stored)
    # the share-partitions ever assigned (Kafka's initialized topics): topic id -> (name, partitions)
    initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def next_deadline_ms(self) -> int | None:
        return min((m.session_deadline_ms for m in self.members.values()), default=None)

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: t.name for t in self.topics.values()}

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(n for m in self.members.values() for n in m.subscribed_topic_names)


# -- records (share_group_records.py gives their bytes); None is a tombstone -----------------------


@dataclass(frozen=True, slots=True)
class GroupEpochRecord:
    group_id: str
    epoch: int | None
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:
    group_id: str
    member_id: str
    member: ShareMember | None


@dataclass(frozen=True, slots=True)
class TargetMemberRecord:
    group_id: str
    member_id: str
    partitions: TopicPartitions | None


@dataclass(frozen=True, slots=True)
class TargetEpochRecord:
    group_id: str
    epoch: int | None
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:
    group_id: str
    member_id: str
    member: ShareMember | None


@dataclass(frozen=True, slots=True)
class StatePartitionsRecord:
    """ShareGroupStatePartitionMetadata: the share-partitions the group has state for (None: deleted)."""

    group_id: str
    initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]] | None


SgRecord = (
    GroupEpochRecord
    | MemberMetadataRecord
    | TargetMemberRecord
    | TargetEpochRecord
    | CurrentAssignmentRecord
    | StatePartitionsRecord
)


# -- ShareGroupHeartbeat ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatArgs:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    group: ShareGroup | None
    reply: object = None
    records: tuple[SgRecord, ...] = ()
    fenced: tuple[str, ...] = ()  # members removed by a timer


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate(args: HeartbeatArgs) -> HeartbeatResult | None:
    """Kafka's checks of a ShareGroupHeartbeat request before it reaches the group."""
    message = None
    if not args.group_id:
        message = "GroupId can't be empty."
    elif args.rack_id is not None and not args.rack_id.strip():
        message = "RackId can't be empty."
    elif args.member_epoch > 0 or args.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not args.member_id.strip():
            message = "MemberId can't be empty."
    elif args.member_epoch == 0:
        if not args.member_id.strip():
            message = "MemberId can't be empty."
        elif not args.subscribed_topic_names:
            message = "SubscribedTopicNames must be set in first request."
    else:
        message = "MemberEpoch is invalid."
    return HeartbeatResult(ErrorCode.INVALID_REQUEST, message) if message is not None else None


def heartbeat(
    group: ShareGroup | None,
    args: HeartbeatArgs,
    other_kind: bool,
    view: TopicsView,
    now: Now,
    settings: ShareSettings,
) -> Decision:
    """One ShareGroupHeartbeat (`other_kind`: a classic or consumer group holds the id)."""
    try:
        if other_kind:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {args.group_id} is not a share group.")
        if args.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return _leave(group, args, view, now)
        return _heartbeat(group, args, view, now, settings)
    except _Refused as refused:
        return Decision(group, HeartbeatResult(refused.code, refused.message))


def _heartbeat(
    group: ShareGroup | None, args: HeartbeatArgs, view: TopicsView, now: Now, settings: ShareSettings
) -> Decision:
    if group is None:
        if args.member_epoch != 0:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {args.group_id} not found.")
        group = ShareGroup(args.group_id)
    member = group.members.get(args.member_id)
    if member is None:
        if args.member_epoch != 0:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {args.member_id} is not a member of group {args.group_id}.",
            )
        if len(group.members) >= settings.max_size:
            raise _Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {settings.max_size} members.",
            )
        member = ShareMember(args.member_id)
    elif args.member_epoch != 0:
        _check_epoch(member, args.member_epoch)
    records: list[SgRecord] = []
    updated = replace(
        member,
        rack_id=args.rack_id if args.rack_id is not None else member.rack_id,
        subscribed_topic_names=(
            tuple(args.subscribed_topic_names)
            if args.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        client_id=args.client_id,
        client_host=args.client_host,
        session_deadline_ms=now.monotonic_ms + settings.session_timeout_ms,
    )
    joined = args.member_id not in group.members
    subscription_changed = joined or updated.subscribed_topic_names != member.subscribed_topic_names
    if joined or updated.metadata() != member.metadata():
        records.append(MemberMetadataRecord(group.group_id, updated.member_id, updated))
    group = replace(group, members={**group.members, updated.member_id: updated})
    if subscription_changed or group.metadata_version is None or group.metadata_version != view.version:
        group = _refresh_metadata(group, view, records, subscription_changed)
    if group.group_epoch > group.assignment_epoch:
        group = _compute_target(group, now, records)
    before = group.members[updated.member_id]
    reconciled = _reconcile(group, before, records)
    group = replace(group, members={**group.members, reconciled.member_id: reconciled})
    changed = frozen_partitions(reconciled.assigned) != frozen_partitions(member.assigned) or joined
    reply = HeartbeatResult(
        ErrorCode.NONE,
        None,
        reconciled.member_id,
        reconciled.member_epoch,
        settings.heartbeat_interval_ms,
        reconciled.assigned if args.member_epoch == 0 or changed else None,
    )
    return Decision(group, reply, tuple(records))


def _check_epoch(member: ShareMember, epoch: int) -> None:
    if epoch > member.member_epoch:
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
            "rejoin.",
        )
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
            "rejoin.",
        )


def _leave(group: ShareGroup | None, args: HeartbeatArgs, view: TopicsView, now: Now) -> Decision:
    if group is None or args.member_id not in group.members:
        if group is None:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {args.group_id} not found.")
        raise _Refused(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {args.member_id} is not a member of group {args.group_id}."
        )
    records: list[SgRecord] = []
    group = _without_member(group, args.member_id, view, records)
    reply = HeartbeatResult(ErrorCode.NONE, None, args.member_id, LEAVE_GROUP_MEMBER_EPOCH, 0)
    return Decision(group, reply, tuple(records))


def _without_member(
    group: ShareGroup, member_id: str, view: TopicsView, records: list[SgRecord]
) -> ShareGroup:
    """The member removed (its records deleted, Kafka's order) and the group epoch bumped."""
    records.append(CurrentAssignmentRecord(group.group_id, member_id, None))
    records.append(TargetMemberRecord(group.group_id, member_id, None))
    records.append(MemberMetadataRecord(group.group_id, member_id, None))
    members = {m: v for m, v in group.members.items() if m != member_id}
    target = {m: v for m, v in group.target.items() if m != member_id}
    group = replace(group, members=members, target=target)
    return _refresh_metadata(group, view, records, True)


def _refresh_metadata(group: ShareGroup, view: TopicsView, records: list[SgRecord], bump: bool) -> ShareGroup:
    topics: dict[str, TopicInfo] = {}
    for name in sorted(group.subscribed_topic_names()):
        info = view.topic(name)
        if info is not None:
            topics[name] = info
    metadata_hash = topics_metadata_hash(topics.values())
    bump = bump or metadata_hash != group.metadata_hash
    group = replace(group, topics=topics, metadata_hash=metadata_hash, metadata_version=view.version)
    if bump:
        group = replace(group, group_epoch=group.group_epoch + 1)
        records.append(GroupEpochRecord(group.group_id, group.group_epoch, metadata_hash))
    return group


def _compute_target(group: ShareGroup, now: Now, records: list[SgRecord]) -> ShareGroup:
    subscriptions = {
        m.member_id: frozenset(
            group.topics[n].topic_id for n in m.subscribed_topic_names if n in group.topics
        )
        for m in group.members.values()
    }
    counts = {t.topic_id: t.partitions for t in group.topics.values()}
    target = assign_simple(subscriptions, counts, group.target)
    for member_id, partitions in target.items():
        if (
            frozen_partitions(partitions) != frozen_partitions(group.target.get(member_id, {}))
            or member_id not in group.target
        ):
            records.append(TargetMemberRecord(group.group_id, member_id, partitions))
    records.append(TargetEpochRecord(group.group_id, group.group_epoch, now.wall_ms))
    names = {t.topic_id: t.name for t in group.topics.values()}
    assigned = [(t, p) for partitions in target.values() for t, ps in partitions.items() for p in ps]
    group = with_initialized(group, names, assigned, records)
    return replace(group, target=target, assignment_epoch=group.group_epoch)


def with_initialized(
    group: ShareGroup,
    names: Mapping[uuid.UUID, str],
    partitions: Iterable[tuple[uuid.UUID, int]],
    records: list[SgRecord],
) -> ShareGroup:
    """The group with `partitions` among its initialized share-partitions (written when that grew)."""
    grown: dict[uuid.UUID, set[int]] = {t: set(ps) for t, (_, ps) in group.initialized.items()}
    for topic_id, partition in partitions:
        grown.setdefault(topic_id, set()).add(partition)
    initialized = {
        t: (names.get(t, group.initialized.get(t, ("", frozenset()))[0]), frozenset(ps))
        for t, ps in grown.items()
    }
    if initialized == dict(group.initialized):
        return group
    records.append(StatePartitionsRecord(group.group_id, initialized))
    return replace(group, initialized=initialized)


def forget_topics(group_id: str, group: ShareGroup | None, topic_ids: Iterable[uuid.UUID]) -> Decision:
    """DeleteShareGroupOffsets: the topics leave the group's initialized share-partitions."""
    if group is None:
        return Decision(None, ErrorCode.NONE)
    forgotten = set(topic_ids)
    kept = {t: v for t, v in group.initialized.items() if t not in forgotten}
    if kept == dict(group.initialized):
        return Decision(group, ErrorCode.NONE)
    return Decision(
        replace(group, initialized=kept), ErrorCode.NONE, (StatePartitionsRecord(group_id, kept),)
    )


def add_initialized(
    group_id: str,
    group: ShareGroup | None,
    names: Mapping[uuid.UUID, str],
    partitions: Iterable[tuple[uuid.UUID, int]],
) -> Decision:
    """AlterShareGroupOffsets: the altered share-partitions join the group's initialized ones."""
    if group is None:
        return Decision(None, ErrorCode.NONE)
    records: list[SgRecord] = []
    return Decision(with_initialized(group, names, partitions, records), ErrorCode.NONE, tuple(records))


def _reconcile(group: ShareGroup, member: ShareMember, records: list[SgRecord]) -> ShareMember:
    """The member moved to its target at the assignment epoch (no revocation phase)."""
    if member.member_epoch == group.assignment_epoch and member.member_epoch != 0:
        return member
    updated = replace(
        member,
        member_epoch=group.assignment_epoch,
        previous_member_epoch=member.member_epoch,
        assigned=dict(group.target.get(member.member_id, {})),
    )
    records.append(CurrentAssignmentRecord(group.group_id, member.member_id, updated))
    return updated


# -- timers, loading, deletion ----------------------------------------------------------------------


def advance(group: ShareGroup, view: TopicsView, now: Now) -> Decision:
    """Members whose session expired are fenced (removed, the group epoch bumped)."""
    records: list[SgRecord] = []
    fenced = []
    for member in sorted(group.members.values(), key=lambda m: m.member_id):
        if member.session_deadline_ms <= now.monotonic_ms:
            group = _without_member(group, member.member_id, view, records)
            fenced.append(member.member_id)
    return Decision(group, None, tuple(records), tuple(fenced))


def with_fresh_sessions(group: ShareGroup, now: Now, settings: ShareSettings) -> ShareGroup:
    """A loaded group: every member gets a full session from now (deadlines are not written)."""
    deadline = now.monotonic_ms + settings.session_timeout_ms
    members = {m: replace(v, session_deadline_ms=deadline) for m, v in group.members.items()}
    return replace(group, members=members)


def delete(group_id: str, group: ShareGroup | None) -> Decision:
    """DeleteGroups of a share group: only an empty one (NON_EMPTY_GROUP otherwise)."""
    if group is None:
        return Decision(None, ErrorCode.GROUP_ID_NOT_FOUND)
    if group.members:
        return Decision(group, ErrorCode.NON_EMPTY_GROUP)
    records: list[SgRecord] = [TargetMemberRecord(group_id, m, None) for m in group.target]
    records.append(StatePartitionsRecord(group_id, None))
    records.append(TargetEpochRecord(group_id, None))
    records.append(GroupEpochRecord(group_id, None))
    return Decision(None, ErrorCode.NONE, tuple(records))


def admin_check(
    group_id: str, group: ShareGroup | None, other_kind: bool, empty: bool
) -> tuple[int, str | None]:
    """The group-level answer of the share group offsets APIs (Describe/Alter/DeleteShareGroupOffsets):
    GROUP_ID_NOT_FOUND for an unknown or another kind of group, NON_EMPTY_GROUP when `empty` is
    required and members remain."""
    if group is None:
        if other_kind:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if empty and group.members:
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
    return ErrorCode.NONE, None


# -- ShareGroupDescribe -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: int
    error_message: str | None
    group_id: str
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ShareMember, ...] = ()
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=dict)


def describe(group_id: str, group: ShareGroup | None, other_kind: bool) -> GroupDescription:
    """ShareGroupDescribe of one group: GROUP_ID_NOT_FOUND for an unknown or another kind of group."""
    if group is None:
        message = f"Group {group_id} is not a share group." if other_kind else f"Group {group_id} not found."
        return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, message, group_id)
    return GroupDescription(
        ErrorCode.NONE,
        None,
        group_id,
        group.state.value,
        group.group_epoch,
        group.assignment_epoch,
        ASSIGNOR_NAME,
        tuple(group.members.values()),
        group.topic_names(),
    )
