"""A blocking raw-frame Kafka client for the server tests: build frames with the codec, read frames.

Deliberately minimal and independent of odradek.client: it lets a test send exactly the bytes it
wants (bad sizes, truncated bodies, pipelined requests) and read the answers frame by frame.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)


def request_frame(
    api_key: int, version: int, message: Any, correlation_id: int, client_id: str = "tests"
) -> bytes:
    body = encode_request_header(RequestHeader(api_key, version, correlation_id, client_id))
    body += encode_request(api_key, version, message)
    return struct.pack(">i", len(body)) + body


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._next_correlation_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, message: Any) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.send_raw(request_frame(api_key, version, message, correlation_id))
        return correlation_id

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exact(4))
        return self._read_exact(size)

    def read_response(self, api_key: int, version: int, header_version: int | None = None) -> tuple[int, Any]:
        """(correlation id, decoded body) of the next response frame."""
        if header_version is None:
            header_version = response_header_version(api_key, version)
        frame = self.read_frame()
        correlation_id, offset = parse_response_header(frame, header_version)
        return correlation_id, decode_response(api_key, version, frame[offset:])

    def call(self, api_key: int, version: int, message: Any) -> Any:
        correlation_id = self.send(api_key, version, message)
        answered, response = self.read_response(api_key, version)
        assert answered == correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
