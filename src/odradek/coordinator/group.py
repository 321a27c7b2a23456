"""The state of one classic consumer group, as immutable values.

Owns: `GroupState` (Kafka's Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), `Member`,
`CommittedOffset`, `Group` and `Now`. Transitions live in `classic.py`; this module only holds values
and the small queries over them.

Invariants:
- Values are never mutated: a transition returns a new `Group` (`dataclasses.replace`) whose
  mappings are fresh copies. Mappings keep insertion order, so `members` is in join order.
- Deadlines are monotonic milliseconds (`Now.monotonic_ms`) and are never persisted; timestamps
  that reach `__consumer_offsets` (commit time, state change time) are wall-clock milliseconds.
- A member whose JoinGroup or SyncGroup is parked carries the ticket the runtime answers it by.

Callers: the coordinator package only (state machine, shard runtime, loader, handlers via results).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from odradek.protocol.topic_partition import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Now:
    """The instant a decision is taken: wall clock for records, monotonic clock for deadlines."""

    wall_ms: int
    monotonic_ms: int


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset as kept in memory (OffsetCommitValue plus Kafka's expire semantics)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_ticket: int | None = None
    sync_ticket: int | None = None
    is_new: bool = False
    session_deadline_ms: int = 0

    def protocol_metadata(self, name: str | None) -> bytes:
        for protocol in self.protocols:
            if protocol.name == name:
                return protocol.metadata
        return b""

    def keeps_session_alive(self) -> bool:
        """Members parked in a rebalance need no heartbeat, except new ones (Kafka's new-member timeout)."""
        return not self.is_new and (self.join_ticket is not None or self.sync_ticket is not None)


@dataclass(frozen=True, slots=True)
class InitialDelay:
    """group.initial.rebalance.delay.ms in progress: the delay, what is left of the rebalance
    timeout for further extensions, and whether a member joined since the last extension."""

    delay_ms: int
    remaining_ms: int
    new_member_added: bool = False


@dataclass(frozen=True, slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: Mapping[str, Member] = field(default_factory=dict)
    pending_members: Mapping[str, int] = field(default_factory=dict)
    static_members: Mapping[str, str] = field(default_factory=dict)
    pending_sync: frozenset[str] = frozenset()
    join_deadline_ms: int | None = None
    initial_delay: InitialDelay | None = None
    sync_deadline_ms: int | None = None
    offsets: Mapping[TopicPartition, CommittedOffset] = field(default_factory=dict)

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_ticket is not None for m in self.members.values())

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to (consumer groups with members), None when unknown."""
        if not self.is_consumer_group() or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscription_topics(member.protocol_metadata(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def next_deadline_ms(self) -> int | None:
        """The earliest monotonic instant at which a timer of this group fires, if any."""
        deadlines = [m.session_deadline_ms for m in self.members.values() if not m.keeps_session_alive()]
        deadlines.extend(self.pending_members.values())
        if self.join_deadline_ms is not None:
            deadlines.append(self.join_deadline_ms)
        if self.sync_deadline_ms is not None:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)
