"""How long the consumer group assignors (`odradek.coordinator.assignors`) take on a large group.

A group of M members (default 1,000) over T topics (default 100) of P partitions in all (default
10,000), for each assignor:
- `first`: no member holds anything yet (the group's first target assignment);
- `stable`: every member holds what the first assignment gave it (a heartbeat-driven recompute
  with nothing changed);
- `join`: one member more than `stable` (the last by member id), the others holding their partitions;
- `leave`: `stable` less its first member (by member id);
- the same four with heterogeneous subscriptions (each member subscribes to a random half of the
  topics, seeded), `uniform` only taking its heterogeneous path there.
Prints the median wall time in milliseconds of `--iterations` runs (default 5) and how many
partitions changed owner against the `stable` assignment. Numbers, not assertions.

Run `python bench/assignors.py [--members 1000] [--partitions 10000] [--topics 100] [--iterations 5]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from collections.abc import Mapping

from odradek.coordinator.assignors import (
    ASSIGNORS,
    Assignment,
    MemberSubscription,
    PartitionAssignor,
    TopicDescription,
)


def _members(
    indexes: range, subscriptions: list[frozenset[uuid.UUID]], assignment: Assignment | None
) -> dict[str, MemberSubscription]:
    members = {}
    for i in indexes:
        member_id = f"member-{i:05d}"
        held = assignment.get(member_id, {}) if assignment else {}
        members[member_id] = MemberSubscription(member_id, None, None, subscriptions[i], held)
    return members


def _timed(
    assignor: PartitionAssignor,
    members: Mapping[str, MemberSubscription],
    topics: Mapping[uuid.UUID, TopicDescription],
    iterations: int,
) -> tuple[float, Assignment]:
    times = []
    result: Assignment = {}
    for _ in range(iterations):
        start = time.perf_counter()
        result = assignor.assign(members, topics)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


def _moved(before: Assignment, after: Assignment) -> int:
    owner = {(t, p): m for m, topics in before.items() for t, ps in topics.items() for p in ps}
    return sum(
        1 for m, topics in after.items() for t, ps in topics.items() for p in ps if owner.get((t, p)) != m
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(848)
    topic_ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(args.topics)]
    per_topic, rest = divmod(args.partitions, args.topics)
    topics = {
        t: TopicDescription(f"topic-{i}", per_topic + (1 if i < rest else 0)) for i, t in enumerate(topic_ids)
    }
    everything = frozenset(topic_ids)
    count = args.members
    layouts = {
        "homogeneous": [everything] * (count + 1),
        "heterogeneous": [
            frozenset(rng.sample(topic_ids, max(1, args.topics // 2))) for _ in range(count + 1)
        ],
    }
    print(f"{count} members, {args.topics} topics, {args.partitions} partitions, median of {args.iterations}")
    print(f"{'assignor':<9} {'subscriptions':<14} {'case':<7} {'ms':>9} {'moved':>7}")
    for layout, subscriptions in layouts.items():
        for name, assignor in ASSIGNORS.items():
            first_ms, stable = _timed(
                assignor, _members(range(count), subscriptions, None), topics, args.iterations
            )
            cases = {
                "first": (first_ms, stable),
                "stable": _timed(
                    assignor, _members(range(count), subscriptions, stable), topics, args.iterations
                ),
                "join": _timed(
                    assignor, _members(range(count + 1), subscriptions, stable), topics, args.iterations
                ),
                "leave": _timed(
                    assignor, _members(range(1, count), subscriptions, stable), topics, args.iterations
                ),
            }
            for case, (ms, result) in cases.items():
                moved = "" if case == "first" else str(_moved(stable, result))
                print(f"{name:<9} {layout:<14} {case:<7} {ms:9.1f} {moved:>7}")


if __name__ == "__main__":
    main()
