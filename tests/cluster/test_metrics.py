"""Prometheus metrics on a three-broker cluster: the controller, under-replicated partitions and ISR
shrinks as /metrics reports them when a follower is killed."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster, eventually
from tests.compat.helpers import QUIET, admin
from tests.scrape import Samples, scrape, value

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
_HTTP_ADDRESS = re.compile(r"started, listening on .*http://127\.0\.0\.1:(\d+)")


def metrics_url(process: BrokerProcess) -> str:
    """The broker's /metrics: its port 0 HTTP listener's port, from its start-up line."""
    port = eventually(lambda: _HTTP_ADDRESS.search(process.output_tail(1 << 20)), TIMEOUT_S, "HTTP port")
    return f"http://127.0.0.1:{port.group(1)}/metrics"


def test_controller_under_replication_and_isr_shrinks_follow_a_killed_follower(
    start_cluster: Callable[..., LocalCluster], unique_topic
):
    cluster = start_cluster(**{"http.listeners": "http://127.0.0.1:0"})
    urls = {broker_id: metrics_url(process) for broker_id, process in cluster.brokers.items()}

    def across(name: str, ids: list[int]) -> float:
        return sum(value(scrape(urls[i]), name) for i in ids)

    controllers = "kafka_controller_kafkacontroller_activecontrollercount"
    assert across(controllers, list(urls)) == 1
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic(unique_topic, 1, 3)], operation_timeout=30)[unique_topic].result(30)
    eventually(lambda: len((cluster.state(unique_topic, 0) or {}).get("isr", ())) == 3, TIMEOUT_S, "full ISR")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    for i in range(10):
        producer.produce(unique_topic, value=b"%d" % i)
    assert producer.flush(TIMEOUT_S) == 0

    state = cluster.state(unique_topic, 0)
    assert state is not None
    leader = state["leader"]
    follower = next(i for i in sorted(urls) if i not in (leader, cluster.controller()))
    before = scrape(urls[leader])
    partition = {"topic": unique_topic, "partition": "0"}
    assert value(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(before, "kafka_log_log_logendoffset", **partition) == 10

    cluster.brokers[follower].kill()

    def shrunk() -> Samples | None:
        samples = scrape(urls[leader])
        under = value(samples, "kafka_server_replicamanager_underreplicatedpartitions")
        return samples if under >= 1 else None

    after = eventually(shrunk, TIMEOUT_S, "the leader reporting an under-replicated partition")
    shrinks = "kafka_server_replicamanager_isrshrinks_total"
    assert value(after, shrinks) - value(before, shrinks) >= 1
    remaining = [i for i in urls if i != follower]
    assert across(controllers, remaining) == 1
    assert across("kafka_controller_kafkacontroller_offlinepartitionscount", remaining) == 0
