"""DescribeTopicPartitions (API 75, KIP-966) end to end: raw requests to a real broker process.

Kafka's DescribeTopicPartitionsRequestHandler is the oracle: topics answered once each in name order,
every topic when none is listed; at most min(response_partition_limit, max.request.partition.size.limit)
partitions, the cut named by next_cursor (the next topic at partition 0 when the limit is used up
exactly); a cursor resumes there; unknown names are errors and are never created; a cursor naming an
unlisted topic is INVALID_REQUEST.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.broker import BrokerProcess, free_port
from tests.conftest import topic_name
from tests.server.raw_client import RawClient

LIMIT = 5  # the broker's max.request.partition.size.limit
# Every topic operation Kafka reports without an authorizer: READ, WRITE, CREATE, DELETE, ALTER,
# DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes 3-8, 10, 11).
ALL_TOPIC_OPERATIONS = 3576
ZERO_ID = uuid.UUID(int=0)
TIMEOUT_S = 15.0

Request = DescribeTopicPartitionsRequest
Response = DescribeTopicPartitionsResponse


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("broker")
    overrides = {"max.request.partition.size.limit": LIMIT}
    with BrokerProcess(root / "data", overrides=overrides, output_path=root / "broker.out") as process:
        yield process


@pytest.fixture
def client(connect):
    return connect()


def describe(client, *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> Response:
    request = Request(
        topics=[Request.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else Request.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    return client.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request)


def create(client, name: str, partitions: int) -> uuid.UUID:
    """Create the topic and wait until every partition has a leader; its topic id."""
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    (result,) = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic])).topics
    assert result.error_code == ErrorCode.NONE
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        (described,) = metadata(client, name).topics
        if len(described.partitions) == partitions and all(p.error_code == 0 for p in described.partitions):
            return result.topic_id
        time.sleep(0.05)
    raise AssertionError(f"{name} has no leader for all {partitions} partitions after {TIMEOUT_S}s")


def metadata(client, name: str):
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False
    )
    return client.call(ApiKey.METADATA, 12, request)


def page(response: Response) -> tuple[list[tuple[str | None, list[int]]], tuple[str, int] | None]:
    """The (topic, partition indexes) of a response, and its next cursor."""
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]
    cursor = response.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def pair(hint: str) -> tuple[str, str]:
    """Two fresh topic names, the first sorting just before the second."""
    stem = topic_name(hint)
    return f"{stem}-a", f"{stem}-b"


def test_listed_topics_are_described_once_each_in_name_order(client):
    a, b = pair("listed")
    a_id, b_id = create(client, a, 1), create(client, b, 2)

    response = describe(client, b, a, b)

    assert page(response) == ([(a, [0]), (b, [0, 1])], None)
    assert [(t.error_code, t.topic_id, t.is_internal) for t in response.topics] == [
        (ErrorCode.NONE, a_id, False),
        (ErrorCode.NONE, b_id, False),
    ]
    assert [t.topic_authorized_operations for t in response.topics] == [ALL_TOPIC_OPERATIONS] * 2
    for partition in response.topics[1].partitions:
        assert partition == Response.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=partition.partition_index,
            leader_id=0,
            leader_epoch=partition.leader_epoch,
            replica_nodes=[0],
            isr_nodes=[0],
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=[],
        )
        assert partition.leader_epoch >= 0


def test_a_small_limit_pages_through_the_partitions_with_the_cursor(client):
    a, b = pair("paging")
    create(client, a, 3)
    create(client, b, 2)

    assert page(describe(client, a, b, limit=2)) == ([(a, [0, 1])], (a, 2))
    assert page(describe(client, a, b, limit=2, cursor=(a, 2))) == ([(a, [2]), (b, [0])], (b, 1))
    assert page(describe(client, a, b, limit=2, cursor=(b, 1))) == ([(b, [1])], None)
    # The limit used up exactly at the end of a topic: the cursor names the next one at partition 0.
    assert page(describe(client, a, b, limit=3)) == ([(a, [0, 1, 2])], (b, 0))
    assert page(describe(client, a, b, limit=0)) == ([], (a, 0))
    # A cursor past the topic's last partition describes none of it and moves on.
    assert page(describe(client, a, b, limit=2, cursor=(a, 7))) == ([(a, []), (b, [0, 1])], None)


def test_the_broker_limit_caps_the_request_limit(client):
    name = topic_name("capped")
    create(client, name, LIMIT + 2)

    assert page(describe(client, name, limit=2000)) == ([(name, list(range(LIMIT)))], (name, LIMIT))
    assert page(describe(client, name, cursor=(name, LIMIT))) == ([(name, [LIMIT, LIMIT + 1])], None)


def test_no_topics_listed_describes_every_topic_from_the_cursor_on(client):
    a, b = pair("all")
    create(client, a, 3)
    create(client, b, 2)

    topics, cursor = page(describe(client, limit=4, cursor=(a, 1)))

    assert topics == [(a, [1, 2]), (b, [0, 1])]
    assert cursor is None or (cursor[0] > b and cursor[1] == 0)
    everything, _ = page(describe(client))
    names = [name for name, _ in everything]
    assert names == sorted(names) and {a, b} <= set(names)


def test_unknown_and_illegal_names_are_errors_and_are_not_created(client):
    unknown = topic_name("unknown")

    response = describe(client, unknown, "bad/name", "__transaction_state")

    assert [(t.name, t.error_code, t.topic_id, t.is_internal, t.partitions) for t in response.topics] == [
        ("__transaction_state", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_ID, True, []),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_ID, False, []),
        (unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_ID, False, []),
    ]
    # auto.create.topics.enable is on, yet describing created nothing
    (topic,) = metadata(client, unknown).topics
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_cursor_outside_the_listed_topics_or_negative_is_invalid(client):
    a, b = pair("cursor")
    create(client, a, 1)

    refused = describe(client, a, cursor=(b, 0))

    assert [(t.name, t.error_code, t.partitions) for t in refused.topics] == [
        (a, ErrorCode.INVALID_REQUEST, [])
    ]
    assert refused.next_cursor is None
    (negative,) = describe(client, a, cursor=(a, -1)).topics
    assert negative.error_code == ErrorCode.INVALID_REQUEST
    assert page(describe(client, a, cursor=(a, 0))) == ([(a, [0])], None)  # the connection goes on


def test_a_leader_without_an_endpoint_on_the_listener_is_no_leader(tmp_path):
    ports = {name: free_port() for name in ("INTERNAL", "REPLICATION")}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "advertised.listeners": f"INTERNAL://127.0.0.1:{ports['INTERNAL']}",  # REPLICATION is not advertised
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
    }
    with BrokerProcess(tmp_path / "data", port=ports["INTERNAL"], overrides=overrides) as process:
        with (
            RawClient(process.bootstrap) as internal,
            RawClient(f"127.0.0.1:{ports['REPLICATION']}") as other,
        ):
            name = topic_name("unadvertised")
            create(internal, name, 1)

            (seen,) = describe(internal, name).topics[0].partitions
            (unseen,) = describe(other, name).topics[0].partitions

    assert (seen.leader_id, seen.replica_nodes, seen.isr_nodes) == (0, [0], [0])
    assert (unseen.error_code, unseen.leader_id, unseen.replica_nodes, unseen.isr_nodes) == (0, -1, [0], [0])
