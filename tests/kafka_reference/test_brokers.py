"""Apache Kafka itself, fetched by tools/kafka_reference.py, starts and serves a Kafka client: 3.9 in
ZooKeeper mode on the suite's ZooKeeper, 4.x in KRaft combined mode, each a single broker taking a
confluent-kafka produce and consume round trip (the reference the other side-by-side tests compare
odradek with)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek.testing import kafka_reference
from odradek.testing.zookeeper import ZooKeeperServer
from tests.kafka_reference.conftest import require_kafka


def _round_trip(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(3):
        producer.produce(topic, key=f"k{index}".encode(), value=f"v{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    received = []
    try:
        while len(received) < 3:
            message = consumer.poll(30)
            assert message is not None, f"nothing consumed within 30 s; got {received}"
            assert message.error() is None, message.error()
            received.append((message.key(), message.value()))
    finally:
        consumer.close()
    return received


def test_kafka_3_9_broker_on_zookeeper(zookeeper: ZooKeeperServer, tmp_path: Path, unique_topic: str) -> None:
    require_kafka(kafka_reference.ZOOKEEPER_VERSION)
    version = kafka_reference.ZOOKEEPER_VERSION
    connect = zookeeper.connect_string + "/kafka-3-9"
    with kafka_reference.KafkaBroker(tmp_path, version, zookeeper_connect=connect) as broker:
        assert _round_trip(broker.bootstrap, unique_topic) == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]
        assert broker.is_running()
    assert not broker.is_running()


def test_kafka_4_kraft_broker(tmp_path: Path, unique_topic: str) -> None:
    require_kafka(kafka_reference.KRAFT_VERSION)
    with kafka_reference.KafkaBroker(tmp_path, kafka_reference.KRAFT_VERSION) as broker:
        assert _round_trip(broker.bootstrap, unique_topic) == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]
    assert (tmp_path / "data" / "meta.properties").read_text().count(broker.cluster_id) == 1


def test_a_3_9_broker_needs_zookeeper(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ZooKeeper mode"):
        kafka_reference.KafkaBroker(tmp_path, kafka_reference.ZOOKEEPER_VERSION)


def test_cluster_ids_are_kafka_uuids() -> None:
    ids = {kafka_reference.random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(text) == 22 and not text.startswith("-") for text in ids)
