"""Produce end to end over raw frames: every served version, acks 0/1/-1, and Kafka's error answers."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.record import decode_records
from tests.conftest import topic_name
from tests.server.raw_client import RawClient

PRODUCE_VERSIONS = range(3, 12)


def create_topic(client: RawClient, partitions: int = 1, **configs: str) -> tuple[str, object]:
    """A fresh topic; returns its name and topic id."""
    name = topic_name("data")
    entries = [
        CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v)
        for k, v in configs.items()
    ]
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, configs=entries
    )
    (result,) = client.call(
        ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic], timeout_ms=5000)
    ).topics
    assert result.error_code == ErrorCode.NONE, result.error_message
    return name, result.topic_id


def records(*values: bytes, timestamp: int = 1_700_000_000_000) -> bytes:
    return build_batch([SimpleRecord(v, key=b"k", timestamp=timestamp + i) for i, v in enumerate(values)])


def produce_request(
    topic: str, data: bytes | None, acks: int = 1, partition: int = 0, **fields
) -> ProduceRequest:
    partition_data = ProduceRequest.PartitionProduceData(index=partition, records=data)
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[partition_data])],
        **fields,
    )


def produce(client: RawClient, topic: str, data: bytes | None, acks: int = 1, version: int = 11, **fields):
    response = client.call(ApiKey.PRODUCE, version, produce_request(topic, data, acks, **fields))
    (topic_response,) = response.responses
    assert topic_response.name == topic
    (partition,) = topic_response.partition_responses
    return partition


def fetch_all(client: RawClient, topic: str, offset: int = 0, partition: int = 0) -> bytes:
    fetch_partition = FetchRequest.FetchPartition(
        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fetch_partition])],
    )
    (topic_response,) = client.call(ApiKey.FETCH, 12, request).responses
    (partition_response,) = topic_response.partitions
    assert partition_response.error_code == ErrorCode.NONE
    return bytes(partition_response.records or b"")


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_every_version_appends_and_answers_offsets(client: RawClient, version: int) -> None:
    name, _ = create_topic(client)
    first = produce(client, name, records(b"a", b"b"), version=version)
    second = produce(client, name, records(b"c"), acks=-1, version=version)
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 2)
    assert second.log_append_time_ms == -1  # CreateTime topic
    assert second.log_start_offset == (0 if version >= 5 else -1)
    assert [r.value for r in decode_records(fetch_all(client, name))] == [b"a", b"b", b"c"]


def test_log_append_time_topic_reports_the_append_time(client: RawClient) -> None:
    name, _ = create_topic(client, message_timestamp_type="LogAppendTime")
    result = produce(client, name, records(b"x", timestamp=5))
    assert result.error_code == ErrorCode.NONE and result.log_append_time_ms > 1_600_000_000_000
    (stored,) = decode_records(fetch_all(client, name))
    assert stored.timestamp == result.log_append_time_ms


def test_acks_zero_sends_no_response(client: RawClient) -> None:
    name, _ = create_topic(client)
    client.send(ApiKey.PRODUCE, 11, produce_request(name, records(b"quiet"), acks=0))
    metadata_id = client.send(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    answered, _ = client.read_response(ApiKey.METADATA, 12)
    assert answered == metadata_id  # the produce got no answer of its own
    assert [r.value for r in decode_records(fetch_all(client, name))] == [b"quiet"]


def test_acks_zero_failure_closes_the_connection(client: RawClient) -> None:
    client.send(ApiKey.PRODUCE, 11, produce_request(topic_name("missing"), records(b"lost"), acks=0))
    assert client.is_closed_by_peer()


def test_invalid_acks(client: RawClient) -> None:
    name, _ = create_topic(client)
    result = produce(client, name, records(b"x"), acks=2)
    assert result.error_code == ErrorCode.INVALID_REQUIRED_ACKS and result.base_offset == -1
    assert fetch_all(client, name) == b""


def test_unknown_topic_is_not_auto_created(client: RawClient) -> None:
    name = topic_name("missing")
    assert produce(client, name, records(b"x")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False
    )
    (topic,) = client.call(ApiKey.METADATA, 12, request).topics
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_unknown_partition(client: RawClient) -> None:
    name, _ = create_topic(client)
    response = client.call(ApiKey.PRODUCE, 11, produce_request(name, records(b"x"), partition=3))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_corrupt_batch(client: RawClient) -> None:
    name, _ = create_topic(client)
    corrupt = bytearray(records(b"payload"))
    corrupt[-2] ^= 0x55
    result = produce(client, name, bytes(corrupt))
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE and result.error_message
    assert produce(client, name, None).error_code == ErrorCode.INVALID_RECORD
    assert fetch_all(client, name) == b""


def test_batch_larger_than_max_message_bytes(client: RawClient) -> None:
    name, _ = create_topic(client, max_message_bytes="200")
    assert produce(client, name, records(b"x" * 300)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(client, name, records(b"x" * 10)).error_code == ErrorCode.NONE


def test_acks_all_below_min_insync_replicas(client: RawClient) -> None:
    name, _ = create_topic(client, min_insync_replicas="2")
    assert produce(client, name, records(b"x"), acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(client, name, records(b"y"), acks=1).base_offset == 0


def test_plain_records_with_a_transactional_id_are_appended(client: RawClient) -> None:
    name, _ = create_topic(client)
    result = produce(client, name, records(b"x"), transactional_id="txn")
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)


def test_transactional_batches_without_a_transactional_id_are_refused(client: RawClient) -> None:
    name, _ = create_topic(client)
    plain = records(b"x")
    transactional = build_batch(
        [SimpleRecord(b"t", timestamp=1_700_000_000_000)],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    result = produce(client, name, plain + transactional)
    assert result.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert fetch_all(client, name) == b""


def test_internal_topic_is_refused_to_clients(client: RawClient) -> None:
    offsets_topic = MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")
    client.call(ApiKey.METADATA, 12, MetadataRequest(topics=[offsets_topic], allow_auto_topic_creation=True))
    result = produce(client, "__consumer_offsets", records(b"x"))
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_version_two_is_unsupported(client: RawClient) -> None:
    name, _ = create_topic(client)
    assert produce(client, name, records(b"x"), version=2).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert fetch_all(client, name) == b""


def test_several_topics_and_partitions_in_one_request(client: RawClient) -> None:
    first, _ = create_topic(client, partitions=2)
    second, _ = create_topic(client)
    data = ProduceRequest.PartitionProduceData
    request = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=first,
                partition_data=[data(index=0, records=records(b"a")), data(index=1, records=records(b"b"))],
            ),
            ProduceRequest.TopicProduceData(
                name=second, partition_data=[data(index=0, records=records(b"c", b"d"))]
            ),
        ],
    )
    response = client.call(ApiKey.PRODUCE, 11, request)
    answered = {
        (t.name, p.index): (p.error_code, p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    }
    assert answered == {(first, 0): (0, 0), (first, 1): (0, 0), (second, 0): (0, 0)}
    assert [t.name for t in response.responses] == [first, second]
    assert [r.value for r in decode_records(fetch_all(client, first, partition=1))] == [b"b"]
