"""A secured cluster: three brokers on a real ZooKeeper whose inter-broker listener is SSL
(security.inter.broker.protocol=SSL, ssl.client.auth=required), so the controller's requests, the
replica fetchers and AlterPartition all go over mutual TLS, each broker presenting its certificate.
Each broker also has a PLAINTEXT listener, which the harness uses to see the cluster form; clients
use the SSL listeners."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.security.tls_broker import DebugBrokerProcess, Pki, confluent_config, make_pki

pytestmark = pytest.mark.slow

RECORDS = 100


class SslCluster(LocalCluster):
    """A LocalCluster whose brokers listen on PLAINTEXT (the harness's port) and SSL, at DEBUG."""

    ssl_ports: dict[int, int]

    def broker(self, broker_id: int, data: str | None = None) -> BrokerProcess:
        plain = super().broker(broker_id, data)
        ssl_port = self.ssl_ports.setdefault(broker_id, free_port())
        overrides = {
            **plain.overrides,
            "listeners": f"PLAINTEXT://127.0.0.1:{plain.port},SSL://127.0.0.1:{ssl_port}",
        }
        return DebugBrokerProcess(plain.data_dir, port=plain.port, broker_id=broker_id, overrides=overrides)

    @property
    def ssl_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ssl_ports.values())


@pytest.fixture
def secured(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[tuple[SslCluster, Pki]]:
    pki = make_pki(tmp_path / "certs")
    overrides = {
        **pki.ssl_settings(client_auth="required"),
        "security.inter.broker.protocol": "SSL",
        "replica.fetch.backoff.ms": 200,
    }
    cluster = SslCluster(
        tmp_path / "cluster",
        3,
        zookeeper_connect=zookeeper.connect_string,
        session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
        overrides=overrides,
    )
    cluster.ssl_ports = {}
    try:
        cluster.start()
        cluster.wait_for_controller()
        yield cluster, pki
    finally:
        cluster.close()


def test_brokers_replicate_over_mutual_tls(secured, unique_topic):
    cluster, pki = secured
    client = pki.ca.issue("app")
    config = {**confluent_config(cluster.ssl_bootstrap, pki.ca.cert_path, client), "log_level": 0}
    topic = NewTopic(
        unique_topic, num_partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    admin = AdminClient(config)
    admin.create_topics([topic], operation_timeout=30)[unique_topic].result(30)
    eventually(lambda: len((cluster.state(unique_topic, 0) or {}).get("isr", ())) == 3, 30, "ISR of 3")

    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(unique_topic, str(i).encode())
    assert producer.flush(30) == 0

    registration = cluster.read("/brokers/ids/1")
    assert registration["listener_security_protocol_map"]["SSL"] == "SSL"
    # the controller's requests reach every other broker, the followers' fetches reach the leader:
    # each over mutual TLS, the peer named by its certificate
    leader, controller = cluster.state(unique_topic, 0)["leader"], cluster.controller()
    for broker_id, process in cluster.brokers.items():
        if broker_id != controller or broker_id == leader:
            log = process.output_path.read_text(errors="replace")
            assert "principal User:CN=broker" in log, f"broker {broker_id} saw no broker over mutual TLS"

    eventually(lambda: len(cluster.state(unique_topic, 0)["isr"]) == 3, 30, "every follower caught up")
    cluster.brokers[leader].kill()
    eventually(
        lambda: cluster.state(unique_topic, 0)["leader"] not in (leader, -1), 30, "a new leader elected"
    )
    survivors = ",".join(f"127.0.0.1:{port}" for b, port in cluster.ssl_ports.items() if b != leader)
    consumer = Consumer(
        {**config, "bootstrap.servers": survivors, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([unique_topic])
    values, deadline = [], time.monotonic() + 60
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(int(message.value()))
    finally:
        consumer.close()
    assert values == list(range(RECORDS))
