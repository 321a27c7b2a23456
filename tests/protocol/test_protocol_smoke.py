"""Smoke test: the codec round-trips a produce/fetch exchange and every default message."""

from __future__ import annotations

import pytest

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import DATA_SPECS, MESSAGE_SPECS, FetchResponse, ProduceRequest
from odradek.protocol.primitives import FileSlice

ALL_SPECS = [s for pair in MESSAGE_SPECS.values() for s in pair] + list(DATA_SPECS.values())


def test_produce_request_round_trip_keeps_records_zero_copy() -> None:
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders", partition_data=[ProduceRequest.PartitionProduceData(index=3, records=b"abc")]
            )
        ],
    )
    payload = codec.encode_request(ApiKey.PRODUCE, 9, request)
    decoded = codec.decode_request(ApiKey.PRODUCE, 9, payload)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is not None
    assert bytes(records) == b"abc"
    assert decoded.acks == -1 and decoded.topic_data[0].name == "orders"


def test_fetch_response_keeps_file_slices_as_separate_chunks() -> None:
    part = FetchResponse.PartitionData(partition_index=0, high_watermark=10, records=FileSlice(5, 100, 42))
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])
    chunks = codec.encode_response(ApiKey.FETCH, 12, response)
    assert [type(c) for c in chunks] == [bytes, FileSlice, bytes]
    assert chunks[1] == FileSlice(5, 100, 42)
    assert codec.encoded_size(chunks) == len(chunks[0]) + 42 + len(chunks[2])


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name)
def test_default_message_round_trips_at_every_version(spec) -> None:
    for version in range(spec.valid_versions.lo, spec.valid_versions.hi + 1):
        message = spec.cls()
        assert codec.decode_message(spec, version, codec.encode_message(spec, version, message)) == message
