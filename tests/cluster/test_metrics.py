"""Prometheus metrics on a three-broker cluster: the controller, under-replicated partitions and ISR
shrinks as /metrics reports them when a follower is killed."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster, eventually
from tests.compat.helpers import QUIET, admin
from tests.group_offsets import PARTITIONS, Rebalancing, commit, committed_offsets, produce_to_every_partition
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
    # any broker's console shows every replica's size, from each broker's DescribeLogDirs
    console = urls[cluster.controller()].removesuffix("/metrics")
    with urllib.request.urlopen(f"{console}/topic?name={unique_topic}", timeout=TIMEOUT_S) as page:
        sizes = re.search(r"1: (\d+), 2: \1, 3: \1<", page.read().decode())
    assert sizes is not None and int(sizes.group(1)) > 0

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


def test_group_offsets_of_many_partitions_are_exposed_by_their_coordinators_while_groups_rebalance(
    start_cluster: Callable[..., LocalCluster], unique_topic
):
    """Groups committing every partition of two topics, their coordinators spread over the brokers:
    each committed offset is exposed by exactly one broker, and every broker answers /metrics while
    another group rebalances."""
    cluster = start_cluster(**{"http.listeners": "http://127.0.0.1:0"})
    urls = [metrics_url(process) for process in cluster.brokers.values()]
    topics = [f"{unique_topic}-a", f"{unique_topic}-b"]
    client = admin(cluster.bootstrap)
    created = client.create_topics([NewTopic(t, PARTITIONS, 2) for t in topics], operation_timeout=30)
    for future in created.values():
        future.result(30)
    produce_to_every_partition(cluster.bootstrap, topics)
    groups = {f"g{i}-{unique_topic}": committed_offsets(topics, i) for i in range(4)}
    for group, offsets in groups.items():
        commit(cluster.bootstrap, group, offsets)

    with Rebalancing(cluster.bootstrap, f"moving-{unique_topic}", topics, rounds=3) as moving:
        while moving.busy():
            for url in urls:
                scrape(url)
    scraped = [scrape(url) for url in urls]
    for group, offsets in groups.items():
        for (topic, partition), offset in offsets.items():
            labels = {"consumergroup": group, "topic": topic, "partition": str(partition)}
            exposed = [value(s, "kafka_consumergroup_current_offset", -1.0, **labels) for s in scraped]
            assert sorted(exposed) == [-1.0, -1.0, offset], (group, topic, partition, exposed)
