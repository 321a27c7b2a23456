"""The `simple` assignor of share groups (KIP-932; Kafka's SimpleAssignor): the target assignment of
a share group's members, pure.

Owns `assign_simple`. Unlike a consumer group's assignors, a partition may be assigned to several
members at once: records are shared, each acquired by one member at a time.

Rules (Kafka's homogeneous and heterogeneous builders, written here as one):
- Every partition of the subscribed topics is assigned to at least one member subscribed to it.
- With more members than partitions, a partition is shared by `ceil(members / partitions)`
  members (its desired sharing) so that every member gets work.
- Balance first: the partition counts of two members subscribed to the same topics differ by at
  most one. Stickiness second: a member keeps what it had as long as balance allows.
- Deterministic: members are taken in member-id order, partitions in (topic id, partition) order.

Callers: coordinator/share_group.py, tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

TopicPartitions = Mapping[uuid.UUID, frozenset[int]]
Subscriptions = Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids


def assign_simple(
    subscriptions: Subscriptions,
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, TopicPartitions],
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The new target assignment of every member (`current`: the previous target)."""
    members = sorted(subscriptions)
    if not members:
        return {}
    partitions = [
        (topic_id, p)
        for topic_id in sorted({t for topics in subscriptions.values() for t in topics})
        for p in range(partition_counts.get(topic_id, 0))
    ]
    if not partitions:
        return {m: {} for m in members}
    sharing = -(-len(members) // len(partitions))
    quota = _quotas(members, len(partitions) * sharing)
    holders: dict[tuple[uuid.UUID, int], list[str]] = {tp: [] for tp in partitions}
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in members}
    # stickiness: keep what each member had while it stays subscribed, within sharing and quota
    for member in members:
        for topic_id, previous in sorted(current.get(member, {}).items()):
            if topic_id not in subscriptions[member]:
                continue
            for p in sorted(previous):
                tp = (topic_id, p)
                if tp in holders and len(holders[tp]) < sharing and len(held[member]) < quota[member]:
                    holders[tp].append(member)
                    held[member].append(tp)
    # fill: each partition up to its sharing, to the eligible member holding the fewest
    for tp in partitions:
        while len(holders[tp]) < sharing:
            eligible = [m for m in members if tp[0] in subscriptions[m] and m not in holders[tp]]
            if not eligible:
                break
            under = [m for m in eligible if len(held[m]) < quota[m]] or eligible
            chosen = min(under, key=lambda m: (len(held[m]), m))
            holders[tp].append(chosen)
            held[chosen].append(tp)
    return {m: _grouped(held[m]) for m in members}


def _quotas(members: list[str], slots: int) -> dict[str, int]:
    """How many partitions each member should hold: `slots` spread, the first ones one more."""
    base, extra = divmod(slots, len(members))
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}


def _grouped(partitions: list[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in partitions:
        grouped.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in grouped.items()}
