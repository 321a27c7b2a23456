"""DescribeTopicPartitions (API 75, KIP-966) with real clients: kafka-python 3's
`KafkaAdminClient.describe_topic_partitions`, checked against confluent-kafka's
`AdminClient.describe_topics` (librdkafka 2.x describes topics with Metadata v12, not API 75).

Apache Kafka's behaviour is the oracle: a small response_partition_limit cuts the answer, next_cursor
resumes it, and the pages together are every partition once, with the leaders, replicas, ISR and topic
id Metadata reports; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and is not created.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicCollection
from kafka import KafkaAdminClient

from tests.compat import helpers
from tests.conftest import topic_name

UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def all_pages(admin: KafkaAdminClient, topics: list[str], limit: int) -> list[dict]:
    """Every response of a describe that follows next_cursor until the answer is whole."""
    pages = [admin.describe_topic_partitions(topics, response_partition_limit=limit)]
    while pages[-1]["next_cursor"] is not None and len(pages) <= 10:
        cursor = pages[-1]["next_cursor"]
        pages.append(admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor))
    return pages


def shape(page: dict) -> tuple[list[tuple[str, list[int]]], dict | None]:
    """The (topic, partition indexes) of a page, and its next cursor."""
    topics = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]]
    return topics, page["next_cursor"]


def as_uuid(topic_id) -> uuid.UUID:
    """A confluent-kafka Uuid (two signed 64-bit halves) as a uuid.UUID."""
    mask = (1 << 64) - 1
    high, low = topic_id.get_most_significant_bits() & mask, topic_id.get_least_significant_bits() & mask
    return uuid.UUID(int=high << 64 | low)


def metadata_view(bootstrap: str, topics: list[str]) -> dict[str, tuple[uuid.UUID, list[tuple]]]:
    """confluent-kafka's describe_topics: per topic, its id and (partition, leader, replicas, isr)."""
    client = helpers.admin(bootstrap)
    futures = client.describe_topics(TopicCollection(topics), request_timeout=helpers.TIMEOUT_S)
    view = {}
    for name, future in futures.items():
        described = future.result(helpers.TIMEOUT_S)
        partitions = [
            (p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in described.partitions
        ]
        view[name] = (as_uuid(described.topic_id), partitions)
    return view


def test_a_small_limit_pages_through_every_partition_as_metadata_reports_it(broker, admin) -> None:
    stem = topic_name("dtp-pages")
    first, second = f"{stem}-a", f"{stem}-b"
    helpers.create_topic(broker.bootstrap, first, 5)
    helpers.create_topic(broker.bootstrap, second, 3)

    pages = all_pages(admin, [second, first], limit=3)

    assert [shape(page) for page in pages] == [
        ([(first, [0, 1, 2])], {"topic_name": first, "partition_index": 3}),
        ([(first, [3, 4]), (second, [0])], {"topic_name": second, "partition_index": 1}),
        ([(second, [1, 2])], None),
    ]
    described: dict[str, tuple[uuid.UUID, list[tuple]]] = {}
    for topic in (t for page in pages for t in page["topics"]):
        assert topic["error_code"] == 0 and topic["is_internal"] is False
        _, partitions = described.setdefault(topic["name"], (topic["topic_id"], []))
        partitions.extend(
            (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in topic["partitions"]
        )
    assert described == metadata_view(broker.bootstrap, [first, second])


def test_an_unknown_topic_is_an_error_and_is_not_created(broker, admin) -> None:
    unknown = topic_name("dtp-unknown")

    result = admin.describe_topic_partitions([unknown])

    assert [(t["name"], t["error_code"], t["partitions"]) for t in result["topics"]] == [
        (unknown, UNKNOWN_TOPIC_OR_PARTITION, [])
    ]
    assert result["next_cursor"] is None
    assert unknown not in helpers.admin(broker.bootstrap).list_topics(timeout=helpers.TIMEOUT_S).topics
