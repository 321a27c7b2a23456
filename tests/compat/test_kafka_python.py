"""kafka-python (3.x) against a real broker: producer acks and codecs, assign+seek consumer, admin.

Apache Kafka's behaviour is the oracle: every record reads back byte for byte (key, value, headers,
CreateTime timestamp) at dense offsets; compressed batches are stored as produced; admin operations
have the effects Kafka documents (validate_only creates nothing, deleted topics disappear).
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from tests.compat import helpers, wire
from tests.compat.helpers import Sample

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def produce(bootstrap: str, topic: str, samples: list[Sample], **config: object) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **config})
    try:
        futures = [
            producer.send(
                topic, s.value, s.key, headers=list(s.headers), partition=0, timestamp_ms=s.timestamp
            )
            for s in samples
        ]
        producer.flush(helpers.TIMEOUT_S)
        return [f.get(helpers.TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(helpers.TIMEOUT_S)


def consume(bootstrap: str, topic: str, count: int, **config: object) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **config)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        records: list = []
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records += batch
        return records
    finally:
        consumer.close()


def as_samples(records: list) -> list[Sample]:
    return [Sample(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]


@pytest.mark.parametrize(
    "config",
    [
        {"acks": 0},
        {"acks": 1},
        {"acks": "all", "enable_idempotence": False},
        {"acks": "all"},  # kafka-python 3.x's default: an idempotent producer (InitProducerId first)
    ],
    ids=["acks0", "acks1", "acks-all", "acks-all-idempotent"],
)
def test_round_trip_per_acks(broker, unique_topic: str, config: dict) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    samples = helpers.sample_records()

    offsets = produce(broker.bootstrap, unique_topic, samples, **config)
    records = consume(broker.bootstrap, unique_topic, len(samples))

    if config["acks"] != 0:  # with acks=0 the producer never learns an offset
        assert offsets == list(range(len(samples)))
    assert [r.offset for r in records] == list(range(len(samples)))
    helpers.assert_same_records(samples, as_samples(records))


@pytest.mark.parametrize("codec", sorted(CODEC_IDS))
def test_compressed_batches_round_trip_and_stay_compressed(broker, unique_topic: str, codec: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    samples = helpers.sample_records(60)

    produce(broker.bootstrap, unique_topic, samples, acks=1, compression_type=codec, linger_ms=50)
    records = consume(broker.bootstrap, unique_topic, len(samples))

    helpers.assert_same_records(samples, as_samples(records))
    with wire.Connection(broker.bootstrap) as conn:
        stored = wire.batch_headers(conn.fetch(unique_topic, 0, 0).records)
    assert stored and {b.compression for b in stored} == {CODEC_IDS[codec]}


def test_one_mebibyte_message(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, config={"max.message.bytes": str(2 << 20)})
    big = Sample(b"big", bytes(range(256)) * 4096, (("h", b"1"),), int(time.time() * 1000))
    assert len(big.value or b"") == 1 << 20

    offsets = produce(broker.bootstrap, unique_topic, [big], acks=1, max_request_size=3 << 20)
    records = consume(
        broker.bootstrap, unique_topic, 1, max_partition_fetch_bytes=3 << 20, fetch_max_bytes=4 << 20
    )

    assert offsets == [0]
    helpers.assert_same_records([big], as_samples(records))


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def test_admin_create_with_configs_and_describe(admin: KafkaAdminClient, unique_topic: str) -> None:
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    result = admin.create_topics(
        {unique_topic: {"num_partitions": 3, "replication_factor": 1, "configs": configs}}
    )
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(unique_topic, 0)]

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, unique_topic)])
    entries = described["topic"][unique_topic]
    assert {k: entries[k]["value"] for k in configs} == configs
    topic = admin.describe_topics([unique_topic])[0]
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]


def test_admin_validate_only_creates_nothing(admin: KafkaAdminClient, unique_topic: str) -> None:
    result = admin.create_topics(
        {unique_topic: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True
    )
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(unique_topic, 0)]
    assert unique_topic not in admin.list_topics()


def test_admin_create_partitions_and_delete(broker, admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics({unique_topic: {"num_partitions": 1, "replication_factor": 1}})
    helpers.wait_for_leaders(broker.bootstrap, unique_topic, 1)

    admin.create_partitions({unique_topic: 4})
    helpers.wait_for_leaders(broker.bootstrap, unique_topic, 4)
    assert unique_topic in admin.list_topics()

    admin.delete_topics([unique_topic])
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while unique_topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert unique_topic not in admin.list_topics()


def test_admin_describe_cluster(broker, admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    host, port = broker.bootstrap.rsplit(":", 1)
    brokers = [(b["host"], b["port"]) for b in cluster["brokers"]]
    assert brokers == [(host, int(port))]
    assert cluster["controller_id"] == cluster["brokers"][0]["broker_id"]
    assert cluster["cluster_id"]
