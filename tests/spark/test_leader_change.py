"""The Spark source and sink on a replicated cluster ride out a leader change: a kill -9 of a
partition's leader between two jobs, and the next read and write go to the new leader with nothing
lost (three `odradek serve` brokers on a real ZooKeeper, a real local SparkSession)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.conftest import SESSION_TIMEOUT_MS
from tests.cluster.test_replication import create_replicated_topic, produce_all

pytestmark = pytest.mark.slow

TOPIC = "sparked"


@pytest.fixture
def cluster(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster(**{"replica.fetch.backoff.ms": 200})


def read_values(spark, bootstrap: str) -> list[str]:
    frame = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .load()
    )
    return sorted(row.value.decode() for row in frame.select("value").collect())


def test_batch_read_and_write_after_the_leader_is_killed(spark, cluster: LocalCluster) -> None:
    create_replicated_topic(cluster, TOPIC)
    before = [f"before-{i:03d}" for i in range(200)]
    assert produce_all(cluster, TOPIC, [v.encode() for v in before]) == []
    assert read_values(spark, cluster.bootstrap) == before
    old_leader = cluster.state(TOPIC, 0)["leader"]
    cluster.brokers[old_leader].kill()
    eventually(
        lambda: cluster.state(TOPIC, 0)["leader"] not in (old_leader, -1),
        SESSION_TIMEOUT_MS / 1000 + 10,
        "a new leader",
    )
    survivors = ",".join(p.bootstrap for b, p in cluster.brokers.items() if b != old_leader)
    after = [f"after-{i:03d}" for i in range(100)]
    (
        spark.createDataFrame([(v,) for v in after], "value STRING")
        .write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("topic", TOPIC)
        .save()
    )
    assert read_values(spark, survivors) == sorted(before + after)
