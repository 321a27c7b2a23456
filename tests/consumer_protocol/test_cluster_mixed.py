"""Classic groups and KIP-848 consumer groups side by side on one three-broker ZooKeeper cluster,
all consuming the same topics at the same time: each group, whatever its protocol, consumes every
record exactly once by its committed offsets (members.py's ledger), and none disturbs another.

Two classic groups (librdkafka `group.protocol=classic`, one with the eager `range` assignor, one
with `cooperative-sticky`) and two consumer-protocol groups (one on the `uniform` server assignor,
one on `range`), two members each, read two topics while a producer writes to both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic
from tests.consumer_protocol.members import Crew, Ledger, committed_offsets, consumer_config, end_offsets
from tests.consumer_protocol.test_cluster_churn import CLUSTER, PARTITIONS, NumberedProducer

pytestmark = pytest.mark.slow

TOPICS = ("mixed-a", "mixed-b")
PER_TOPIC = 600
GROUPS: dict[str, tuple[str, dict[str, Any]]] = {
    "classic-range": ("classic", {"partition.assignment.strategy": "range"}),
    "classic-cooperative": ("classic", {"partition.assignment.strategy": "cooperative-sticky"}),
    "consumer-uniform": ("consumer", {"group.remote.assignor": "uniform"}),
    "consumer-range": ("consumer", {"group.remote.assignor": "range"}),
}


def test_classic_and_consumer_groups_consume_the_same_topics_at_once(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    for topic in TOPICS:
        create_replicated_topic(cluster, topic, PARTITIONS)
    ledgers = {group: Ledger() for group in GROUPS}
    crews = {
        group: Crew(
            group, consumer_config(cluster.bootstrap, group, protocol, **extra), list(TOPICS), ledgers[group]
        )
        for group, (protocol, extra) in GROUPS.items()
    }
    try:
        for crew in crews.values():
            crew.add()
            crew.add()
        # every member holds partitions before the records flow, so each has records to consume
        # however long its group took to settle
        eventually(lambda: all(map(both_assigned, crews.values())), 90, "two members with partitions")
        producers = [
            NumberedProducer(cluster.bootstrap, topic, PER_TOPIC, per_second=200).start() for topic in TOPICS
        ]
        for producer in producers:
            producer.join()
            assert producer.errors == []
        ends = {topic: end_offsets(cluster.bootstrap, topic, PARTITIONS) for topic in TOPICS}

        def complete(group: str) -> Callable[[], bool]:
            def done() -> bool:
                crews[group].keep(2)  # a member whose commit failed rolled back: replaced
                return all(
                    committed_offsets(cluster.bootstrap, group, topic, PARTITIONS) == ends[topic]
                    for topic in TOPICS
                )

            return done

        for group in GROUPS:
            eventually(complete(group), 90, f"group {group} at the end of every partition", 1.0)
    finally:
        for crew in crews.values():
            crew.stop()
    assert [crew.errors() for crew in crews.values()] == [[]] * len(crews)
    for group in GROUPS:
        for topic in TOPICS:
            committed = committed_offsets(cluster.bootstrap, group, topic, PARTITIONS)
            assert ledgers[group].problems(topic, committed, ends[topic]) == [], (group, topic)
            assert ledgers[group].total(topic) == PER_TOPIC
        # the group's first two members both got partitions
        assert all(m.batches for m in crews[group].members[:2]), group


def both_assigned(crew: Crew) -> bool:
    crew.keep(2)
    return all(m.assignment for m in crew.running()) and len(crew.running()) == 2
