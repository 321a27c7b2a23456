"""Prometheus metrics on `http.listeners`: a broker process, real clients, /metrics scraped over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import NewTopic

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.cluster import eventually
from tests.compat.helpers import admin
from tests.exit_report import exit_report
from tests.group_offsets import (
    PARTITIONS,
    RECORDS_PER_PARTITION,
    Rebalancing,
    commit,
    committed_offsets,
    produce_to_every_partition,
)
from tests.scrape import Samples, scrape, scrape_while, value
from tests.server.raw_client import RawClient

RECORDS = 25
COMMITTED = 10
LONG_POLL_MS = 400


class MetricsBroker:
    def __init__(self, process: BrokerProcess, http_port: int) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{http_port}/metrics"

    def scrape(self) -> Samples:
        return scrape(self.url)


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    root = tmp_path_factory.mktemp("metrics")
    http_port = free_port()
    overrides = {"http.listeners": f"http://127.0.0.1:{http_port}"}
    with BrokerProcess(root / "data", output_path=root / "broker.out", overrides=overrides) as process:
        broker = MetricsBroker(process, http_port)
        eventually(lambda: _answers(broker), 10, "/metrics answering")
        yield broker


def _answers(broker: MetricsBroker) -> bool:
    try:
        broker.scrape()
    except OSError:
        return False
    return True


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=b"v" * 50)
    assert producer.flush(30) == 0


def _consume_and_commit(bootstrap: str, topic: str, group: str, commit_after: int) -> None:
    """Read every record of partition 0, committing offset `commit_after`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == RECORDS
        consumer.commit(offsets=[TopicPartition(topic, 0, commit_after)], asynchronous=False)
    finally:
        consumer.close()


def _consumer_protocol_member(bootstrap: str, topic: str, group: str) -> Consumer:
    """A member of `group` with group.protocol=consumer (KIP-848) once it holds the topic's partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment()
    return consumer


def test_group_counts_by_protocol_and_state(metrics_broker, unique_topic):
    bootstrap = metrics_broker.process.bootstrap
    _produce(bootstrap, unique_topic, RECORDS)
    _consume_and_commit(bootstrap, unique_topic, f"classic-{unique_topic}", COMMITTED)  # left: Empty
    before = metrics_broker.scrape()
    member = _consumer_protocol_member(bootstrap, unique_topic, f"kip848-{unique_topic}")
    try:
        during = metrics_broker.scrape()
    finally:
        member.close()
    prefix = "kafka_server_group_coordinator_metrics_"
    assert value(before, f"{prefix}classic_group_count", state="empty") >= 1
    for name, labels in ((f"{prefix}group_count", {"protocol": "consumer"}),
                         (f"{prefix}consumer_group_count", {"state": "stable"})):  # fmt: skip
        assert value(during, name, **labels) == value(before, name, 0, **labels) + 1
    classic = value(during, f"{prefix}group_count", protocol="classic")
    assert classic == value(before, f"{prefix}group_count", protocol="classic")


def test_share_groups_are_counted(metrics_broker, unique_topic):
    """A ShareConsumer's group (KIP-932) counted under protocol=share and share-group-count Stable."""
    bootstrap = metrics_broker.process.bootstrap
    _produce(bootstrap, unique_topic, 1)
    prefix = "kafka_server_group_coordinator_metrics_"
    before = metrics_broker.scrape()
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"share-{unique_topic}"})
    member.subscribe([unique_topic])
    counted = {"protocol": "share"}

    def joined() -> bool:
        member.poll(0.2)
        return value(metrics_broker.scrape(), f"{prefix}group_count", 0, **counted) > value(
            before, f"{prefix}group_count", 0, **counted
        )

    try:
        eventually(joined, 30, "the share group counted")
        during = metrics_broker.scrape()
    finally:
        member.close()
    stable = value(during, f"{prefix}share_group_count", state="stable")
    assert stable == value(before, f"{prefix}share_group_count", 0, state="stable") + 1


def test_topic_counters_log_offsets_and_group_lag_follow_real_clients(metrics_broker, unique_topic):
    bootstrap = metrics_broker.process.bootstrap
    before = metrics_broker.scrape()
    _produce(bootstrap, unique_topic, RECORDS)
    _consume_and_commit(bootstrap, unique_topic, f"group-{unique_topic}", COMMITTED)
    after = metrics_broker.scrape()

    topic = {"topic": unique_topic}
    partition = {"topic": unique_topic, "partition": "0"}
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", **topic) == RECORDS
    log_size = value(after, "kafka_log_log_size", **partition)
    assert log_size > RECORDS * 50
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", **topic) == log_size
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", **topic) >= log_size
    assert value(after, "kafka_log_log_logendoffset", **partition) == RECORDS
    assert value(after, "kafka_log_log_logstartoffset", **partition) == 0
    lag = {"consumergroup": f"group-{unique_topic}", **partition}
    assert value(after, "kafka_consumergroup_current_offset", **lag) == COMMITTED
    assert value(after, "kafka_consumergroup_lag", **lag) == RECORDS - COMMITTED
    total_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(after, total_in) - value(before, total_in) >= RECORDS  # plus the group's own records
    produced = _sum(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produced - _sum(before, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(after, "kafka_server_replicamanager_leadercount") >= 1
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def _sum(samples: Samples, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (sample, tags), v in samples.items() if sample == name and wanted <= tags)


def test_requests_are_counted_per_api_and_version(metrics_broker):
    name = "kafka_network_requestmetrics_requests_total"
    before = metrics_broker.scrape()
    with RawClient(metrics_broker.process.bootstrap) as client:
        for _ in range(3):
            client.call(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        client.call(ApiKey.API_VERSIONS, 2, ApiVersionsRequest())
    after = metrics_broker.scrape()
    assert value(after, name, request="Metadata", version="9") - value(
        before, name, 0.0, request="Metadata", version="9"
    ) == pytest.approx(3)
    assert value(after, name, request="ApiVersions", version="2") - value(
        before, name, 0.0, request="ApiVersions", version="2"
    ) == pytest.approx(1)
    count = "kafka_network_requestmetrics_totaltimems_count"
    assert value(after, count, request="Metadata") - value(before, count, 0.0, request="Metadata") == 3


def test_total_and_queue_times_tell_a_long_poll_from_the_request_queued_behind_it(
    metrics_broker, unique_topic
):
    _produce(metrics_broker.process.bootstrap, unique_topic, 1)
    long_poll = FetchRequest(
        max_wait_ms=LONG_POLL_MS,
        min_bytes=1,
        topics=[
            FetchRequest.FetchTopic(
                topic=unique_topic,
                partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    with RawClient(metrics_broker.process.bootstrap) as client:
        client.send(ApiKey.FETCH, 11, long_poll)
        client.send(ApiKey.API_VERSIONS, 1, ApiVersionsRequest())  # waits behind the fetch
        waiting = eventually(
            lambda: value(
                metrics_broker.scrape(),
                "kafka_server_delayedoperationpurgatory_purgatorysize",
                delayedOperation="Fetch",
            ),
            5,
            "the fetch parked in purgatory",
            interval_s=0.02,
        )
        assert waiting >= 1
        client.read_response(ApiKey.FETCH, 11)
        client.read_response(ApiKey.API_VERSIONS, 1)
    samples = metrics_broker.scrape()
    slowest = {"quantile": "0.999"}
    fetch_total = value(samples, "kafka_network_requestmetrics_totaltimems", request="Fetch", **slowest)
    assert fetch_total >= LONG_POLL_MS * 0.9
    queued = value(
        samples, "kafka_network_requestmetrics_requestqueuetimems", request="ApiVersions", **slowest
    )
    assert queued >= LONG_POLL_MS * 0.9
    assert (
        value(samples, "kafka_network_requestmetrics_throttletimems", request="Fetch", quantile="0.99") == 0
    )


def test_connections_are_counted_per_listener(metrics_broker):
    name = "kafka_server_socket_server_metrics_connection_count"
    # Clients of the earlier tests may still be closing: count from an idle listener.
    eventually(
        lambda: value(metrics_broker.scrape(), name, listener="PLAINTEXT") == 0, 10, "earlier clients gone"
    )
    clients = [RawClient(metrics_broker.process.bootstrap) for _ in range(3)]
    try:
        for client in clients:
            client.call(ApiKey.API_VERSIONS, 1, ApiVersionsRequest())
        assert value(metrics_broker.scrape(), name, listener="PLAINTEXT") == 3
    finally:
        for client in clients:
            client.close()
    eventually(
        lambda: value(metrics_broker.scrape(), name, listener="PLAINTEXT") == 0, 5, "connections closed"
    )


def test_other_paths_answer_404_and_other_methods_405(metrics_broker):
    base = metrics_broker.url.removesuffix("/metrics")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + "/nothing", timeout=10)
    missing.value.close()
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(metrics_broker.url, data=b"x", method="POST"), timeout=10
        )
    refused.value.close()
    assert refused.value.code == 405


@pytest.mark.parametrize(
    "bad",
    [
        "127.0.0.1:9644",
        "ftp://127.0.0.1:9644",
        "http://127.0.0.1:99999",
        "https://127.0.0.1:9644",  # without a key store
    ],
)
def test_a_bad_http_listener_refuses_to_start_with_one_line(tmp_path, bad):
    argv = [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}"]
    argv += ["--override", f"http.listeners={bad}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, exit_report(result)
    assert result.stderr.count("\n") == 1
    assert "http.listeners" in result.stderr and "Traceback" not in result.stderr


def test_an_http_port_in_use_stops_the_start_with_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}"]
        argv += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"]
        argv += ["--override", f"http.listeners=http://127.0.0.1:{port}"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, exit_report(result)
    assert "failed to start" in result.stderr and "address already in use" in result.stderr.lower()


def test_group_lag_covers_several_groups_over_several_partitions_and_topics(metrics_broker, unique_topic):
    """Two groups, each with committed offsets on every partition of two topics: every offset and lag
    is exposed (a group's offsets are sorted by topic-partition, which must be ordered)."""
    bootstrap = metrics_broker.process.bootstrap
    topics = [f"{unique_topic}-a", f"{unique_topic}-b"]
    _create(bootstrap, topics)
    produce_to_every_partition(bootstrap, topics)
    groups = {
        f"g1-{unique_topic}": committed_offsets(topics, 0),
        f"g2-{unique_topic}": committed_offsets(topics, 1),
    }
    for group, offsets in groups.items():
        commit(bootstrap, group, offsets)
    samples = metrics_broker.scrape()
    for group, offsets in groups.items():
        for (topic, partition), offset in offsets.items():
            labels = {"consumergroup": group, "topic": topic, "partition": str(partition)}
            assert value(samples, "kafka_consumergroup_current_offset", **labels) == offset
            assert value(samples, "kafka_consumergroup_lag", **labels) == RECORDS_PER_PARTITION - offset


def test_metrics_answer_while_groups_rebalance(metrics_broker, unique_topic):
    bootstrap = metrics_broker.process.bootstrap
    topics = [f"{unique_topic}-a", f"{unique_topic}-b"]
    _create(bootstrap, topics)
    produce_to_every_partition(bootstrap, topics)
    commit(bootstrap, f"steady-{unique_topic}", committed_offsets(topics, 0))
    with Rebalancing(bootstrap, f"moving-{unique_topic}", topics, rounds=4) as moving:
        scrapes = scrape_while(metrics_broker.url, moving.busy)
    assert scrapes > 0
    labels = {"consumergroup": f"moving-{unique_topic}", "topic": topics[0], "partition": "2"}
    assert value(metrics_broker.scrape(), "kafka_consumergroup_current_offset", **labels) == 1


def _create(bootstrap: str, topics: list[str]) -> None:
    client = admin(bootstrap)  # kept referenced while its futures are pending
    futures = client.create_topics([NewTopic(t, num_partitions=PARTITIONS) for t in topics])
    for future in futures.values():
        future.result(30)
