"""Dynamic broker configs on a three-broker ZooKeeper cluster: a cluster-wide default written through
one broker lands in `/config/brokers/<default>` and reaches every broker's DescribeConfigs and the
effective config of an existing topic on each; a per-broker config reaches only its broker; both
survive restarts."""

from __future__ import annotations

import pytest

from odradek.testing.cluster import LocalCluster, eventually
from tests.compat.broker_configs import TOPIC, alter_raw, describe_broker, describe_raw, set_broker
from tests.compat.helpers import admin, create_topic

pytestmark = pytest.mark.slow

DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3
TIMEOUT_S = 20


def retention_everywhere(cluster: LocalCluster, topic: str) -> dict[int, tuple[str | None, int]]:
    """Each broker's (value, source) of log.retention.ms and of the topic's retention.ms."""
    client = admin(cluster.bootstrap)
    seen = {}
    for broker_id, process in cluster.brokers.items():
        broker = describe_broker(client, str(broker_id))["log.retention.ms"]
        topic_value = describe_raw(process.bootstrap, TOPIC, topic)["retention.ms"]
        seen[broker_id] = ((broker.value, broker.source), topic_value[:2])
    return seen


def test_cluster_default_reaches_every_broker_and_per_broker_only_its_own(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "existing")
    assert alter_raw(cluster.brokers[2].bootstrap, "", **{"log.retention.ms": "120000"}) == (0, None)
    assert cluster.read("/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.ms": "120000"},
    }
    everywhere = {b: (("120000", DYNAMIC_DEFAULT), ("120000", DYNAMIC_DEFAULT)) for b in cluster.brokers}
    eventually(
        lambda: retention_everywhere(cluster, "existing") == everywhere, TIMEOUT_S, "default everywhere"
    )

    client = admin(cluster.bootstrap)
    set_broker(client, "3", **{"log.retention.ms": "60000"})
    assert cluster.read("/config/brokers/3") == {"version": 1, "config": {"log.retention.ms": "60000"}}
    expected = {**everywhere, 3: (("60000", DYNAMIC_BROKER), ("60000", DYNAMIC_BROKER))}
    assert retention_everywhere(cluster, "existing") == expected

    for process in (cluster.brokers[1], cluster.brokers[3]):
        process.restart()
    cluster.wait_for_controller()
    eventually(
        lambda: retention_everywhere(cluster, "existing") == expected, TIMEOUT_S, "kept after restarts"
    )
