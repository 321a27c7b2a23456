"""ListOffsets end to end over raw frames: special timestamps, lookups by time, epochs, errors."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from tests.server.raw_client import RawClient
from tests.server.test_produce import create_topic, produce, records

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
T = 1_700_000_000_000


def list_offsets(
    client: RawClient, topic: str, *timestamps: int, version: int = 9, epoch: int = -1, **fields
) -> list[ListOffsetsResponse.ListOffsetsPartitionResponse]:
    partitions = [
        ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=t, current_leader_epoch=epoch)
        for t in timestamps
    ]
    request = ListOffsetsRequest(
        replica_id=fields.pop("replica_id", -1),
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=partitions)],
        **fields,
    )
    (topic_response,) = client.call(ApiKey.LIST_OFFSETS, version, request).topics
    assert topic_response.name == topic
    return topic_response.partitions


def one(client: RawClient, topic: str, timestamp: int, **kwargs) -> tuple[int, int, int]:
    (partition,) = list_offsets(client, topic, timestamp, **kwargs)
    return partition.error_code, partition.offset, partition.timestamp


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


@pytest.fixture
def topic(client: RawClient) -> str:
    name, _ = create_topic(client)
    produce(client, name, records(b"a", b"b", b"c", timestamp=T))  # offsets 0-2 at T..T+2
    produce(client, name, records(b"d", b"e", timestamp=T + 100))  # offsets 3-4 at T+100, T+101
    produce(client, name, records(b"f", timestamp=T + 50))  # offset 5 at T+50
    return name


@pytest.mark.parametrize("version", range(1, 12))
def test_earliest_and_latest_in_every_version(client: RawClient, topic: str, version: int) -> None:
    assert one(client, topic, EARLIEST, version=version) == (ErrorCode.NONE, 0, -1)
    assert one(client, topic, LATEST, version=version) == (ErrorCode.NONE, 6, -1)


def test_latest_carries_the_leader_epoch(client: RawClient, topic: str) -> None:
    (latest,) = list_offsets(client, topic, LATEST, version=4)
    assert latest.leader_epoch >= 0
    assert one(client, topic, LATEST, epoch=latest.leader_epoch) == (ErrorCode.NONE, 6, -1)
    assert one(client, topic, LATEST, epoch=latest.leader_epoch + 1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_lookup_by_timestamp(client: RawClient, topic: str) -> None:
    assert one(client, topic, T - 1000) == (ErrorCode.NONE, 0, T)
    assert one(client, topic, T + 1) == (ErrorCode.NONE, 1, T + 1)
    assert one(client, topic, T + 3) == (ErrorCode.NONE, 3, T + 100)  # first record at or after T+3
    assert one(client, topic, T + 101) == (ErrorCode.NONE, 4, T + 101)
    assert one(client, topic, T + 102) == (ErrorCode.NONE, -1, -1)  # nothing that late


def test_max_timestamp_local_and_tiered(client: RawClient, topic: str) -> None:
    assert one(client, topic, MAX_TIMESTAMP, version=7) == (ErrorCode.NONE, 4, T + 101)
    assert one(client, topic, EARLIEST_LOCAL, version=8) == (ErrorCode.NONE, 0, -1)
    assert one(client, topic, LATEST_TIERED, version=9) == (ErrorCode.NONE, -1, -1)


def test_earliest_pending_upload_is_none_without_tiered_storage(client: RawClient, topic: str) -> None:
    """v11's -6 answers offset, timestamp and leader epoch -1, as Kafka 4.4 does for a topic without
    remote storage; v10's timeout_ms (for remote reads) changes nothing."""
    (pending,) = list_offsets(client, topic, EARLIEST_PENDING_UPLOAD, version=11, timeout_ms=1)
    assert (pending.error_code, pending.offset, pending.timestamp, pending.leader_epoch) == (0, -1, -1, -1)
    assert one(client, topic, LATEST_TIERED, version=10, timeout_ms=1) == (ErrorCode.NONE, -1, -1)
    # before v11 it is looked up as a timestamp: the first record at or after it
    assert one(client, topic, EARLIEST_PENDING_UPLOAD, version=10) == (ErrorCode.NONE, 0, T)


def test_read_committed_and_replica_requests(client: RawClient, topic: str) -> None:
    assert one(client, topic, LATEST, isolation_level=1) == (ErrorCode.NONE, 6, -1)
    assert one(client, topic, LATEST, replica_id=-2) == (ErrorCode.NONE, 6, -1)


def test_empty_topic(client: RawClient) -> None:
    name, _ = create_topic(client)
    assert one(client, name, EARLIEST) == (ErrorCode.NONE, 0, -1)
    assert one(client, name, LATEST) == (ErrorCode.NONE, 0, -1)
    assert one(client, name, T) == (ErrorCode.NONE, -1, -1)
    assert one(client, name, MAX_TIMESTAMP) == (ErrorCode.NONE, -1, -1)


def test_unknown_topic_and_duplicate_partition(client: RawClient, topic: str) -> None:
    assert one(client, "no-such-topic-here", LATEST)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    first, second = list_offsets(client, topic, LATEST, EARLIEST)
    assert first.error_code == second.error_code == ErrorCode.INVALID_REQUEST


def test_version_zero_is_unsupported(client: RawClient, topic: str) -> None:
    (partition,) = list_offsets(client, topic, LATEST, version=0)
    assert partition.error_code == ErrorCode.UNSUPPORTED_VERSION
