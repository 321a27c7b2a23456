"""Request/response headers and the header version each API version uses."""

from __future__ import annotations

import pytest

from odradek.protocol import headers
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_api_key_version,
    request_header_version,
    response_header_version,
)
from odradek.protocol.primitives import ProtocolDecodeError


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.PRODUCE, 9, 2),
        (ApiKey.PRODUCE, 8, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 1, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 3, 2),
        (ApiKey.API_VERSIONS, 0, 1),
        (ApiKey.API_VERSIONS, 3, 2),
        (ApiKey.API_VERSIONS, 99, 2),
        (999, 0, 1),
    ],
)
def test_request_header_version(api_key: int, version: int, expected: int) -> None:
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.API_VERSIONS, 3, 0),
        (ApiKey.API_VERSIONS, 4, 0),
        (ApiKey.FETCH, 11, 0),
        (ApiKey.FETCH, 12, 1),
        (ApiKey.METADATA, 9, 1),
        (ApiKey.METADATA, 8, 0),
    ],
)
def test_response_header_version(api_key: int, version: int, expected: int) -> None:
    assert response_header_version(api_key, version) == expected


def test_parse_request_header_v1_with_null_client_id() -> None:
    frame = bytes.fromhex("0003 0001 0000002a ffff") + b"body"
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(api_key=3, api_version=1, correlation_id=42, client_id=None)
    assert frame[offset:] == b"body"


def test_parse_request_header_v0_has_no_client_id() -> None:
    frame = bytes.fromhex("0007 0000 00000005 00000001")
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(7, 0, 5, None) and offset == 8


def test_parse_request_header_v2_skips_tagged_fields() -> None:
    frame = bytes.fromhex("0000 0009 00000001 0001 63 01 03 02 abcd") + b"body"
    header, offset = parse_request_header(frame)
    assert header.client_id == "c" and frame[offset:] == b"body"


def test_header_of_an_unsupported_version_is_still_readable() -> None:
    frame = bytes.fromhex("0012 0063 00000009 0001 63 00")
    assert peek_api_key_version(frame) == (18, 99)
    header, offset = parse_request_header(frame)
    assert header.correlation_id == 9 and offset == len(frame)


def test_truncated_headers_raise_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError):
        peek_api_key_version(b"\x00\x12\x00")
    with pytest.raises(ProtocolDecodeError):
        parse_request_header(bytes.fromhex("0003 0001 0000002a 0005 6162"))


@pytest.mark.parametrize("header", [RequestHeader(0, 9, 7, "producer"), RequestHeader(3, 1, 8, None)])
def test_request_header_round_trip(header: RequestHeader) -> None:
    encoded = encode_request_header(header)
    assert parse_request_header(encoded) == (header, len(encoded))


def test_response_headers() -> None:
    assert encode_response_header(7, 0) == bytes.fromhex("00000007")
    assert encode_response_header(7, 1) == bytes.fromhex("00000007 00")
    assert parse_response_header(bytes.fromhex("00000007 00") + b"x", 1) == (7, 5)
    assert parse_response_header(bytes.fromhex("00000007") + b"x", 0) == (7, 4)


def test_header_versions_of_unknown_pairs_are_answered_without_growing_the_table_without_bound() -> None:
    """The header version tables keep (api key, version) pairs as they come; a client sending every
    pair there is cannot make them hold more than their bound."""
    for api_key in range(1000, 1100):
        for api_version in range(100):
            assert request_header_version(api_key, api_version) == 1  # an unknown API: header v1
            assert response_header_version(api_key, api_version) == 0
    assert len(headers._request_header_versions) <= headers._VERSIONS_KEPT
    assert len(headers._response_header_versions) <= headers._VERSIONS_KEPT
    assert request_header_version(ApiKey.PRODUCE, 9) == 2  # still the rules' answers
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0
