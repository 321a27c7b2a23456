"""Request and response headers, and which header version each API version uses.

Owns: `RequestHeader` and its parsing/encoding (header v0: api_key, api_version, correlation_id;
v1: + client_id as a nullable int16-length string; v2: + a tagged field section, client_id staying
non-compact), the response header (v0: correlation_id; v1: + an empty tagged field section), and the
header version rules:
- request header v2 when the request version is flexible, else v1; ControlledShutdown v0 uses v0;
- response header v1 when the response version is flexible, except ApiVersions, which always
  answers with v0 so that a client can read the error of an unsupported version.

A version above an API's known range follows the flexible rule (Kafka's flexible ranges are open
ended), so the header of any ApiVersions request can be read and answered with UNSUPPORTED_VERSION.
An unknown API key is read with header v1. The payloads here are frame contents (after the 4-byte
size). Called by the network layer, the dispatcher and the client.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from odradek.protocol.api_keys import API_SPECS, ApiKey
from odradek.protocol.primitives import (
    INT16,
    INT32,
    ProtocolDecodeError,
    Reader,
    Writer,
    read_nullable_string,
    read_tagged_fields,
)

_EMPTY_TAGS = b"\x00"
_FIXED_HEADER = struct.Struct(">hhi")


@dataclass(slots=True)  # not frozen: one is made per request, and a frozen one costs 3x as much to make
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(api_key: int, api_version: int) -> int:
    return _header_version(_request_header_versions, _request_header_version, api_key, api_version)


def response_header_version(api_key: int, api_version: int) -> int:
    return _header_version(_response_header_versions, _response_header_version, api_key, api_version)


# The rules below by (api key, version), kept for the pairs that come: a client's pairs are its own
# to choose, so the tables stop growing at _VERSIONS_KEPT entries (Kafka's APIs have ~1,000 pairs).
_request_header_versions: dict[tuple[int, int], int] = {}
_response_header_versions: dict[tuple[int, int], int] = {}
_VERSIONS_KEPT = 4096


def _header_version(
    table: dict[tuple[int, int], int], rule: Callable[[int, int], int], api_key: int, api_version: int
) -> int:
    version = table.get((api_key, api_version))
    if version is None:
        version = rule(api_key, api_version)
        if len(table) < _VERSIONS_KEPT:
            table[(api_key, api_version)] = version
    return version


def _request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    spec = API_SPECS.get(api_key)
    if spec is None:
        return 1
    return 2 if spec.request_flexible.lo <= api_version and not spec.request_flexible.empty else 1


def _response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    spec = API_SPECS.get(api_key)
    if spec is None:
        return 0
    return 1 if spec.response_flexible.lo <= api_version and not spec.response_flexible.empty else 0


def peek_api_key_version(payload: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The API key and version of a request frame, whatever the version."""
    if len(payload) < 4:
        raise ProtocolDecodeError(f"request frame of {len(payload)} bytes has no header")
    return INT16.unpack_from(payload, 0)[0], INT16.unpack_from(payload, 2)[0]


def parse_request_header(payload: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame; return it and the offset where the body starts."""
    buf = payload if type(payload) is memoryview else memoryview(payload)
    try:
        api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(buf, 0)
        version = request_header_version(api_key, api_version)
        client_id, pos = read_nullable_string(buf, 8) if version >= 1 else (None, 8)
        if version >= 2:
            pos = _skip_tagged_fields(buf, pos)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolDecodeError(f"malformed request header: {exc}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    if buf[pos] == 0:
        return pos + 1
    return read_tagged_fields(buf, pos)[1]


def encode_request_header(header: RequestHeader) -> bytes:
    writer = Writer()
    writer.int16(header.api_key)
    writer.int16(header.api_version)
    writer.int32(header.correlation_id)
    version = request_header_version(header.api_key, header.api_version)
    if version >= 1:
        writer.nullable_string(header.client_id)
    if version >= 2:
        writer.raw(_EMPTY_TAGS)
    return writer.getvalue()


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    head = INT32.pack(correlation_id)
    return head + _EMPTY_TAGS if header_version >= 1 else head


def parse_response_header(payload: bytes | bytearray | memoryview, header_version: int) -> tuple[int, int]:
    """Return the correlation id of a response frame and the offset where the body starts."""
    reader = Reader(payload)
    correlation_id = reader.int32()
    if header_version >= 1:
        reader.tagged_fields()
    return correlation_id, reader.pos
