"""One blocking TCP connection to one broker, with API version negotiation.

Owns the client side of Kafka's framing: a request is `int32 size` + request header + body, a
response `int32 size` + response header + body, matched by correlation id. One request is in flight
at a time, so responses arrive in order. On connect the connection asks ApiVersions (v3, falling
back to the version the broker names when it answers UNSUPPORTED_VERSION with a v0 body) and from
then on uses, per API, the highest version both the broker and this client (`CLIENT_MAX_VERSIONS`)
speak.

Opening a connection (TCP connect plus the ApiVersions exchange: Kafka's "connection setup") is
bounded by `connect_timeout_s` (Kafka's socket.connection.setup.timeout.ms); when it fails the
connection raises `ConnectFailed`, which names the address and the reason in words a person reads
(unknown host, connection refused, timed out, not a Kafka listener) and says whether trying again
can help: an unknown host cannot.

Invariants: a failed send or receive closes the connection (a half-read stream cannot be resumed);
callers open a new one. Every socket operation after setup is bounded by `timeout_s`. Responses'
`records` fields alias the receive buffer, which is fresh for each response unless the request asks
`reuse_buffer`: then the response is read into the connection's one spare buffer (grown as needed),
and stays valid only until the next such request - for a caller that copies what it keeps (a fresh
multi-MiB buffer per fetch costs its page faults and zero-filling every time).

Callers: odradek.client.client, and the command-line tools (odradek.cli) through `KafkaClient.connect_to`.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any, Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)
from odradek.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.LIST_GROUPS: 5,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    ApiKey.SHARE_GROUP_DESCRIBE: 1,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 1,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: 0,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: 0,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    ApiKey.DESCRIBE_LOG_DIRS: 4,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.INIT_PRODUCER_ID: 5,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,  # v4+ is the brokers' batched verification
    ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 4,
    ApiKey.TXN_OFFSET_COMMIT: 4,
    ApiKey.SASL_HANDSHAKE: 1,
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.DESCRIBE_ACLS: 3,
    ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
}
CLIENT_MIN_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 3,
    ApiKey.FETCH: 4,
    ApiKey.LIST_OFFSETS: 1,
    ApiKey.METADATA: 1,
    ApiKey.ELECT_LEADERS: 1,  # v0 has no election type
}

UNKNOWN_HOST = "unknown host"
_SIZE = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_CLIENT_SOFTWARE = ("odradek-client", "0.1.0")


class ConnectionClosed(ConnectionError):
    """The broker closed the connection, or it broke mid-frame."""


class ConnectFailed(ConnectionError):
    """Opening a connection to `host:port` failed: `reason` says why, `retriable` if a retry may help."""

    def __init__(self, host: str, port: int, reason: str, *, retriable: bool) -> None:
        self.host, self.port, self.reason, self.retriable = host, port, reason, retriable
        super().__init__(self.describe())

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def describe(self) -> str:
        if self.reason == UNKNOWN_HOST:
            return f"unknown host {self.host} (no address for {self.address})"
        return f"cannot reach {self.address} ({self.reason})"


class UnsupportedApi(KafkaError):
    """Broker and client share no version of an API."""

    def __init__(self, api_key: int) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, f"broker speaks no usable version of API {api_key}")


class AuthenticationFailed(ConnectionError):
    """The broker refused this client's credentials (SASL_AUTHENTICATION_FAILED and its message, or a
    mechanism it does not enable): trying again cannot help."""


class ConnectionSecurity(Protocol):
    """How a connection is secured (Kafka's `security.protocol` with its ssl.* / sasl.* settings),
    given by the layer that reads those settings (security/client_config.py)."""

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The socket to speak Kafka over: `sock` itself, or a TLS socket whose handshake is done."""
        ...

    def authenticate(self, connection: BrokerConnection) -> None:
        """Authenticate the negotiated `connection` (SaslHandshake, SaslAuthenticate) or do nothing;
        raises AuthenticationFailed when the broker refuses."""
        ...


class BrokerConnection:
    """A negotiated (and, with a `security`, secured and authenticated) connection to `host:port`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        timeout_s: float,
        connect_timeout_s: float,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._client_id = client_id
        self._correlation_id = 0
        self._spare = bytearray()
        self._sock: socket.socket | None = _open_socket(host, port, connect_timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.versions: dict[int, int] = {}
        try:
            if security is not None:
                self._sock = security.wrap(self._sock, host)
            self.versions = self._negotiate()
            if security is not None:
                security.authenticate(self)
        except ssl.SSLError as exc:  # an untrusted or expired certificate, no common protocol, ...
            self.close()
            raise ConnectFailed(host, port, f"TLS handshake failed: {exc}", retriable=False) from exc
        except AuthenticationFailed as exc:
            self.close()
            raise ConnectFailed(host, port, f"authentication failed: {exc}", retriable=False) from exc
        except TimeoutError as exc:
            self.close()
            reason = f"no ApiVersions answer within {connect_timeout_s:g} s: is it a Kafka listener?"
            raise ConnectFailed(host, port, reason, retriable=True) from exc
        except OSError as exc:  # ConnectionClosed included
            self.close()
            reason = f"closed during ApiVersions ({exc}): is it a Kafka listener?"
            raise ConnectFailed(host, port, reason, retriable=True) from exc
        except BaseException:
            self.close()
            raise
        self._sock.settimeout(timeout_s)

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def version_for(self, api_key: int) -> int:
        version = self.versions.get(api_key)
        if version is None:
            raise UnsupportedApi(api_key)
        return version

    def request(self, api_key: int, message: Any, *, reuse_buffer: bool = False) -> Any:
        """Send `message` at the negotiated version and return the decoded response (read into the
        spare buffer with `reuse_buffer`: valid until the next such request, see the module header)."""
        version = self.version_for(api_key)
        body = encode_request(api_key, version, message)
        return decode_response(api_key, version, self._round_trip(api_key, version, body, reuse_buffer))

    def _negotiate(self) -> dict[int, int]:
        version = CLIENT_MAX_VERSIONS[ApiKey.API_VERSIONS]
        request = ApiVersionsRequest(*_CLIENT_SOFTWARE)
        body = self._round_trip(
            ApiKey.API_VERSIONS, version, encode_request(ApiKey.API_VERSIONS, version, request)
        )
        if _ERROR_CODE.unpack_from(body)[0] == ErrorCode.UNSUPPORTED_VERSION:
            offered = decode_response(ApiKey.API_VERSIONS, 0, body)
            version = _max_offered(offered, ApiKey.API_VERSIONS)
            body = self._round_trip(
                ApiKey.API_VERSIONS, version, encode_request(ApiKey.API_VERSIONS, version, request)
            )
        response: ApiVersionsResponse = decode_response(ApiKey.API_VERSIONS, version, body)
        if response.error_code:
            raise KafkaError(response.error_code, "ApiVersions failed")
        return _usable_versions(response)

    def _round_trip(self, api_key: int, version: int, body: bytes, reuse_buffer: bool = False) -> memoryview:
        if self._sock is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        self._correlation_id += 1
        header = encode_request_header(RequestHeader(api_key, version, self._correlation_id, self._client_id))
        try:
            self._sock.sendall(_SIZE.pack(len(header) + len(body)) + header + body)
            payload = self._receive_frame(reuse_buffer)
        except (OSError, ConnectionClosed):
            self.close()
            raise
        correlation_id, start = parse_response_header(payload, response_header_version(api_key, version))
        if correlation_id != self._correlation_id:
            self.close()
            raise ConnectionClosed(f"expected correlation id {self._correlation_id}, got {correlation_id}")
        return payload[start:]

    def _receive_frame(self, reuse_buffer: bool) -> memoryview:
        size = _SIZE.unpack(self._receive_exactly(4))[0]
        return self._receive_exactly(size, reuse_buffer)

    def _receive_exactly(self, size: int, reuse_buffer: bool = False) -> memoryview:
        assert self._sock is not None
        if reuse_buffer and len(self._spare) < size:
            self._spare = bytearray(size)
        buf = memoryview(self._spare)[:size] if reuse_buffer else memoryview(bytearray(size))
        filled = 0
        while filled < size:
            got = self._sock.recv_into(buf[filled:])
            if got == 0:
                raise ConnectionClosed(f"{self.host}:{self.port} closed the connection")
            filled += got
        return buf


def format_address(host: str, port: int) -> str:
    """`host:port`, with an IPv6 host in brackets as bootstrap servers spell it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_UNKNOWN_HOST_ERRNOS = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


def _open_socket(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connected TCP socket, or ConnectFailed saying why not."""
    try:
        return socket.create_connection((host, port), timeout=timeout_s)
    except socket.gaierror as exc:
        unknown = exc.errno in _UNKNOWN_HOST_ERRNOS
        reason = UNKNOWN_HOST if unknown else f"cannot resolve the host: {_lower(exc.strerror)}"
        raise ConnectFailed(host, port, reason, retriable=not unknown) from exc
    except ConnectionRefusedError as exc:
        raise ConnectFailed(host, port, "connection refused", retriable=True) from exc
    except TimeoutError as exc:
        raise ConnectFailed(host, port, f"connect timed out after {timeout_s:g} s", retriable=True) from exc
    except OSError as exc:
        raise ConnectFailed(host, port, _lower(exc.strerror or str(exc)), retriable=True) from exc


def _lower(text: str | None) -> str:
    return (text or "").lower()


def _max_offered(response: ApiVersionsResponse, api_key: int) -> int:
    for entry in response.api_keys:
        if entry.api_key == api_key:
            return min(entry.max_version, CLIENT_MAX_VERSIONS[api_key])
    raise UnsupportedApi(api_key)


def _usable_versions(response: ApiVersionsResponse) -> dict[int, int]:
    usable: dict[int, int] = {}
    for entry in response.api_keys:
        ours = CLIENT_MAX_VERSIONS.get(entry.api_key)
        if ours is None:
            continue
        version = min(ours, entry.max_version)
        if version >= max(entry.min_version, CLIENT_MIN_VERSIONS.get(entry.api_key, 0)):
            usable[entry.api_key] = version
    return usable
