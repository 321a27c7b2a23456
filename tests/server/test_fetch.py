"""Fetch end to end over raw frames: versions 4-18, topic ids, long poll, limits, errors (sessions:
test_fetch_sessions.py)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.record import decode_records
from odradek.replication.types import FetchPartitionResult
from odradek.server.handlers.fetch import _answerer, _partition
from odradek.storage.txn_index import AbortedTxn
from tests.server.raw_client import RawClient
from tests.server.test_produce import create_topic, produce, produce_request, records

FETCH_VERSIONS = range(4, 19)


def fetch(
    client: RawClient,
    topic: str | uuid.UUID,
    offset: int = 0,
    *,
    version: int | None = None,
    partitions: tuple[int, ...] = (0,),
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 1 << 30,
    min_bytes: int = 0,
    max_wait_ms: int = 0,
    **fields,
) -> FetchResponse:
    parts = [
        FetchRequest.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=partition_max_bytes)
        for p in partitions
    ]
    by_id = isinstance(topic, uuid.UUID)
    version = version if version is not None else (17 if by_id else 12)
    fetch_topic = FetchRequest.FetchTopic(
        topic="" if by_id else topic, topic_id=topic if by_id else uuid.UUID(int=0), partitions=parts
    )
    request = FetchRequest(
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, topics=[fetch_topic], **fields
    )
    return client.call(ApiKey.FETCH, version, request)


def only_partition(response: FetchResponse) -> FetchResponse.PartitionData:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_every_version_returns_the_records(client: RawClient, version: int) -> None:
    name, topic_id = create_topic(client)
    produce(client, name, records(b"one", b"two"))
    produce(client, name, records(b"three"))
    response = fetch(client, topic_id if version >= 13 else name, version=version)
    assert response.error_code == ErrorCode.NONE and response.session_id == 0
    (topic,) = response.responses
    assert (topic.topic_id if version >= 13 else topic.topic) == (topic_id if version >= 13 else name)
    (partition,) = topic.partitions
    assert (partition.error_code, partition.high_watermark, partition.last_stable_offset) == (0, 3, 3)
    assert (
        partition.log_start_offset == (0 if version >= 5 else -1) and partition.preferred_read_replica == -1
    )
    assert partition.aborted_transactions is None
    got = decode_records(bytes(partition.records))
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, b"k", b"one"),
        (1, b"k", b"two"),
        (2, b"k", b"three"),
    ]


def test_fetch_from_the_middle_and_at_the_end(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"a"))
    produce(client, name, records(b"b"))
    assert [r.value for r in decode_records(bytes(only_partition(fetch(client, name, 1)).records))] == [b"b"]
    at_end = only_partition(fetch(client, name, 2))
    assert at_end.error_code == ErrorCode.NONE and bytes(at_end.records) == b""


def test_offset_out_of_range_reports_the_offsets(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"a", b"b"))
    partition = only_partition(fetch(client, name, 7))
    assert partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) == (2, 2, 0)
    assert bytes(partition.records) == b""


def test_unknown_topic_name_and_id(client: RawClient) -> None:
    missing = only_partition(fetch(client, "no-such-topic-here", version=12))
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    by_id = only_partition(fetch(client, uuid.uuid4(), version=13))
    assert by_id.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_leader_epoch_fencing(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"a"))

    def with_epoch(epoch: int) -> int:
        part = FetchRequest.FetchPartition(partition=0, current_leader_epoch=epoch, partition_max_bytes=1000)
        request = FetchRequest(topics=[FetchRequest.FetchTopic(topic=name, partitions=[part])])
        return client.call(ApiKey.FETCH, 12, request).responses[0].partitions[0].error_code

    assert with_epoch(-1) == ErrorCode.NONE
    assert with_epoch(1000) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_long_poll_is_answered_when_data_arrives(client: RawClient, connect) -> None:
    name, _ = create_topic(client)
    answer: list[FetchResponse] = []
    poller = threading.Thread(
        target=lambda: answer.append(fetch(client, name, 0, min_bytes=1, max_wait_ms=30_000))
    )
    poller.start()
    producer = connect()
    produce(producer, name, records(b"wake up"))
    poller.join(60)
    assert not poller.is_alive()
    assert [r.value for r in decode_records(bytes(only_partition(answer[0]).records))] == [b"wake up"]


def test_long_poll_expires_with_what_is_there(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"small"))
    partition = only_partition(fetch(client, name, 0, min_bytes=1 << 20, max_wait_ms=50))
    assert [r.value for r in decode_records(bytes(partition.records))] == [b"small"]
    empty = only_partition(fetch(client, name, 1, min_bytes=1, max_wait_ms=50))
    assert (empty.error_code, empty.high_watermark, bytes(empty.records)) == (ErrorCode.NONE, 1, b"")


def test_response_and_partition_limits(client: RawClient) -> None:
    name, _ = create_topic(client, partitions=2)
    batch = records(b"x" * 500)
    for partition in (0, 0, 1):
        response = client.call(ApiKey.PRODUCE, 11, produce_request(name, batch, partition=partition))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    size = len(batch)

    def sizes(**limits) -> list[int]:
        response = fetch(client, name, partitions=(0, 1), **limits)
        return [len(bytes(p.records)) for p in response.responses[0].partitions]

    assert sizes() == [2 * size, size]
    assert sizes(max_bytes=10) == [size, 0]  # the first batch comes whatever the limits
    assert sizes(partition_max_bytes=10) == [size, 0]
    assert sizes(partition_max_bytes=size) == [size, size]
    assert sizes(max_bytes=2 * size) == [2 * size, 0]


def test_read_committed_reads_to_the_last_stable_offset(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"a"))
    partition = only_partition(fetch(client, name, isolation_level=1))
    assert partition.aborted_transactions == [] and partition.last_stable_offset == 1
    assert [r.value for r in decode_records(bytes(partition.records))] == [b"a"]


def test_version_three_is_unsupported(client: RawClient) -> None:
    name, _ = create_topic(client)
    partition = only_partition(fetch(client, name, version=3))
    assert partition.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_replica_gets_no_records(client: RawClient) -> None:
    name, topic_id = create_topic(client)
    produce(client, name, records(b"a"))
    partition = only_partition(fetch(client, topic_id, version=14, replica_id=5))
    assert partition.error_code == ErrorCode.NONE and bytes(partition.records) == b""


def follower_wait(client: RawClient, topic_id: uuid.UUID, version: int, high_watermark: int) -> float:
    """Seconds a follower's fetch at the log end (min_bytes 1, max_wait 600 ms) takes to answer."""
    partition = FetchRequest.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)
    partition.high_watermark = high_watermark
    request = FetchRequest(
        replica_state=FetchRequest.ReplicaState(replica_id=5, replica_epoch=1),
        max_wait_ms=600,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[partition])],
    )
    started = time.monotonic()
    response = client.call(ApiKey.FETCH, version, request)
    assert only_partition(response).error_code == ErrorCode.NONE
    return time.monotonic() - started


def test_v18_follower_behind_the_high_watermark_is_answered_at_once(client: RawClient) -> None:
    name, topic_id = create_topic(client)
    produce(client, name, records(b"a"))  # high watermark 1
    assert follower_wait(client, topic_id, 18, high_watermark=0) < 0.4  # KIP-1166: no parking
    assert follower_wait(client, topic_id, 18, high_watermark=1) >= 0.5  # up to date: waits
    assert follower_wait(client, topic_id, 17, high_watermark=0) >= 0.5  # v17 carries no watermark


def test_read_committed_answers_carry_the_aborted_transactions_read() -> None:
    result = FetchPartitionResult("t", 0, 0, 9, 7, 0, aborted_transactions=[AbortedTxn(5, 2, 6, 7)])
    committed = _partition(result, committed=True)
    assert committed.aborted_transactions == [FetchResponse.AbortedTransaction(5, 2)]
    assert committed.last_stable_offset == 7
    assert _partition(result, committed=False).aborted_transactions is None
    assert _partition(result._replace(aborted_transactions=None), committed=True).aborted_transactions == []


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("committed", [False, True])
def test_an_idle_partition_answer_is_the_one_the_codec_builds(version: int, committed: bool) -> None:
    """The pre-encoded answer of a read with nothing new decodes to the answer built field by field."""
    idle = FetchPartitionResult("t", 7, 0, 9, 8, 3)
    answer = _answerer(version, committed)(idle)
    assert type(answer) is bytes
    built = FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse("t", partitions=[_partition(idle, committed)])]
    )
    packed = FetchResponse(responses=[FetchResponse.FetchableTopicResponse("t", partitions=[answer])])
    assert encode_response(ApiKey.FETCH, version, packed) == encode_response(ApiKey.FETCH, version, built)
    (topic,) = decode_response(
        ApiKey.FETCH, version, encode_response(ApiKey.FETCH, version, packed)[0]
    ).responses
    (partition,) = topic.partitions
    assert (partition.partition_index, partition.high_watermark, partition.last_stable_offset) == (7, 9, 8)
    assert partition.log_start_offset == (3 if version >= 5 else -1)
    assert partition.aborted_transactions == ([] if committed else None)


def test_a_read_with_records_errors_or_aborts_is_answered_field_by_field() -> None:
    answer = _answerer(16, True)
    slice_ = FileSlice(0, 0, 10)
    assert type(answer(FetchPartitionResult("t", 0, 0, 9, 9, 0, (slice_,), 0))) is FetchResponse.PartitionData
    assert (
        type(answer(FetchPartitionResult("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)))
        is FetchResponse.PartitionData
    )
    aborted = FetchPartitionResult("t", 0, 0, 9, 7, 0, aborted_transactions=[AbortedTxn(5, 2, 6, 7)])
    assert answer(aborted).aborted_transactions == [FetchResponse.AbortedTransaction(5, 2)]


def test_a_fetch_at_the_end_over_the_wire_answers_every_partition(client: RawClient) -> None:
    name, _ = create_topic(client, partitions=3)
    produce(client, name, records(b"a"), partition=1)
    for level in (0, 1):
        response = fetch(client, name, 1, partitions=(1,), isolation_level=level, version=12)
        partition = only_partition(response)
        assert (partition.partition_index, partition.error_code, partition.high_watermark) == (1, 0, 1)
        assert partition.aborted_transactions == ([] if level else None) and bytes(partition.records) == b""
