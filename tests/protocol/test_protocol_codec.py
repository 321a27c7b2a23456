"""Codec behaviour on hand-computed frames and edge cases: golden bytes, tagged fields, hostile
lengths, nulls, records chunks and version handling."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    FetchResponse,
    FetchSnapshotResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from odradek.protocol.primitives import (
    FileSlice,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedVersionError,
)

# ApiVersions v3 as librdkafka sends it: request header v2 then the flexible body.
LIBRDKAFKA_API_VERSIONS_V3 = (
    bytes.fromhex("0012 0003 00000001 0007")
    + b"rdkafka"
    + b"\x00"  # header tagged fields
    + b"\x0b"
    + b"librdkafka"
    + b"\x06"
    + b"2.3.0"
    + b"\x00"  # body tagged fields
)

METADATA_V1_RESPONSE = bytes.fromhex(
    "00000001"  # brokers: 1
    "00000001 0001 68 00002384 ffff"  # node 1, host "h", port 9092, rack null
    "00000001"  # controller_id
    "00000001"  # topics: 1
    "0000 0001 74 00"  # error 0, name "t", is_internal false
    "00000001"  # partitions: 1
    "0000 00000000 00000001"  # error 0, partition 0, leader 1
    "00000001 00000001"  # replicas [1]
    "00000001 00000001"  # isr [1]
)


def test_librdkafka_api_versions_v3_request() -> None:
    header, offset = parse_request_header(LIBRDKAFKA_API_VERSIONS_V3)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        18,
        3,
        1,
        "rdkafka",
    )
    request = codec.decode_request(ApiKey.API_VERSIONS, 3, LIBRDKAFKA_API_VERSIONS_V3[offset:])
    assert request == ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.3.0")
    assert codec.encode_request(ApiKey.API_VERSIONS, 3, request) == LIBRDKAFKA_API_VERSIONS_V3[offset:]


def test_metadata_v1_request_golden_bytes() -> None:
    some = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="foo")])
    assert codec.encode_request(ApiKey.METADATA, 1, some) == bytes.fromhex("00000001 0003") + b"foo"
    assert codec.encode_request(ApiKey.METADATA, 1, MetadataRequest(topics=None)) == b"\xff\xff\xff\xff"
    assert codec.decode_request(ApiKey.METADATA, 1, b"\xff\xff\xff\xff").topics is None


def test_metadata_v1_response_golden_bytes() -> None:
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name="t",
                is_internal=False,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        ],
    )
    assert codec.encode_response(ApiKey.METADATA, 1, response) == [METADATA_V1_RESPONSE]
    decoded = codec.decode_response(ApiKey.METADATA, 1, METADATA_V1_RESPONSE)
    assert decoded.brokers == response.brokers and decoded.topics == response.topics


DESCRIBE_TOPIC_PARTITIONS_V0_REQUEST = bytes.fromhex(
    "02 02 74 00"  # topics: 1 (compact), name "t", tagged fields
    "00000002"  # response_partition_limit
    "01 02 74 00000001 00"  # cursor present: topic "t", partition 1, tagged fields
    "00"  # tagged fields
)
TOPIC_ID = "000102030405060708090a0b0c0d0e0f"
DESCRIBE_TOPIC_PARTITIONS_V0_RESPONSE = bytes.fromhex(
    "00000000"  # throttle_time_ms
    "02"  # topics: 1
    "0000 02 74" + TOPIC_ID + "00"  # error 0, name "t", topic id, is_internal false
    "02"  # partitions: 1
    "0000 00000000 00000001 00000005"  # error 0, partition 0, leader 1, leader epoch 5
    "02 00000001 02 00000001"  # replicas [1], isr [1]
    "01 00 01"  # eligible_leader_replicas [], last_known_elr null, offline_replicas []
    "00"  # partition tagged fields
    "00000df8 00"  # topic_authorized_operations 3576, topic tagged fields
    "01 02 74 00000001 00"  # next_cursor: topic "t", partition 1
    "00"  # tagged fields
)


def test_describe_topic_partitions_v0_request_golden_bytes() -> None:
    Request = DescribeTopicPartitionsRequest
    request = Request(
        topics=[Request.TopicRequest(name="t")],
        response_partition_limit=2,
        cursor=Request.Cursor(topic_name="t", partition_index=1),
    )
    api = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    assert codec.encode_request(api, 0, request) == DESCRIBE_TOPIC_PARTITIONS_V0_REQUEST
    assert codec.decode_request(api, 0, DESCRIBE_TOPIC_PARTITIONS_V0_REQUEST) == request
    no_cursor = bytes.fromhex("01 00000007 ff 00")  # no topics (all), limit 7, null cursor
    assert codec.decode_request(api, 0, no_cursor) == Request(response_partition_limit=7)
    assert codec.encode_request(api, 0, Request(response_partition_limit=7)) == no_cursor


def test_describe_topic_partitions_v0_response_golden_bytes() -> None:
    Response = DescribeTopicPartitionsResponse
    partition = Response.DescribeTopicPartitionsResponsePartition(
        partition_index=0,
        leader_id=1,
        leader_epoch=5,
        replica_nodes=[1],
        isr_nodes=[1],
        eligible_leader_replicas=[],
        last_known_elr=None,
        offline_replicas=[],
    )
    topic = Response.DescribeTopicPartitionsResponseTopic(
        name="t",
        topic_id=uuid.UUID(TOPIC_ID),
        partitions=[partition],
        topic_authorized_operations=3576,
    )
    response = Response(topics=[topic], next_cursor=Response.Cursor(topic_name="t", partition_index=1))
    api = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    assert b"".join(codec.encode_response(api, 0, response)) == DESCRIBE_TOPIC_PARTITIONS_V0_RESPONSE
    assert codec.decode_response(api, 0, DESCRIBE_TOPIC_PARTITIONS_V0_RESPONSE) == response


def test_api_versions_v0_unsupported_version_response() -> None:
    response = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    assert codec.encode_response(ApiKey.API_VERSIONS, 0, response) == [
        bytes.fromhex("0023 00000001 0012 0000 0004")
    ]


API_VERSIONS_V3_BODY = bytes.fromhex("0000 02 0000 0000 000b 00 00000000")


def test_api_versions_v3_response_writes_only_non_default_tagged_fields() -> None:
    entry = ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)
    plain = ApiVersionsResponse(api_keys=[entry])
    assert codec.encode_response(ApiKey.API_VERSIONS, 3, plain) == [API_VERSIONS_V3_BODY + b"\x00"]
    epoch = ApiVersionsResponse(api_keys=[entry], finalized_features_epoch=5)
    expected = API_VERSIONS_V3_BODY + bytes.fromhex("01 01 08 0000000000000005")
    assert codec.encode_response(ApiKey.API_VERSIONS, 3, epoch) == [expected]
    assert codec.decode_response(ApiKey.API_VERSIONS, 3, expected) == epoch


def test_unknown_tagged_fields_are_skipped_at_top_level_and_in_structs() -> None:
    body = bytes.fromhex("0000 02 0000 0000 000b 01 07 01 ff 00000000 02 05 03 616263 01 08 0000000000000007")
    decoded = codec.decode_response(ApiKey.API_VERSIONS, 3, body)
    assert decoded.api_keys == [ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)]
    assert decoded.finalized_features_epoch == 7


def test_tagged_field_whose_size_disagrees_with_its_value_is_rejected() -> None:
    body = API_VERSIONS_V3_BODY + bytes.fromhex("01 01 09 0000000000000005 00")
    with pytest.raises(ProtocolDecodeError, match="size mismatch"):
        codec.decode_response(ApiKey.API_VERSIONS, 3, body)


@pytest.mark.parametrize(
    ("api_key", "version", "payload"),
    [
        (ApiKey.METADATA, 1, bytes.fromhex("7fffffff")),  # 2**31-1 topics
        (ApiKey.METADATA, 1, bytes.fromhex("00000001 7fff")),  # 32767-byte name
        (ApiKey.PRODUCE, 3, bytes.fromhex("ffff 0001 00000000 00000001 0001 74 00000001 00000000 7fffffff")),
        (ApiKey.PRODUCE, 9, bytes.fromhex("00 0001 00000000 8080808008")),  # compact count 2**31
        (ApiKey.PRODUCE, 9, bytes.fromhex("00 0001 00000000 ffffffffffff")),  # over-long varint
    ],
)
def test_hostile_lengths_are_rejected_without_allocating(api_key: int, version: int, payload: bytes) -> None:
    started = time.perf_counter()
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request(api_key, version, payload)
    assert time.perf_counter() - started < 0.5


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request(ApiKey.METADATA, 1, bytes.fromhex("00000001 0002 c328"))


def test_null_in_a_non_nullable_field_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError, match="null"):
        codec.decode_request(ApiKey.METADATA, 1, bytes.fromhex("00000001 ffff"))


def test_decoded_records_alias_the_payload() -> None:
    request = ProduceRequest(
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"\x01\x02\x03")],
            )
        ]
    )
    payload = bytearray(codec.encode_request(ApiKey.PRODUCE, 9, request))
    records = codec.decode_request(ApiKey.PRODUCE, 9, payload).topic_data[0].partition_data[0].records
    assert records.obj is payload
    payload[-4] = 0x09  # last record byte (then partition and topic tagged sections, then top level)
    assert bytes(records) == b"\x01\x02\x09"


def test_records_parts_mix_bytes_and_file_slices() -> None:
    part = FetchResponse.PartitionData(records=[b"ab", FileSlice(3, 0, 10), b"cd"])
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])
    chunks = codec.encode_response(ApiKey.FETCH, 12, response)
    assert len(chunks) == 3 and chunks[1] == FileSlice(3, 0, 10)
    assert chunks[0].endswith(b"\x0fab")  # compact length 14 + 1, then the leading bytes part
    assert chunks[2].startswith(b"cd")
    assert codec.encoded_size(chunks) == len(chunks[0]) + 10 + len(chunks[2])


def test_non_flexible_records_length_is_int32_over_all_parts() -> None:
    part = FetchResponse.PartitionData(records=(FileSlice(3, 0, 10), FileSlice(4, 5, 6)))
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])
    chunks = codec.encode_response(ApiKey.FETCH, 4, response)
    assert chunks[0].endswith(b"\x00\x00\x00\x10")
    assert chunks[1:] == [FileSlice(3, 0, 10), FileSlice(4, 5, 6)]


def test_encode_request_refuses_file_slices() -> None:
    request = ProduceRequest(
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(records=FileSlice(1, 0, 1))]
            )
        ]
    )
    with pytest.raises(ProtocolEncodeError, match="FileSlice"):
        codec.encode_request(ApiKey.PRODUCE, 9, request)


def test_null_where_the_version_forbids_it_names_the_field() -> None:
    request = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)])
    with pytest.raises(ProtocolEncodeError, match=r"ProduceRequest\.TopicProduceData\.name \(v9\)"):
        codec.encode_request(ApiKey.PRODUCE, 9, request)
    with pytest.raises(ProtocolEncodeError, match="unaligned_records"):
        response = FetchSnapshotResponse(
            topics=[
                FetchSnapshotResponse.TopicSnapshot(
                    partitions=[FetchSnapshotResponse.PartitionSnapshot(unaligned_records=None)]
                )
            ]
        )
        codec.encode_response(ApiKey.FETCH_SNAPSHOT, 0, response)


def test_out_of_range_and_wrong_type_values_are_encode_errors() -> None:
    with pytest.raises(ProtocolEncodeError, match="ProduceRequest v9"):
        codec.encode_request(ApiKey.PRODUCE, 9, ProduceRequest(acks=1 << 20))
    with pytest.raises(ProtocolEncodeError, match="expected ProduceRequest"):
        codec.encode_request(ApiKey.PRODUCE, 9, MetadataRequest())


def test_fields_absent_from_a_version_are_ignored_and_left_default() -> None:
    v2 = codec.encode_request(ApiKey.PRODUCE, 2, ProduceRequest(transactional_id="tx", acks=1))
    assert v2 == codec.encode_request(ApiKey.PRODUCE, 2, ProduceRequest(acks=1))
    assert codec.decode_request(ApiKey.PRODUCE, 2, v2).transactional_id is None


def test_unknown_api_and_version_raise_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(999, 0, b"")
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(ApiKey.API_VERSIONS, 99, b"")
    with pytest.raises(UnsupportedVersionError):
        codec.encode_response(ApiKey.FETCH, -1, FetchResponse())


def test_consumer_protocol_data_message_round_trips() -> None:
    from odradek.protocol.messages import DATA_SPECS, ConsumerProtocolSubscription

    spec = DATA_SPECS["ConsumerProtocolSubscription"]
    subscription = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u", generation_id=4)
    encoded = codec.encode_message(spec, 3, subscription)
    assert encoded.startswith(bytes.fromhex("00000002 0001 61 0001 62 00000001 75"))
    assert codec.decode_message(spec, 3, encoded) == subscription


def test_a_pre_encoded_struct_array_element_is_written_as_it_is() -> None:
    from odradek.protocol.messages.fetch import RESPONSE_SPEC, FetchResponse

    built = FetchResponse.PartitionData(partition_index=4, high_watermark=12, records=b"")
    element = codec.encode_element(RESPONSE_SPEC, 16, built)
    topic = FetchResponse.FetchableTopicResponse("t", partitions=[built, element])
    (decoded,) = codec.decode_response(
        1, 16, codec.encode_response(1, 16, FetchResponse(responses=[topic]))[0]
    ).responses
    assert decoded.partitions == [built, built]


def test_encode_element_refuses_a_struct_of_another_message() -> None:
    from odradek.protocol.messages.fetch import RESPONSE_SPEC
    from odradek.protocol.messages.produce import ProduceRequest

    with pytest.raises(ProtocolEncodeError):
        codec.encode_element(RESPONSE_SPEC, 16, ProduceRequest.PartitionProduceData())
