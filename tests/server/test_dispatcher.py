"""Dispatcher and framing behaviour against a real broker process, over raw sockets."""

from __future__ import annotations

import struct

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader, encode_request_header, parse_response_header
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.protocol.messages.metadata import MetadataRequest
from tests.server.raw_client import request_frame

API_VERSIONS = ApiKey.API_VERSIONS
METADATA = ApiKey.METADATA


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="odradek-tests", client_software_version="1.0")


def assert_connection_works(client) -> None:
    response = client.call(API_VERSIONS, 3, api_versions_request())
    assert response.error_code == ErrorCode.NONE


def test_api_versions_lists_the_registered_apis(connect):
    response = connect().call(API_VERSIONS, 3, api_versions_request())
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[API_VERSIONS] == (0, 5)
    assert ranges[METADATA] == (0, 13)
    assert ranges[ApiKey.CREATE_TOPICS] == (0, 7)
    assert list(ranges) == sorted(ranges)


def test_future_api_versions_gets_unsupported_version_in_v0_then_v3_works(connect):
    client = connect()
    future = encode_request_header(RequestHeader(API_VERSIONS, 9, 41, "future-client"))
    future += encode_request(API_VERSIONS, 4, api_versions_request())  # a v9 body we cannot know
    client.send_raw(struct.pack(">i", len(future)) + future)
    correlation_id, response = client.read_response(API_VERSIONS, 0, header_version=0)
    assert correlation_id == 41
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == API_VERSIONS and k.max_version == 5 for k in response.api_keys)
    assert client.call(API_VERSIONS, 3, api_versions_request()).error_code == ErrorCode.NONE
    assert client.call(API_VERSIONS, 4, api_versions_request()).error_code == ErrorCode.NONE


def test_invalid_client_software_name_is_invalid_request(connect):
    request = ApiVersionsRequest(client_software_name="-bad name", client_software_version="1")
    response = connect().call(API_VERSIONS, 3, request)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert response.api_keys == []  # as Kafka 3.9 answers it


def test_v5_checks_the_cluster_and_node_the_client_names(connect):
    client = connect()
    metadata = client.call(METADATA, 12, MetadataRequest(topics=[]))
    cluster, (node,) = metadata.cluster_id, [b.node_id for b in metadata.brokers]

    def answer(cluster_id, node_id):
        request = ApiVersionsRequest("odradek-tests", "1", cluster_id=cluster_id, node_id=node_id)
        response = client.call(API_VERSIONS, 5, request)
        return response.error_code, bool(response.api_keys)

    assert answer(None, -1) == answer(cluster, node) == (ErrorCode.NONE, True)
    assert (
        answer("another-cluster", node)
        == answer(cluster, node + 1)
        == (ErrorCode.REBOOTSTRAP_REQUIRED, False)
    )
    assert answer(cluster, -1) == answer(None, node) == (ErrorCode.INVALID_REQUEST, False)  # as Kafka 4.4


def test_unknown_api_key_closes_only_that_connection(connect):
    bystander, victim = connect(), connect()
    header = struct.pack(">hhih", 999, 0, 5, -1)
    victim.send_raw(struct.pack(">i", len(header)) + header)
    assert victim.is_closed_by_peer()
    assert_connection_works(bystander)
    assert_connection_works(connect())


def test_unsupported_version_of_a_non_api_versions_api_closes(connect):
    client = connect()
    header = struct.pack(">hhih", METADATA, 99, 5, -1)
    client.send_raw(struct.pack(">i", len(header)) + header + b"\x00")
    assert client.is_closed_by_peer()


def test_oversized_frame_closes(connect):
    client = connect()
    client.send_raw(struct.pack(">i", 104857600 + 1) + b"\x00" * 16)
    assert client.is_closed_by_peer()
    assert_connection_works(connect())


def test_negative_size_closes(connect):
    client = connect()
    client.send_raw(struct.pack(">i", -4))
    assert client.is_closed_by_peer()


def test_truncated_body_closes(connect):
    client = connect()
    header = encode_request_header(RequestHeader(METADATA, 1, 9, "tests"))
    body = struct.pack(">i", 3) + struct.pack(">h", 5) + b"to"  # three topics promised, half of one sent
    frame = header + body
    client.send_raw(struct.pack(">i", len(frame)) + frame)
    assert client.is_closed_by_peer()


def test_frame_shorter_than_a_header_closes(connect):
    client = connect()
    client.send_raw(struct.pack(">i", 3) + b"\x00\x12\x00")
    assert client.is_closed_by_peer()


def test_garbage_body_closes(connect):
    client = connect()
    header = encode_request_header(RequestHeader(METADATA, 9, 9, "tests"))
    frame = header + b"\xff" * 64
    client.send_raw(struct.pack(">i", len(frame)) + frame)
    assert client.is_closed_by_peer()


def test_pipelined_requests_are_answered_in_order(connect):
    client = connect()
    frames = []
    expected = []
    for i in range(300):
        api_key, version, message = (
            (METADATA, 1 + i % 12, MetadataRequest(topics=[]))
            if i % 2
            else (API_VERSIONS, i % 5, api_versions_request())
        )
        frames.append(request_frame(api_key, version, message, correlation_id=1000 + i))
        expected.append((1000 + i, api_key, version))
    client.send_raw(b"".join(frames))
    for correlation_id, api_key, version in expected:
        frame = client.read_frame()
        header_version = 0 if api_key == API_VERSIONS or version < 9 else 1
        answered, offset = parse_response_header(frame, header_version)
        assert answered == correlation_id
        response = decode_response(api_key, version, frame[offset:])
        assert getattr(response, "error_code", 0) == ErrorCode.NONE


def test_a_frame_split_across_many_writes_is_reassembled(connect):
    client = connect()
    frame = request_frame(API_VERSIONS, 3, api_versions_request(), correlation_id=77)
    for i in range(len(frame)):
        client.send_raw(frame[i : i + 1])
    correlation_id, response = client.read_response(API_VERSIONS, 3)
    assert (correlation_id, response.error_code) == (77, ErrorCode.NONE)
