"""Consumer-protocol groups (KIP-848): their state as immutable values and the pure decisions of
ConsumerGroupHeartbeat, of the member timers and of ConsumerGroupDescribe.

Owns `ConsumerGroup` / `ConsumerMember`, `MemberState` (Kafka's STABLE, UNREVOKED_PARTITIONS,
UNRELEASED_PARTITIONS, UNKNOWN, with their record bytes) and `ConsumerGroupState` (Empty,
Assigning, Reconciling, Stable, Dead), and the records a decision writes (`CgRecord`: the typed
values of the ConsumerGroup* records, encoded by consumer_records.py).

The protocol (Kafka 4's GroupMetadataManager and CurrentAssignmentBuilder):
- A member joins with member epoch 0 (v1: with the member id it generated; v0: the coordinator gives
  one), heartbeats with its current epoch, leaves with -1; a static member (instance id) leaves
  temporarily with -2 and its successor with the same instance id takes over its assignment.
- The group epoch is bumped whenever a member joins, leaves or changes its subscription, and when the
  metadata of the subscribed topics changes (a topic created, deleted or grown: `metadata_hash`, the
  subscribed topics' names, ids and partition counts as `TopicsView` shows them at the heartbeat;
  regex subscriptions are resolved against every topic name with `re.fullmatch`).
- When the group epoch is ahead of the assignment epoch, a heartbeat computes the target assignment of
  every member with the group's assignor (the one most members ask for, else the first of
  group.consumer.assignors; assignors.py) at the group epoch.
- Each member reconciles toward its target on its own heartbeats: partitions it must give up are
  revoked first (UNREVOKED_PARTITIONS, epoch unchanged) until its heartbeat's owned partitions no
  longer hold them; partitions still owned by another member (assigned to it or pending revocation)
  are withheld (UNRELEASED_PARTITIONS) until released; the member epoch moves to the target epoch
  once nothing is left to revoke.
- A heartbeat with a member epoch newer than the coordinator's, or older than it except the previous
  epoch with owned partitions within the assignment (a lost response), is FENCED_MEMBER_EPOCH.
- Timers: each heartbeat sets the member's session deadline (group.consumer.session.timeout.ms);
  entering UNREVOKED_PARTITIONS sets a revocation deadline (the member's rebalance timeout). Either
  one passing fences the member: it is removed and the group epoch bumped.
- A heartbeat looks at the topics again only when the metadata's version moved (or the subscriptions
  changed), so a steady group's heartbeat costs no topic lookups.
- Empty groups are kept until DeleteGroups or a classic JoinGroup of the same id; their committed
  offsets live in the classic `Group` of the same id, which holds the offsets of both kinds of group.

Deviations: the assignment is computed synchronously in the heartbeat; regexes are resolved at the
heartbeat (through the coordinator's cache, per metadata version) rather than in Kafka's background
refresh; Python's `re` stands in for RE2/J: the constructs RE2/J lacks (lookaround, backreferences,
possessive quantifiers, atomic groups) are refused with INVALID_REGULAR_EXPRESSION as RE2/J would,
but RE2/J's own syntax that `re` lacks (Unicode classes `\\pN`, `\\Q...\\E` quoting, POSIX
classes `[[:alpha:]]` read as a nested set) is refused, or read differently, by `re`. Migration
between classic and consumer groups is migration.py's (members with `classic` metadata are classic
members of the group; `heartbeat` itself refuses a join while `classic_members` is true); an empty
group of either kind gives way to the other, its offsets kept.

Invariants: values are never mutated; deadlines are monotonic milliseconds and never persisted; a
decision's records describe exactly the difference between the group before and after.
Callers: the coordinator shard (decisions), the loader (values), GroupCoordinator, tests.
"""

from __future__ import annotations

import enum
import hashlib
import re
import re._constants as sre_constants  # type: ignore[import-not-found]  # Python 3.11's regex parser
import re._parser as sre_parse  # type: ignore[import-not-found]
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from odradek.coordinator import assignors
from odradek.coordinator.assignors import MemberSubscription, TopicDescription
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.group import Group, Now
from odradek.coordinator.group import Protocol as ClassicProtocol
from odradek.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
# v1 and later: the client generates its member id (KIP-1082)
FIRST_VERSION_WITH_CLIENT_MEMBER_ID = 1

TopicPartitions = Mapping[uuid.UUID, frozenset[int]]
_NO_PARTITIONS: TopicPartitions = {}


class MemberState(enum.IntEnum):
    """A member's reconciliation state; the values are the byte in ConsumerGroupCurrentMemberAssignment."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A subscribed topic as the metadata showed it: id and partition count."""

    name: str
    topic_id: uuid.UUID
    partitions: int


class TopicsView(Protocol):
    """The broker's topics as a decision reads them (a snapshot of the metadata cache). `version`
    changes whenever the topics may have (None: unknown, every heartbeat looks again)."""

    @property
    def version(self) -> int | None: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    def matching(self, regex: str) -> frozenset[str]: ...


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member of a consumer group that speaks the classic protocol (JoinGroup / SyncGroup /
    Heartbeat, after an online upgrade, migration.py): its session timeout and the protocols of its
    last JoinGroup (ConsumerGroupMemberMetadata's ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    classic: ClassicMemberMetadata | None = None  # a classic-protocol member (migration.py)
    # a classic member's join or sync timeout (its rebalance timeout; never persisted)
    classic_deadline_ms: int | None = None

    def metadata(self) -> tuple[object, ...]:
        """What ConsumerGroupMemberMetadata holds: a change is written."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def assignment_state(self) -> tuple[object, ...]:
        """What ConsumerGroupCurrentMemberAssignment holds: a change is written."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            frozen_partitions(self.assigned),
            frozen_partitions(self.pending_revocation),
        )

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass(frozen=True, slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: Mapping[str, ConsumerMember] = field(default_factory=dict)
    static_members: Mapping[str, str] = field(default_factory=dict)  # instance id -> member id
    target: Mapping[str, TopicPartitions] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)  # subscribed topics, last heartbeat
    regexes: Mapping[str, frozenset[str]] = field(default_factory=dict)  # resolved subscriptions
    metadata_version: int | None = None  # the TopicsView version `topics` was computed at (not stored)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Who holds each partition (assigned or pending revocation): Kafka's partition epochs."""
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for member in self.members.values():
            for held in (member.assigned, member.pending_revocation):
                for topic_id, partitions in held.items():
                    for p in partitions:
                        owners[(topic_id, p)] = member.member_id
        return owners

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines.extend(
            m.revocation_deadline_ms for m in self.members.values() if m.revocation_deadline_ms is not None
        )
        deadlines.extend(
            m.classic_deadline_ms for m in self.members.values() if m.classic_deadline_ms is not None
        )
        return min(deadlines, default=None)

    def assignor_name(self, config: GroupConfig) -> str:
        requested = (m.server_assignor for m in self.members.values())
        return assignors.preferred_assignor(config.consumer_assignors, requested).name

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: t.name for t in self.topics.values()}

    def subscribed_topic_names(self) -> frozenset[str]:
        """Every topic name a member subscribes to, by name or through its regex."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names |= self.regexes.get(member.subscribed_topic_regex, frozenset())
        return frozenset(names)


# ---------------------------------------------------------------------------------------------
# records (typed; consumer_records.py gives their bytes). A None value is a tombstone.


@dataclass(frozen=True, slots=True)
class GroupEpochRecord:
    group_id: str
    epoch: int | None  # None: the group is deleted
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:
    group_id: str
    member_id: str
    member: ConsumerMember | None


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
    member: ConsumerMember | None


@dataclass(frozen=True, slots=True)
class RegexRecord:
    group_id: str
    regex: str
    topics: frozenset[str] | None
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class ClassicGroupRecord:
    """The classic GroupMetadata record of the same id, written when a group changes protocol
    (migration.py); None: its tombstone (the classic group's offsets stay)."""

    group_id: str
    group: Group | None


CgRecord = (
    GroupEpochRecord
    | MemberMetadataRecord
    | TargetMemberRecord
    | TargetEpochRecord
    | CurrentAssignmentRecord
    | RegexRecord
    | ClassicGroupRecord
)


# ---------------------------------------------------------------------------------------------
# ConsumerGroupHeartbeat


@dataclass(frozen=True, slots=True)
class HeartbeatArgs:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None  # topic_partitions; None when not sent
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    # the topics, of those given, the member's principal may DESCRIBE (None: all): what a regex
    # subscription resolves to is filtered by it, as Kafka does (KAFKA-18813)
    describable: Callable[[frozenset[str]], frozenset[str]] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The answer; a refused heartbeat carries only its error code and message, as Kafka's."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


@dataclass(frozen=True, slots=True)
class ClassicChange:
    """What a decision does to the classic group of the same id (migration.py): its new value
    and the answers to the classic requests it held (runtime tickets)."""

    group: Group | None
    replies: tuple[tuple[int, object], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    group: ConsumerGroup | None
    reply: object = None
    records: tuple[CgRecord, ...] = ()
    classic: ClassicChange | None = None


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate(args: HeartbeatArgs, config: GroupConfig) -> HeartbeatResult | None:
    """Kafka's checks of a ConsumerGroupHeartbeat request before it reaches the group."""
    try:
        _validate(args, config)
    except _Refused as refused:
        return HeartbeatResult(refused.code, refused.message)
    return None


def _validate(args: HeartbeatArgs, config: GroupConfig) -> None:
    def invalid(message: str) -> _Refused:
        return _Refused(ErrorCode.INVALID_REQUEST, message)

    if not args.group_id:
        raise invalid("GroupId can't be empty.")
    if args.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if args.rack_id == "":
        raise invalid("RackId can't be empty.")
    if args.version >= FIRST_VERSION_WITH_CLIENT_MEMBER_ID and not args.member_id:
        raise invalid("MemberId can't be empty.")
    epoch = args.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not args.member_id:
            raise invalid("MemberId can't be empty.")
    elif epoch == 0:
        if args.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if args.owned is None or args.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if not args.subscribed_topic_names and not args.subscribed_topic_regex:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not args.member_id:
            raise invalid("MemberId can't be empty.")
        if args.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if args.subscribed_topic_regex:
        problem = regex_problem(args.subscribed_topic_regex)
        if problem is not None:
            raise _Refused(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{args.subscribed_topic_regex}` is not a valid regular expression: "
                f"{problem}.",
            )
    if args.server_assignor is not None:
        try:
            assignors.assignor_for(config.consumer_assignors, args.server_assignor)
        except assignors.UnsupportedAssignorError:
            supported = ", ".join(a.name for a in assignors.configured_assignors(config.consumer_assignors))
            raise _Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {args.server_assignor} is not supported. Supported assignors: {supported}.",
            ) from None


# What Python's `re` accepts and RE2/J (Kafka's regex engine) does not: lookaround, backreferences,
# possessive quantifiers and atomic groups.
_NOT_RE2 = {
    sre_constants.ASSERT: "lookaround is not supported",
    sre_constants.ASSERT_NOT: "lookaround is not supported",
    sre_constants.GROUPREF: "backreferences are not supported",
    sre_constants.GROUPREF_EXISTS: "conditional groups are not supported",
    sre_constants.POSSESSIVE_REPEAT: "possessive quantifiers are not supported",
    sre_constants.ATOMIC_GROUP: "atomic groups are not supported",
}


def regex_problem(regex: str) -> str | None:
    """Why `regex` is not a valid subscription regex (None: it is): Python's syntax errors, and the
    constructs RE2/J refuses that Python accepts."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning on "[[" and the like
            parsed = sre_parse.parse(regex)
            re.compile(regex)
    except (re.error, RecursionError, OverflowError) as exc:
        return str(exc)
    stack = [parsed]
    while stack:
        for op, value in stack.pop():
            if op in _NOT_RE2:
                return str(_NOT_RE2[op])
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, sre_parse.SubPattern):
                    stack.append(item)
                elif isinstance(item, (list, tuple)):
                    stack.extend(i for i in item if isinstance(i, sre_parse.SubPattern))
    return None


def heartbeat(
    group: ConsumerGroup | None,
    args: HeartbeatArgs,
    classic_members: bool,
    new_member_id: str,
    view: TopicsView,
    now: Now,
    config: GroupConfig,
) -> Decision:
    """One ConsumerGroupHeartbeat (validated by `validate`) over the group's state.
    `classic_members`: a classic group with this id has members; `new_member_id`: the id a v0
    member joining without one gets."""
    try:
        if args.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return _leave(group, args, view, now)
        return _heartbeat(group, args, classic_members, new_member_id, view, now, config)
    except _Refused as refused:
        result = HeartbeatResult(refused.code, refused.message)
        return Decision(group, result)


def _heartbeat(
    group: ConsumerGroup | None,
    args: HeartbeatArgs,
    classic_members: bool,
    new_member_id: str,
    view: TopicsView,
    now: Now,
    config: GroupConfig,
) -> Decision:
    joining = args.member_epoch == 0
    if classic_members:
        raise _Refused(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"Group {args.group_id} is a classic group with members: it cannot be joined with the "
            "consumer protocol.",
        )
    if group is None:
        if not joining:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {args.group_id} not found.")
        group = ConsumerGroup(args.group_id)
    member_id = args.member_id or new_member_id
    if len(group.members) >= config.consumer_max_size and member_id not in group.members:
        raise _Refused(
            ErrorCode.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {config.consumer_max_size} members.",
        )
    records: list[CgRecord] = []
    if args.instance_id is None:
        member = _dynamic_member(group, member_id, args)
    else:
        group, member = _static_member(group, member_id, args, records)

    updated = replace(
        member,
        instance_id=args.instance_id if args.instance_id is not None else member.instance_id,
        rack_id=args.rack_id if args.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            args.rebalance_timeout_ms if args.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=args.server_assignor if args.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(
            tuple(args.subscribed_topic_names)
            if args.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            (args.subscribed_topic_regex or None)
            if args.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=args.client_id,
        client_host=args.client_host,
    )
    is_new = member.member_id not in group.members
    bump = is_new or (
        updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.subscribed_topic_regex != member.subscribed_topic_regex
    )
    if is_new or updated.metadata() != member.metadata():
        records.append(MemberMetadataRecord(group.group_id, updated.member_id, updated))
    members = {**group.members, updated.member_id: updated}
    statics = dict(group.static_members)
    if updated.instance_id is not None:
        statics[updated.instance_id] = updated.member_id
    group = replace(group, members=members, static_members=statics)

    version = view.version
    if bump or version is None or version != group.metadata_version:
        group, _ = _refresh_metadata(group, view, now, records, bump, args.describable)
        group = replace(group, metadata_version=version)
    if group.group_epoch > group.assignment_epoch:
        group = _compute_target(group, now, config, records)

    before = group.members[updated.member_id]
    target = group.target.get(before.member_id, _NO_PARTITIONS)
    reconciled = before
    if not before.is_reconciled_to(group.assignment_epoch):  # who holds what: only when it matters
        reconciled = reconcile(before, group.assignment_epoch, target, args.owned, group.partition_owners())
    if reconciled.assignment_state() != before.assignment_state():
        records.append(CurrentAssignmentRecord(group.group_id, reconciled.member_id, reconciled))
        deadline = (
            now.monotonic_ms + reconciled.rebalance_timeout_ms
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS
            else None
        )
        reconciled = replace(reconciled, revocation_deadline_ms=deadline)
    reconciled = replace(
        reconciled, session_deadline_ms=now.monotonic_ms + config.consumer_session_timeout_ms
    )
    group = replace(group, members={**group.members, reconciled.member_id: reconciled})

    full_request = joining or (
        args.rebalance_timeout_ms != -1
        and (args.subscribed_topic_names is not None or args.subscribed_topic_regex is not None)
        and args.owned is not None
    )
    moved = frozen_partitions(reconciled.assigned) != frozen_partitions(member.assigned)
    send_assignment = full_request or moved
    result = HeartbeatResult(
        ErrorCode.NONE,
        None,
        reconciled.member_id,
        reconciled.member_epoch,
        config.consumer_heartbeat_interval_ms,
        reconciled.assigned if send_assignment else None,
    )
    return Decision(group, result, tuple(records))


def _dynamic_member(group: ConsumerGroup, member_id: str, args: HeartbeatArgs) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        if args.member_epoch != 0:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
        return ConsumerMember(member_id)
    _check_epoch(member, args)
    return member


def _static_member(
    group: ConsumerGroup, member_id: str, args: HeartbeatArgs, records: list[CgRecord]
) -> tuple[ConsumerGroup, ConsumerMember]:
    assert args.instance_id is not None
    existing_id = group.static_members.get(args.instance_id)
    existing = group.members.get(existing_id) if existing_id is not None else None
    if args.member_epoch == 0:
        if existing is None:
            member = group.members.get(member_id)
            if member is not None:
                _check_epoch(member, args)
                return group, member
            return group, ConsumerMember(member_id)
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Refused(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {existing.member_id} with instance id {args.instance_id} is not released "
                "yet.",
            )
        # The new member takes over the departed one's assignment (and target) under its own id.
        successor = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target.get(existing.member_id, _NO_PARTITIONS)
        group = _without_member(group, existing.member_id, records)
        records.append(MemberMetadataRecord(group.group_id, member_id, successor))
        records.append(TargetMemberRecord(group.group_id, member_id, target))
        records.append(CurrentAssignmentRecord(group.group_id, member_id, successor))
        group = replace(
            group,
            members={**group.members, member_id: successor},
            static_members={**group.static_members, args.instance_id: member_id},
            target={**group.target, member_id: target},
        )
        return group, successor
    if existing is None:
        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {args.instance_id} is unknown.")
    if existing.member_id != member_id:
        raise _Refused(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {args.instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    _check_epoch(existing, args)
    return group, existing


def _check_epoch(member: ConsumerMember, args: HeartbeatArgs) -> None:
    received = args.member_epoch
    if received > member.member_epoch:
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
            "rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(args.owned, member.assigned)
    ):
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
            "rejoin.",
        )


def _is_subset(owned: TopicPartitions | None, assigned: TopicPartitions) -> bool:
    if owned is None:
        return True
    return all(partitions <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned.items())


def _leave(group: ConsumerGroup | None, args: HeartbeatArgs, view: TopicsView, now: Now) -> Decision:
    if group is None:
        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {args.group_id} not found.")
    if args.instance_id is None:
        member = group.members.get(args.member_id)
        if member is None:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {args.member_id} is not a member of group {group.group_id}.",
            )
    else:
        member_id = group.static_members.get(args.instance_id)
        found = group.members.get(member_id) if member_id is not None else None
        if found is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {args.instance_id} is unknown.")
        if found.member_id != args.member_id:
            raise _Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {args.member_id} with instance id {args.instance_id} was fenced by member "
                f"{found.member_id}.",
            )
        member = found
        if args.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = replace(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                pending_revocation={},
                revocation_deadline_ms=None,
            )
            group = replace(group, members={**group.members, member.member_id: leaving})
            result = HeartbeatResult(ErrorCode.NONE, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            return Decision(
                group, result, (CurrentAssignmentRecord(group.group_id, member.member_id, leaving),)
            )
    records: list[CgRecord] = []
    group = fence_member(group, member.member_id, view, now, records)
    result = HeartbeatResult(ErrorCode.NONE, None, args.member_id, args.member_epoch)
    return Decision(group, result, tuple(records))


def fence_member(
    group: ConsumerGroup, member_id: str, view: TopicsView, now: Now, records: list[CgRecord]
) -> ConsumerGroup:
    """Remove the member (left, or its session or revocation timed out) and bump the group epoch;
    the target assignment is recomputed by the next heartbeat."""
    group = _without_member(group, member_id, records)
    group, _ = _refresh_metadata(group, view, now, records, bump=True, reuse_regexes=True)
    return group


def _without_member(group: ConsumerGroup, member_id: str, records: list[CgRecord]) -> ConsumerGroup:
    member = group.members[member_id]
    records.append(CurrentAssignmentRecord(group.group_id, member_id, None))
    records.append(TargetMemberRecord(group.group_id, member_id, None))
    records.append(MemberMetadataRecord(group.group_id, member_id, None))
    members = {k: v for k, v in group.members.items() if k != member_id}
    statics = {k: v for k, v in group.static_members.items() if v != member_id or k != member.instance_id}
    target = {k: v for k, v in group.target.items() if k != member_id}
    return replace(group, members=members, static_members=statics, target=target)


# ---------------------------------------------------------------------------------------------
# subscriptions, metadata and the target assignment


def _refresh_metadata(
    group: ConsumerGroup,
    view: TopicsView,
    now: Now,
    records: list[CgRecord],
    bump: bool,
    describable: Callable[[frozenset[str]], frozenset[str]] | None = None,
    reuse_regexes: bool = False,
) -> tuple[ConsumerGroup, bool]:
    """Resolve the subscriptions against the metadata; bump the group epoch if asked or if the
    subscribed topics' metadata changed. Regex resolutions that changed are written. A regex
    resolves to the matching topics `describable` lets through (the heartbeating member's
    principal); `reuse_regexes` (a timer, no member asking) keeps the resolutions already made."""
    regexes: dict[str, frozenset[str]] = {}
    names: set[str] = set()
    for member in group.members.values():
        names.update(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex is None or regex in regexes:
            continue
        if reuse_regexes and regex in group.regexes:
            regexes[regex] = group.regexes[regex]
            continue
        matched = view.matching(regex)
        regexes[regex] = describable(matched) if describable is not None and matched else matched
    for regex, matched in regexes.items():
        if group.regexes.get(regex) != matched:
            records.append(RegexRecord(group.group_id, regex, matched, now.wall_ms))
        names.update(matched)
    for regex in group.regexes.keys() - regexes.keys():
        records.append(RegexRecord(group.group_id, regex, None))
    topics: dict[str, TopicInfo] = {}
    for name in sorted(names):
        info = view.topic(name)
        if info is not None:
            topics[name] = info
    metadata_hash = topics_metadata_hash(topics.values())
    bump = bump or metadata_hash != group.metadata_hash
    group = replace(group, topics=topics, regexes=regexes, metadata_hash=metadata_hash)
    if bump:
        group = replace(group, group_epoch=group.group_epoch + 1)
        records.append(GroupEpochRecord(group.group_id, group.group_epoch, metadata_hash))
    return group, bump


def topics_metadata_hash(topics: Iterable[TopicInfo]) -> int:
    """A stable signed 64-bit digest of the subscribed topics (name, id, partition count)."""
    digest = hashlib.blake2b(digest_size=8)
    for t in sorted(topics, key=lambda t: t.name):
        digest.update(f"{t.name}\0{t.topic_id}\0{t.partitions}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


def subscribed_topic_ids(member: ConsumerMember, group: ConsumerGroup) -> frozenset[uuid.UUID]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex is not None:
        names |= group.regexes.get(member.subscribed_topic_regex, frozenset())
    return frozenset(group.topics[n].topic_id for n in names if n in group.topics)


def _compute_target(
    group: ConsumerGroup, now: Now, config: GroupConfig, records: list[CgRecord]
) -> ConsumerGroup:
    assignor = assignors.preferred_assignor(
        config.consumer_assignors, (m.server_assignor for m in group.members.values())
    )
    topic_ids: dict[tuple[tuple[str, ...], str | None], frozenset[uuid.UUID]] = {}  # most members share one
    subscriptions: dict[str, MemberSubscription] = {}
    for m in group.members.values():
        key = (m.subscribed_topic_names, m.subscribed_topic_regex)
        ids = topic_ids.get(key)
        if ids is None:
            ids = topic_ids[key] = subscribed_topic_ids(m, group)
        current = group.target.get(m.member_id, _NO_PARTITIONS)
        subscriptions[m.member_id] = MemberSubscription(m.member_id, m.instance_id, m.rack_id, ids, current)
    topics = {t.topic_id: TopicDescription(t.name, t.partitions) for t in group.topics.values()}
    computed = assignor.assign(subscriptions, topics)
    target: dict[str, TopicPartitions] = {}
    for member_id in group.members:
        partitions = {t: frozenset(p) for t, p in computed.get(member_id, {}).items() if p}
        target[member_id] = partitions
        before = group.target.get(member_id)
        if before is None or frozen_partitions(before) != frozen_partitions(partitions):
            records.append(TargetMemberRecord(group.group_id, member_id, partitions))
    records.append(TargetEpochRecord(group.group_id, group.group_epoch, now.wall_ms))
    return replace(group, target=target, assignment_epoch=group.group_epoch)


# ---------------------------------------------------------------------------------------------
# reconciliation (Kafka's CurrentAssignmentBuilder)


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: TopicPartitions,
    owned: TopicPartitions | None,
    owners: Mapping[tuple[uuid.UUID, int], str],
) -> ConsumerMember:
    """The member's next assignment state toward `target` at `target_epoch`, given the partitions
    it says it owns (None: not said) and who holds each partition."""
    if member.is_reconciled_to(target_epoch):
        return member
    match member.state:
        case MemberState.STABLE | MemberState.UNRELEASED_PARTITIONS:
            return _next_assignment(member, member.member_epoch, target_epoch, target, owned, owners)
        case MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return member
            return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owned, owners)
        case _:
            if owned is None or owned:
                raise _Refused(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    "The consumer group member is in a unknown state. The member must abandon all its "
                    "partitions and rejoin.",
                )
            return _next_assignment(member, target_epoch, target_epoch, target, owned, owners)


def _owns_any(owned: TopicPartitions | None, partitions: TopicPartitions) -> bool:
    if owned is None:
        return True
    return any(owned_parts & partitions.get(t, frozenset()) for t, owned_parts in owned.items())


def _next_assignment(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: TopicPartitions,
    owned: TopicPartitions | None,
    owners: Mapping[tuple[uuid.UUID, int], str],
) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in target.keys() | member.assigned.keys():
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        revoked = current - kept
        pending = wanted - kept
        free = frozenset(
            p for p in pending if owners.get((topic_id, p), member.member_id) == member.member_id
        )
        unreleased = unreleased or free != pending
        if kept:
            assigned[topic_id] = kept
        if revoked:
            revoking[topic_id] = revoked
        if free:
            to_assign[topic_id] = free
    if revoking and _owns_any(owned, revoking):
        return _with_epoch(member, member_epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state, assigned, {})


def _with_epoch(
    member: ConsumerMember,
    epoch: int,
    state: MemberState,
    assigned: TopicPartitions,
    pending_revocation: TopicPartitions,
) -> ConsumerMember:
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return replace(
        member,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending_revocation,
    )


def frozen_partitions(partitions: TopicPartitions) -> frozenset[tuple[uuid.UUID, frozenset[int]]]:
    return frozenset((t, frozenset(p)) for t, p in partitions.items() if p)


# ---------------------------------------------------------------------------------------------
# timers


def advance(group: ConsumerGroup, view: TopicsView, now: Now) -> tuple[Decision, list[str]]:
    """Fence the members whose session, revocation or (classic members) join or sync deadline
    passed; the decision and, for the log, one line per fenced member."""
    records: list[CgRecord] = []
    fenced: list[str] = []
    for member in list(group.members.values()):
        if member.session_deadline_ms <= now.monotonic_ms:
            fenced.append(f"Member {member.member_id} fenced from group {group.group_id}: session timeout")
        elif member.revocation_deadline_ms is not None and member.revocation_deadline_ms <= now.monotonic_ms:
            fenced.append(
                f"Member {member.member_id} fenced from group {group.group_id}: it did not revoke its "
                f"partitions within its rebalance timeout of {member.rebalance_timeout_ms} ms"
            )
        elif member.classic_deadline_ms is not None and member.classic_deadline_ms <= now.monotonic_ms:
            fenced.append(
                f"Member {member.member_id} fenced from group {group.group_id}: the classic member did "
                f"not join or sync within its rebalance timeout of {member.rebalance_timeout_ms} ms"
            )
        else:
            continue
        group = fence_member(group, member.member_id, view, now, records)
    return Decision(group, None, tuple(records)), fenced


def with_fresh_sessions(group: ConsumerGroup, now: Now, config: GroupConfig) -> ConsumerGroup:
    """The group as loaded: each member a full session from `now`; revocations given their time again."""
    members = {
        m.member_id: replace(
            m,
            session_deadline_ms=now.monotonic_ms
            + (m.classic.session_timeout_ms if m.classic is not None else config.consumer_session_timeout_ms),
            revocation_deadline_ms=(
                now.monotonic_ms + max(m.rebalance_timeout_ms, 0)
                if m.state is MemberState.UNREVOKED_PARTITIONS
                else None
            ),
        )
        for m in group.members.values()
    }
    return replace(group, members=members)


# ---------------------------------------------------------------------------------------------
# DeleteGroups


def delete(group_id: str, group: ConsumerGroup | None) -> Decision:
    """DeleteGroups of a consumer-protocol group: only an empty one (NON_EMPTY_GROUP), its records
    tombstoned (its regexes, target assignment metadata, group metadata, as Kafka writes them); the
    reply is the error code. Its offsets are deleted with the classic group that holds them."""
    if group is None:
        return Decision(None, ErrorCode.GROUP_ID_NOT_FOUND)
    if group.members:
        return Decision(group, ErrorCode.NON_EMPTY_GROUP)
    records: list[CgRecord] = [RegexRecord(group_id, regex, None) for regex in group.regexes]
    records.append(TargetEpochRecord(group_id, None))
    records.append(GroupEpochRecord(group_id, None))
    return Decision(None, ErrorCode.NONE, tuple(records))


# ---------------------------------------------------------------------------------------------
# ConsumerGroupDescribe


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: TopicPartitions
    target_assignment: TopicPartitions
    classic: bool = False  # a classic member (migration.py)


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: int
    error_message: str | None
    group_id: str
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[MemberDescription, ...] = ()
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=dict)


def describe(
    group_id: str, group: ConsumerGroup | None, is_classic: bool, config: GroupConfig
) -> GroupDescription:
    """ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND for an unknown or a classic group."""
    if group is None:
        message = (
            f"Group {group_id} is not a consumer group." if is_classic else f"Group {group_id} not found."
        )
        return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, message, group_id)
    members = tuple(
        MemberDescription(
            m.member_id,
            m.instance_id,
            m.rack_id,
            m.member_epoch,
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.subscribed_topic_regex,
            m.assigned,
            group.target.get(m.member_id, _NO_PARTITIONS),
            m.classic is not None,
        )
        for m in group.members.values()
    )
    return GroupDescription(
        ErrorCode.NONE,
        None,
        group_id,
        group.state.value,
        group.group_epoch,
        group.assignment_epoch,
        group.assignor_name(config),
        members,
        group.topic_names(),
    )


# ---------------------------------------------------------------------------------------------
# offsets of a consumer-protocol group (OffsetCommit / OffsetFetch v9)


# OffsetCommit v9 carries the member epoch (KIP-848): a consumer-protocol member must use it
FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION = 9


def validate_offset_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int | None = None
) -> int:
    """Kafka's ConsumerGroup.validateOffsetCommit: a commit without a member (epoch < 0) only into
    an empty group; else the member must exist, commit with OffsetCommit v9+ (UNSUPPORTED_VERSION)
    and send its current epoch (STALE_MEMBER_EPOCH)."""
    if member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.classic is not None:  # a classic member commits with its generation, any version
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
    if api_version is not None and api_version < FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION:
        return ErrorCode.UNSUPPORTED_VERSION
    if member_epoch != member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def validate_offset_fetch(group: ConsumerGroup, member_id: str, member_epoch: int) -> int:
    """Kafka's ConsumerGroup.validateOffsetFetch: epoch -1 (an admin client) may always fetch; else
    the member must exist and send its current epoch."""
    if member_epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
