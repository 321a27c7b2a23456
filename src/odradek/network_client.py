"""NodeConnection: the broker's own asyncio connection to another broker (Kafka's NetworkClient, one node).

Owns the client side of Kafka's framing for inter-broker traffic: the controller's channel to each
broker (LeaderAndIsr, UpdateMetadata, StopReplica), a follower's fetcher to its leader (Fetch,
OffsetForLeaderEpoch), a leader's requests to the controller (AlterPartition, ControlledShutdown).
All brokers of a cluster run the same code, so requests go at the version the caller names; there is
no version negotiation.

Behaviour:
- `connect(security)` opens the TCP connection within `connect_timeout_ms` (`NodeUnreachable`
  otherwise); with a `ClientSecurity` holding an SSLContext (the inter-broker listener is SSL or
  SASL_SSL) the TLS handshake is part of it, checking the broker's certificate (and its host name
  when the context says so).
  Then the security's `authenticate` step runs, if it has one (SASL), before any other request; a
  failed authentication closes the connection and is a `NodeUnreachable` naming why. The server may
  give the session a lifetime (`session_lifetime_ms`, KIP-368): once REAUTHENTICATE_AT of it has
  passed, `ReusedConnection` opens a new, freshly authenticated connection instead of
  re-authenticating in place.
- `send()` writes a request and awaits its response. Requests may be pipelined: they are written in
  call order and their responses, which a broker returns in order, are matched by correlation id by
  one reader task. A response that does not come within `request_timeout_ms` (Kafka's
  `request.timeout.ms`) fails with `RequestTimedOut` and, as in Kafka, the connection is closed (a
  late answer could otherwise be taken for the next request's), failing every other pending request
  with `NodeDisconnected`; callers reconnect. That close is a reset (SO_LINGER 0): a graceful one
  leaves the unanswered request in the kernel's send buffer, retransmitted until the peer takes it,
  so after a partition heals the peer could handle it after requests sent later on the new
  connection (the fault runs found a controller's UpdateMetadata applied out of order that way).
- A response's `records` fields alias the frame's own bytes (one allocation per response), so a
  follower appends fetched batches without copying them again.

Invariants: never blocks the event loop; once closed, a connection stays closed.
`ReusedConnection` keeps one `NodeConnection` open across requests to a node, opening it again
after it was lost or when the caller names another node.

Callers: the controller channel, replica fetchers, the AlterPartition / ControlledShutdown senders.
Depends only on protocol/.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)

_SIZE = struct.Struct(">i")
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection
REAUTHENTICATE_AT = 0.85  # of a session's lifetime

# An authentication step (the broker's SASL client, security/sasl/client.py) on a new connection.
Authenticate = Callable[["NodeConnection"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the broker's own connections to the inter-broker listener are secured: its security
    protocol, for SSL / SASL_SSL the client side's SSLContext, and for SASL_PLAINTEXT / SASL_SSL
    the authentication step run once connected, before any other request."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    authenticate: Authenticate | None = None


class NodeUnreachable(ConnectionError):
    """The connection to the node could not be opened."""


class NodeDisconnected(ConnectionError):
    """The connection closed (by the peer, a timeout or `close()`) before the response came."""


class RequestTimedOut(TimeoutError):
    """No response within request.timeout.ms."""


class NodeConnection:
    """One connection to broker `node_id` at `host:port`."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self._client_id = client_id
        self._request_timeout_s = request_timeout_ms / 1000
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._correlation_ids = itertools.count(1)
        self._pending: collections.deque[tuple[int, int, int, asyncio.Future[bytes]]] = collections.deque()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._closed = False
        self._reauthenticate_at: float | None = None  # time.monotonic()

    def __repr__(self) -> str:
        return f"NodeConnection(node {self.node_id} at {self.host}:{self.port})"

    @property
    def address(self) -> tuple[int, str, int]:
        """(node id, host, port) this connection goes to."""
        return self.node_id, self.host, self.port

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._closed

    async def connect(self, security: ClientSecurity | None = None) -> None:
        context = security.ssl_context if security is not None else None
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host, self.port, ssl=context, server_hostname=self.host if context else None
                ),
                self._connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            self._closed = True
            raise NodeUnreachable(
                f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: {exc}"
            ) from None
        self._reader_task = asyncio.get_running_loop().create_task(
            self._read_responses(reader), name=f"responses-from-broker-{self.node_id}"
        )
        if security is not None and security.authenticate is not None:
            try:
                await security.authenticate(self)
            except (ConnectionError, TimeoutError) as exc:
                await self.close()
                raise NodeUnreachable(
                    f"cannot authenticate to broker {self.node_id} at {self.host}:{self.port}: {exc}"
                ) from None

    @property
    def reauthentication_due(self) -> bool:
        return self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at

    def session_lifetime(self, lifetime_ms: int) -> None:
        """The authenticated session lasts `lifetime_ms` (0: no limit)."""
        self._reauthenticate_at = (
            time.monotonic() + REAUTHENTICATE_AT * lifetime_ms / 1000 if lifetime_ms else None
        )

    async def send(self, api_key: int, api_version: int, request: Any) -> Any:
        """Send `request` and return the decoded response."""
        if not self.connected:
            raise NodeDisconnected(f"connection to broker {self.node_id} is closed")
        correlation_id = next(self._correlation_ids)
        header = RequestHeader(api_key, api_version, correlation_id, self._client_id)
        body = encode_request_header(header) + encode_request(api_key, api_version, request)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending.append((correlation_id, api_key, api_version, future))
        assert self._writer is not None
        self._writer.write(_SIZE.pack(len(body)) + body)
        try:
            frame = await asyncio.wait_for(asyncio.shield(future), self._request_timeout_s)
        except TimeoutError:
            self._close(NodeDisconnected(f"broker {self.node_id}: an earlier request timed out"), reset=True)
            raise RequestTimedOut(
                f"broker {self.node_id} did not answer {api_key} v{api_version} within "
                f"{self._request_timeout_s * 1000:.0f} ms"
            ) from None
        _, offset = parse_response_header(frame, response_header_version(api_key, api_version))
        return decode_response(api_key, api_version, memoryview(frame)[offset:])

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                frame = await reader.readexactly(size)
                self._deliver(frame)
        except (asyncio.IncompleteReadError, OSError):
            self._close(NodeDisconnected(f"broker {self.node_id} closed the connection"))
        except NodeDisconnected as exc:
            self._close(exc)

    def _deliver(self, frame: bytes) -> None:
        if not self._pending:
            raise NodeDisconnected(f"broker {self.node_id} sent a response nobody asked for")
        correlation_id, _, _, future = self._pending.popleft()
        (answered,) = _SIZE.unpack_from(frame, 0)
        if answered != correlation_id:
            raise NodeDisconnected(
                f"broker {self.node_id} answered correlation id {answered}, expected {correlation_id}"
            )
        if not future.done():
            future.set_result(frame)

    def _close(self, reason: BaseException, reset: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        while self._pending:
            future = self._pending.popleft()[3]
            if not future.done():
                future.set_exception(reason)
                future.exception()  # a caller that timed out no longer awaits it
        if self._writer is not None and reset:
            _reset(self._writer.transport)
        elif self._writer is not None:
            self._writer.close()
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()

    async def close(self) -> None:
        self._close(NodeDisconnected(f"connection to broker {self.node_id} closed"))
        if self._writer is not None:
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close with a TCP reset: what the kernel still holds to send is dropped, not retransmitted."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


class ReusedConnection:
    """One connection kept open across requests, secured as `security` says: `to(node)` returns it
    while it is open and to that node, otherwise closes it and opens a new one; `close()` drops it."""

    def __init__(
        self,
        client_id: str,
        request_timeout_ms: int,
        connect_timeout_ms: int = 10_000,
        security: ClientSecurity | None = None,
    ) -> None:
        self._client_id = client_id
        self._security = security
        self._request_timeout_ms = request_timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self._connection: NodeConnection | None = None

    async def to(self, node_id: int, host: str, port: int) -> NodeConnection:
        current = self._connection
        if (
            current is not None
            and current.connected
            and current.address == (node_id, host, port)
            and not current.reauthentication_due
        ):
            return current
        await self.close()
        connection = NodeConnection(
            node_id,
            host,
            port,
            client_id=self._client_id,
            request_timeout_ms=self._request_timeout_ms,
            connect_timeout_ms=self._connect_timeout_ms,
        )
        await connection.connect(self._security)
        self._connection = connection
        return connection

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
