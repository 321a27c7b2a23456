"""bench/produce_reads.py's reading of a Produce frame: the (topic, partition) pairs it writes, at every
version odradek serves, from frames the project's own encoder makes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from produce_reads import produce_partitions  # noqa: E402

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import encode_request
from odradek.protocol.headers import RequestHeader, encode_request_header
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch

BATCH = build_batch([SimpleRecord(b"v" * 300)])  # records longer than one varint byte


def frame(api_key: int, version: int, request: object, client_id: str | None = "bench") -> bytes:
    return encode_request_header(RequestHeader(api_key, version, 7, client_id)) + encode_request(
        api_key, version, request
    )


@pytest.mark.parametrize("version", range(3, 12))
def test_every_topic_and_partition_of_a_produce_is_read(version: int) -> None:
    data = [ProduceRequest.PartitionProduceData(index, BATCH) for index in (3, 40)]
    request = ProduceRequest(
        transactional_id="txn" if version % 2 else None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData("orders", partition_data=data),
            ProduceRequest.TopicProduceData("payments", partition_data=data[1:]),
        ],
    )
    assert produce_partitions(frame(ApiKey.PRODUCE, version, request, None if version == 5 else "app")) == [
        (b"orders", 3),
        (b"orders", 40),
        (b"payments", 40),
    ]


def test_other_requests_are_not_produces() -> None:
    assert produce_partitions(frame(ApiKey.FETCH, 12, FetchRequest())) is None
