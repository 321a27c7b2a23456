"""DescribeTopicPartitions (API 75) on a real cluster: three `odradek serve` processes on a real
ZooKeeper, asked with raw requests and with kafka-python's admin client.

What must hold: every broker answers it (Kafka serves it only on KRaft brokers; odradek serves it in
ZooKeeper mode too, on purpose) with the leaders, replicas and ISR the controller wrote to ZooKeeper;
a small limit pages through the partitions with the cursor; once a broker is killed, its replicas are
offline replicas, its partitions move to another ISR member, and a partition it alone held has no
leader (-1).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from odradek.testing.cluster import LocalCluster, eventually
from tests.compat.helpers import admin
from tests.server.raw_client import RawClient

pytestmark = pytest.mark.slow

TOPIC, SOLO = "inventory", "solo"
ASSIGNMENTS = {TOPIC: [[1, 2], [2, 3], [3, 1]], SOLO: [[3]]}  # SOLO lives on broker 3 alone
TIMEOUT_S = 30


def describe(bootstrap: str) -> DescribeTopicPartitionsResponse:
    """Every topic, as the broker at `bootstrap` describes them."""
    with RawClient(bootstrap) as client:
        return client.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest())


def partitions(response: DescribeTopicPartitionsResponse) -> dict[str, list[tuple]]:
    """Per topic, (index, leader, replicas, isr, offline replicas) of every partition."""
    assert [t.error_code for t in response.topics] == [0] * len(response.topics)
    return {
        t.name: [
            (p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas)
            for p in t.partitions
        ]
        for t in response.topics
    }


def zookeeper_view(cluster: LocalCluster) -> dict[str, list[tuple]]:
    view = {}
    for name, assignment in ASSIGNMENTS.items():
        states = [cluster.state(name, p) or {} for p in range(len(assignment))]
        view[name] = [(p, s.get("leader"), assignment[p], s.get("isr"), []) for p, s in enumerate(states)]
    return view


@pytest.fixture
def cluster(start_cluster) -> LocalCluster:
    made = start_cluster()
    topics = [NewTopic(n, num_partitions=len(a), replica_assignment=a) for n, a in ASSIGNMENTS.items()]
    client = admin(made.bootstrap)  # must outlive the futures it returns
    for future in client.create_topics(topics, operation_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)

    def full_isrs() -> bool:
        view = zookeeper_view(made)
        return all(sorted(p[3] or []) == sorted(p[2]) for name in view for p in view[name])

    eventually(full_isrs, TIMEOUT_S, "full ISRs")
    return made


def test_every_broker_describes_the_partitions_as_zookeeper_holds_them(cluster: LocalCluster) -> None:
    expected = zookeeper_view(cluster)
    assert [p[1] for p in expected[TOPIC]] == [1, 2, 3]  # the preferred leaders
    for process in cluster.brokers.values():
        eventually(
            lambda p=process: partitions(describe(p.bootstrap)) == expected, TIMEOUT_S, process.bootstrap
        )

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        first = client.describe_topic_partitions([TOPIC], response_partition_limit=2)
        rest = client.describe_topic_partitions(
            [TOPIC], response_partition_limit=2, cursor=first["next_cursor"]
        )
    finally:
        client.close()
    assert first["next_cursor"] == {"topic_name": TOPIC, "partition_index": 2}
    assert [[p["leader_id"] for p in r["topics"][0]["partitions"]] for r in (first, rest)] == [[1, 2], [3]]
    assert rest["next_cursor"] is None


def test_a_killed_broker_is_offline_and_its_sole_partition_leaderless(cluster: LocalCluster) -> None:
    cluster.brokers[3].kill()

    survivor = cluster.brokers[1].bootstrap
    expected = {
        TOPIC: [(0, 1, [1, 2], [1, 2], []), (1, 2, [2, 3], [2], [3]), (2, 1, [3, 1], [1], [3])],
        SOLO: [(0, -1, [3], [3], [3])],
    }
    eventually(
        lambda: partitions(describe(survivor)) == expected, TIMEOUT_S, "broker 3 offline in the answer"
    )
