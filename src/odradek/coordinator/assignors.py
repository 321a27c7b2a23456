"""The server-side partition assignors of KIP-848 consumer groups: `uniform` and `range`.

Owns the values an assignor reads (`MemberSubscription`, `TopicDescription`) and returns
(`Assignment`), the two built-in assignors (`ASSIGNORS`), and the choice among the ones configured
in `group.consumer.assignors` (`configured_assignors`, `assignor_for`, `preferred_assignor`,
`UnsupportedAssignorError`).

What each computes (Kafka 4's group coordinator, org.apache.kafka.coordinator.group.assignor):
- `uniform` (the default): every subscribed partition to one subscriber, balanced, sticky.
  Homogeneous groups (every member subscribes to the same known topics): each member gets
  total // members or one more; a member keeps its current partitions up to that quota, the extra
  quotas going first to members that already hold more than the minimum; only the surplus and the
  unowned partitions move, to the members under quota in member id order.
  Heterogeneous groups: a member keeps every current partition of a topic it still subscribes to;
  unowned partitions go, topic by topic (most partitions per subscriber first), each to the least
  loaded subscriber; then, per topic, partitions move one at a time from the most loaded holder to
  the least loaded subscriber while the two differ by more than one, until no topic moves any.
- `range`: per topic, the subscribers in order (members with a group.instance.id first, by
  instance id, then the others by member id) get contiguous ranges, the first
  (partitions % subscribers) of them one partition more. Topics with the same partition count and
  the same subscribers are co-partitioned: partition p of each goes to the same member. Not sticky,
  as in Kafka since 3.9 (KAFKA-16944): the target is recomputed from the member order alone, which
  static members keep across restarts.
Neither uses racks (Kafka removed rack awareness from both, KAFKA-16694);
`TopicDescription.partition_racks` is carried for an assignor that would.

Invariants: the result names every member (an empty dict when it gets nothing) and only topics
with at least one partition for it; a partition goes to at most one member, and to a member only
if it subscribes to the topic; every partition of a known subscribed topic is assigned. Subscribed
topics missing from `topics` are ignored (deleted, or not yet in the metadata), as are current
partitions that no longer exist. The same input gives the same output: members are ordered by
member id (range: as above), topics by id. Pure functions over values: no I/O, no clock.

Deviations from Kafka: uniform sorts members by id where Kafka iterates a hash map, prefers
members over their minimum for the extra quotas (fewer moves), and balances heterogeneous groups
until no move helps where Kafka stops after 16 rounds. Custom assignor classes are not supported.
Callers: the consumer group coordinator (target assignments) and tests.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

UNIFORM = "uniform"
RANGE = "range"
# group.consumer.assignors' default: the first one is what a group gets when no member names one.
DEFAULT_ASSIGNORS = (UNIFORM, RANGE)
# Kafka's classes, which the setting may name instead of the short names.
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def _no_racks() -> Mapping[int, frozenset[str]]:
    return {}


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    # The member's current target assignment, which the sticky assignor preserves where it can.
    assigned: Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: int
    # The racks of each partition's replicas; unused by the built-in assignors.
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=_no_racks)


# member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicDescription]
    ) -> Assignment: ...


class UnsupportedAssignorError(ValueError):
    """A member asked for an assignor the broker does not configure (Kafka: UNSUPPORTED_ASSIGNOR)."""


def _known_subscriptions(
    member_ids: Sequence[str],
    members: Mapping[str, MemberSubscription],
    topics: Mapping[uuid.UUID, TopicDescription],
) -> list[frozenset[uuid.UUID]]:
    """Each member's subscribed topics that exist with partitions; equal subscriptions share one
    set (computed once: groups are mostly a few distinct subscriptions)."""
    known = frozenset(t for t, description in topics.items() if description.partitions > 0)
    computed: dict[frozenset[uuid.UUID], frozenset[uuid.UUID]] = {}
    result = []
    for member_id in member_ids:
        subscribed = members[member_id].subscribed_topic_ids
        if not isinstance(subscribed, frozenset):
            subscribed = frozenset(subscribed)  # a set given where the type says frozenset
        mine = computed.get(subscribed)
        if mine is None:
            mine = computed[subscribed] = known.intersection(subscribed)
        result.append(mine)
    return result


def _claim_current(
    member_ids: Sequence[str],
    members: Mapping[str, MemberSubscription],
    subscriptions: Sequence[frozenset[uuid.UUID]],
    owners: dict[uuid.UUID, list[int]],
) -> list[list[tuple[uuid.UUID, int]]]:
    """Each member's current partitions it may keep (subscribed, existing, not claimed by an earlier
    member), in (topic id, partition) order; marks them owned by the member's index in `owners`."""
    kept: list[list[tuple[uuid.UUID, int]]] = []
    for index, member_id in enumerate(member_ids):
        mine: list[tuple[uuid.UUID, int]] = []
        subscribed = subscriptions[index]
        for topic_id, partitions in sorted(members[member_id].assigned.items()):
            if topic_id not in subscribed:
                continue
            topic_owners = owners[topic_id]
            count = len(topic_owners)
            for p in sorted(partitions):
                if 0 <= p < count and topic_owners[p] < 0:
                    topic_owners[p] = index
                    mine.append((topic_id, p))
        kept.append(mine)
    return kept


def _as_assignment(member_ids: Sequence[str], owners: Mapping[uuid.UUID, list[int]]) -> Assignment:
    per_member: list[dict[uuid.UUID, list[int]]] = [{} for _ in member_ids]
    for topic_id in sorted(owners):
        for p, index in enumerate(owners[topic_id]):
            if index >= 0:
                per_member[index].setdefault(topic_id, []).append(p)
    return {
        member_id: {t: frozenset(ps) for t, ps in per_member[index].items()}
        for index, member_id in enumerate(member_ids)
    }


class UniformAssignor:
    """Balanced and sticky: see the module docstring."""

    name: str = UNIFORM

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicDescription]
    ) -> Assignment:
        member_ids = sorted(members)
        subscriptions = _known_subscriptions(member_ids, members, topics)
        all_topics = frozenset().union(*subscriptions)
        if not all_topics:
            return {m: {} for m in member_ids}
        owners = {t: [-1] * topics[t].partitions for t in all_topics}
        kept = _claim_current(member_ids, members, subscriptions, owners)
        if len(set(subscriptions)) == 1:
            _uniform_homogeneous(kept, owners)
        else:
            _uniform_heterogeneous(kept, subscriptions, owners)
        return _as_assignment(member_ids, owners)


def _uniform_homogeneous(kept: list[list[tuple[uuid.UUID, int]]], owners: dict[uuid.UUID, list[int]]) -> None:
    members = len(kept)
    total = sum(len(o) for o in owners.values())
    minimum, extra = divmod(total, members)
    # The extra quotas go first to members holding more than the minimum: each saves one move.
    by_need = sorted(range(members), key=lambda i: (len(kept[i]) <= minimum, i))
    quotas = [minimum] * members
    for i in by_need[:extra]:
        quotas[i] += 1
    for index, mine in enumerate(kept):
        for topic_id, p in mine[quotas[index] :]:
            owners[topic_id][p] = -1
    unowned = [(t, p) for t in sorted(owners) for p, index in enumerate(owners[t]) if index < 0]
    taken = 0
    for index, mine in enumerate(kept):
        need = quotas[index] - min(len(mine), quotas[index])
        for topic_id, p in unowned[taken : taken + need]:
            owners[topic_id][p] = index
        taken += need


def _uniform_heterogeneous(
    kept: list[list[tuple[uuid.UUID, int]]],
    subscriptions: Sequence[frozenset[uuid.UUID]],
    owners: dict[uuid.UUID, list[int]],
) -> None:
    load = [len(mine) for mine in kept]
    subscribers: dict[uuid.UUID, list[int]] = {t: [] for t in owners}
    for index, subscribed in enumerate(subscriptions):
        for topic_id in subscribed:
            subscribers[topic_id].append(index)
    # holdings[topic][member index]: the member's partitions of the topic, for moving them.
    holdings: dict[uuid.UUID, dict[int, list[int]]] = {t: {} for t in owners}
    for index, mine in enumerate(kept):
        for topic_id, p in mine:
            holdings[topic_id].setdefault(index, []).append(p)
    # Most partitions per subscriber first (the hardest to spread), then fewer subscribers, then id.
    order = sorted(owners, key=lambda t: (-len(owners[t]) / len(subscribers[t]), len(subscribers[t]), t))
    for topic_id in order:
        topic_owners = owners[topic_id]
        unowned = [p for p, index in enumerate(topic_owners) if index < 0]
        if not unowned:
            continue
        least = [(load[i], i) for i in subscribers[topic_id]]
        heapq.heapify(least)
        held = holdings[topic_id]
        for p in unowned:
            count, index = heapq.heappop(least)
            topic_owners[p] = index
            held.setdefault(index, []).append(p)
            load[index] = count + 1
            heapq.heappush(least, (count + 1, index))
    moved = True
    while moved:
        moved = False
        for topic_id in order:
            if _balance_topic(owners[topic_id], subscribers[topic_id], holdings[topic_id], load):
                moved = True


def _balance_topic(
    topic_owners: list[int], subscribers: list[int], held: dict[int, list[int]], load: list[int]
) -> bool:
    """Moves partitions of one topic from its most loaded holder to its least loaded subscriber
    while their loads differ by more than one. Each move lowers the sum of squared loads, so the
    rounds over all topics end. Returns whether anything moved."""
    if len(subscribers) < 2 or not held:
        return False
    lowest = min(map(load.__getitem__, subscribers))
    if max(load[i] for i, partitions in held.items() if partitions) - lowest <= 1:
        return False  # the common case, checked without building the heaps
    least = [(load[i], i) for i in subscribers]
    heapq.heapify(least)
    most = [(-load[i], i) for i, partitions in held.items() if partitions]
    heapq.heapify(most)
    moved = False
    while most:
        negative, high = most[0]
        if -negative != load[high] or not held.get(high):
            heapq.heappop(most)  # stale: the member's load changed since this entry
            continue
        count, low = least[0]
        if count != load[low]:
            heapq.heappop(least)
            continue
        if load[high] - count <= 1:
            break
        p = held[high].pop()
        held.setdefault(low, []).append(p)
        topic_owners[p] = low
        load[high] -= 1
        load[low] += 1
        heapq.heappush(most, (-load[high], high))
        heapq.heappush(most, (-load[low], low))
        heapq.heappush(least, (load[high], high))
        heapq.heappush(least, (load[low], low))
        moved = True
    return moved


class RangeAssignor:
    """Contiguous ranges per topic, co-partitioned, recomputed each time: see the module docstring."""

    name: str = RANGE

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicDescription]
    ) -> Assignment:
        member_ids = sorted(members, key=lambda member_id: _range_order(member_id, members[member_id]))
        result: Assignment = {m: {} for m in member_ids}
        # Positions in the order, by subscription: most groups have few distinct subscriptions.
        by_subscription: dict[frozenset[uuid.UUID], list[int]] = {}
        for position, subscribed in enumerate(_known_subscriptions(member_ids, members, topics)):
            by_subscription.setdefault(subscribed, []).append(position)
        by_topic: dict[uuid.UUID, list[list[int]]] = {}
        for subscribed, positions in by_subscription.items():
            for topic_id in subscribed:
                by_topic.setdefault(topic_id, []).append(positions)
        for topic_id in sorted(by_topic):
            groups = by_topic[topic_id]
            subscribers = groups[0] if len(groups) == 1 else sorted(itertools.chain.from_iterable(groups))
            partitions = topics[topic_id].partitions
            size, extra = divmod(partitions, len(subscribers))
            start = 0
            # Subscribers past the partition count get none.
            for k in range(min(len(subscribers), partitions)):
                end = start + size + (1 if k < extra else 0)
                result[member_ids[subscribers[k]]][topic_id] = frozenset(range(start, end))
                start = end
        return result


def _range_order(member_id: str, member: MemberSubscription) -> tuple[int, str, str]:
    # Static members first, by instance id, so a restarted member (new member id) keeps its ranges.
    if member.instance_id is not None:
        return (0, member.instance_id, member_id)
    return (1, member_id, "")


ASSIGNORS: Mapping[str, PartitionAssignor] = MappingProxyType(
    {UNIFORM: UniformAssignor(), RANGE: RangeAssignor()}
)


def configured_assignors(names: Iterable[str]) -> tuple[PartitionAssignor, ...]:
    """The assignors of group.consumer.assignors, in order: built-in names or Kafka's class names.
    ValueError for an empty list or any other name (custom assignors are not supported)."""
    resolved: list[PartitionAssignor] = []
    for raw in names:
        name = raw.strip()
        assignor = ASSIGNORS.get(_CLASS_NAMES.get(name, name))
        if assignor is None:
            raise ValueError(f"group.consumer.assignors: unknown assignor {name!r}")
        if assignor not in resolved:
            resolved.append(assignor)
    if not resolved:
        raise ValueError("group.consumer.assignors: no assignor configured")
    return tuple(resolved)


def assignor_for(names_configured: Iterable[str], requested: str | None) -> PartitionAssignor:
    """The assignor a member asks for (ConsumerGroupHeartbeat's ServerAssignor, the client's
    group.remote.assignor); None: the first configured. UnsupportedAssignorError when the broker
    does not configure the requested one."""
    configured = configured_assignors(names_configured)
    if requested is None:
        return configured[0]
    for assignor in configured:
        if assignor.name == requested:
            return assignor
    raise UnsupportedAssignorError(f"ServerAssignor {requested} is not supported")


def preferred_assignor(
    names_configured: Iterable[str], requested_by_members: Iterable[str | None]
) -> PartitionAssignor:
    """The assignor of a group, as Kafka chooses it: the one most members ask for (ties: the one
    configured first; Kafka leaves ties to hash order), the first configured when none asks.
    Requests for assignors not configured were refused at the heartbeat and are ignored here."""
    configured = configured_assignors(names_configured)
    counts = Counter(name for name in requested_by_members if name is not None)
    best = max(configured, key=lambda a: counts.get(a.name, 0))
    return best if counts.get(best.name, 0) > 0 else configured[0]
