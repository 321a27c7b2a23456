"""confluent-kafka (librdkafka) AdminClient against a real broker.

Apache Kafka's behaviour is the oracle: CreateTopics applies configs, creates nothing under
validate_only and refuses bad configs with INVALID_CONFIG; DescribeConfigs lists overrides with their
source and the broker's defaults; CreatePartitions grows a topic; DeleteTopics removes it; Metadata
and DescribeCluster name the one broker as controller.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.compat import helpers

TIMEOUT_S = helpers.TIMEOUT_S


@pytest.fixture
def admin(broker) -> AdminClient:
    return helpers.admin(broker.bootstrap)


def create(admin: AdminClient, topic: str, partitions: int = 1, validate_only: bool = False, **config: str):
    new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)
    future = admin.create_topics([new_topic], validate_only=validate_only, operation_timeout=TIMEOUT_S)[topic]
    return future.result(TIMEOUT_S)


def describe_topic_configs(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def wait_until_gone(admin: AdminClient, topic: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while topic in admin.list_topics(timeout=TIMEOUT_S).topics and time.monotonic() < deadline:
        time.sleep(0.1)


def test_create_topic_with_configs_shows_overrides(admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic, 3, **{"retention.ms": "7200000", "segment.bytes": "1048576"})

    entries = describe_topic_configs(admin, unique_topic)
    for name, value in {"retention.ms": "7200000", "segment.bytes": "1048576"}.items():
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"  # Kafka's default, not overridden
    assert entries["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    topic = admin.list_topics(unique_topic, timeout=TIMEOUT_S).topics[unique_topic]
    assert sorted(topic.partitions) == [0, 1, 2]


def test_validate_only_creates_nothing(admin: AdminClient, unique_topic: str) -> None:
    assert create(admin, unique_topic, 2, validate_only=True) is None

    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert unique_topic not in topics


@pytest.mark.parametrize(
    "config",
    [{"cleanup.policy": "sometimes"}, {"retention.ms": "soon"}, {"no.such.topic.config": "1"}],
    ids=["bad-enum", "bad-long", "unknown-key"],
)
def test_bad_config_is_invalid_config(admin: AdminClient, unique_topic: str, config: dict) -> None:
    with pytest.raises(KafkaException) as excinfo:
        create(admin, unique_topic, 1, **config)

    assert excinfo.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert unique_topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_duplicate_create_is_topic_already_exists(admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic)

    with pytest.raises(KafkaException) as excinfo:
        create(admin, unique_topic)

    assert excinfo.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_describe_broker_configs(broker, admin: AdminClient) -> None:
    node_id = admin.list_topics(timeout=TIMEOUT_S).controller_id
    resource = ConfigResource(ResourceType.BROKER, str(node_id))

    entries = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)

    assert entries["log.segment.bytes"].value == str(1 << 30)
    assert entries["message.max.bytes"].value == "1048588"
    assert entries["num.partitions"].value == "1"


def test_create_partitions_grows_topic(broker, admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic, 2)

    futures = admin.create_partitions([NewPartitions(unique_topic, 5)], operation_timeout=TIMEOUT_S)
    futures[unique_topic].result(TIMEOUT_S)

    helpers.wait_for_leaders(broker.bootstrap, unique_topic, 5)
    offsets = helpers.produce(broker.bootstrap, unique_topic, [b"in-new-partition"], partition=4)
    assert offsets == [0]


def test_create_partitions_cannot_shrink(admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic, 3)

    futures = admin.create_partitions([NewPartitions(unique_topic, 2)], operation_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as excinfo:
        futures[unique_topic].result(TIMEOUT_S)

    assert excinfo.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_delete_topics(broker, admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"gone soon"])

    admin.delete_topics([unique_topic], operation_timeout=TIMEOUT_S)[unique_topic].result(TIMEOUT_S)

    wait_until_gone(admin, unique_topic)
    assert unique_topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_delete_missing_topic_is_unknown_topic(admin: AdminClient, unique_topic: str) -> None:
    future = admin.delete_topics([unique_topic], operation_timeout=TIMEOUT_S)[unique_topic]

    with pytest.raises(KafkaException) as excinfo:
        future.result(TIMEOUT_S)

    assert excinfo.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_list_topics_and_describe_cluster(broker, admin: AdminClient, unique_topic: str) -> None:
    create(admin, unique_topic, 2)
    host, port = broker.bootstrap.rsplit(":", 1)

    metadata = admin.list_topics(timeout=TIMEOUT_S)
    cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)

    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(host, int(port))]
    assert sorted(metadata.topics[unique_topic].partitions) == [0, 1]
    assert [(n.host, n.port) for n in cluster.nodes] == [(host, int(port))]
    assert cluster.controller.id == metadata.controller_id == cluster.nodes[0].id
    assert cluster.cluster_id and metadata.cluster_id == cluster.cluster_id
