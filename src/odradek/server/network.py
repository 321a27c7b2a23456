"""The listener: TCP connections, Kafka's size-prefixed framing, in-order responses, sendfile.

Theory of operation. Each connection owns its non-blocking socket directly (not an asyncio
transport), because a fetch response mixes bytes with `FileSlice` chunks that must go out with
`os.sendfile`, strictly after the bytes queued before them: an asyncio transport keeps its own write
buffer and refuses a second writer on its fd, so it cannot interleave sendfile correctly.

- Reading: `loop.add_reader` calls `_on_readable`, which `recv_into`s a reused receive buffer (the
  BufferedProtocol technique without the transport) and cuts complete frames out of it: a 4-byte
  big-endian signed size, then the request. A size below 0 or above `socket.request.max.bytes` is
  logged and the connection closed (as Kafka does). A frame larger than the buffer's free room gets
  its own buffer of exactly its size, received into directly, so big produce requests are copied once.
- Processing: frames wait in a per-connection FIFO; one task per connection hands them one at a time
  to the request handler (Kafka's one-in-flight-per-connection), so responses leave in request order.
  Reading continues meanwhile (pipelining) until `max_queued_requests` frames or
  `MAX_QUEUED_BYTES` bytes wait: then reading pauses, and resumes when the queue has drained to half
  of both limits.
- Writing: the handler returns the response chunks (header and body, without the size prefix);
  runs of bytes go out with `sendmsg` (flagged MSG_MORE when a file slice follows), each `FileSlice`
  with `os.sendfile` from its fd at its offset (the file position is never touched). When the socket
  buffer is full the writer waits for writability with `loop.add_writer`.
- End of stream: the frames already received are still processed (an acks=0 produce sent just
  before the client closed is appended, as in Kafka), then the connection closes.
- Errors: the handler raises `CloseConnection` to drop a client (unknown API key, undecodable
  request); any other exception is logged with the client address and closes the connection.
  A connection's failure never affects another one.

Listeners: `bind(listener_name, host, port)` once per entry of `listeners`; every connection knows
the listener it arrived on (`ClientInfo.listener`), so handlers answer with that listener's
advertised endpoints, as Kafka does.

Shutdown: `close()` stops accepting on every listener, then `drain()` lets each connection finish
the frames already received (bounded by a timeout) before the sockets close.

Callers: the broker (creates `KafkaServer` with the dispatcher as its request handler).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from odradek.protocol.primitives import FileSlice

log = logging.getLogger(__name__)

RECEIVE_BUFFER_SIZE = 256 * 1024
DEFAULT_MAX_QUEUED_REQUESTS = 500
MAX_QUEUED_BYTES = 16 << 20
_FRAME_SIZE = struct.Struct(">i")
_SIZE_PREFIX = 4
_SENDMSG_MAX_BUFFERS = 512
_MSG_MORE = getattr(socket, "MSG_MORE", 0)

ResponseChunk = bytes | bytearray | memoryview | FileSlice


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a request: the peer address, a connection id unique within the server, and the name
    of the listener the connection arrived on."""

    host: str
    port: int
    connection_id: int
    listener: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class CloseConnection(Exception):
    """Raised by a request handler to close the client's connection without answering."""


RequestHandler = Callable[[bytes | bytearray, ClientInfo], Awaitable[Sequence[ResponseChunk] | None]]


class Connection:
    """One client connection: framing, the ordered request queue and the writer."""

    def __init__(
        self,
        sock: socket.socket,
        client: ClientInfo,
        handler: RequestHandler,
        max_request_size: int,
        max_queued_requests: int,
        on_closed: Callable[[Connection], None],
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self.client = client
        self._handler = handler
        self._max_request_size = max_request_size
        self._max_queued = max_queued_requests
        self._on_closed = on_closed
        self._buffer = bytearray(RECEIVE_BUFFER_SIZE)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._big_frame: bytearray | None = None
        self._big_filled = 0
        self._queue: collections.deque[bytearray] = collections.deque()
        self._queued_bytes = 0
        self._wakeup = asyncio.Event()
        self._reading = False
        self._closed = False
        self._draining = False
        self._worker = self._loop.create_task(self._process(), name=f"connection-{client}")
        self._resume_reading()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- reading ---------------------------------------------------------------------------------

    def _resume_reading(self) -> None:
        if not self._reading and not self._closed and not self._draining:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def _pause_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _on_readable(self) -> None:
        try:
            if self._big_frame is not None:
                self._receive_big_frame()
            else:
                self._receive_into_buffer()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(f"read failed: {exc}")

    def _receive_into_buffer(self) -> None:
        if self._end == len(self._buffer):
            self._compact()
        received = self._sock.recv_into(self._view[self._end :])
        if received == 0:
            self.start_draining()
            return
        self._end += received
        self._cut_frames()

    def _compact(self) -> None:
        pending = self._end - self._start
        self._view[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending

    def _cut_frames(self) -> None:
        buffer, start, end = self._buffer, self._start, self._end
        frames = []
        while end - start >= _SIZE_PREFIX:
            (size,) = _FRAME_SIZE.unpack_from(buffer, start)
            if size < 0 or size > self._max_request_size:
                log.warning(
                    "Closing connection from %s: request size %d is outside 0..%d (socket.request.max.bytes)",
                    self.client,
                    size,
                    self._max_request_size,
                )
                self.close("invalid request size")
                return
            body = start + _SIZE_PREFIX
            if end - body >= size:
                frames.append(buffer[body : body + size])
                start = body + size
            elif size > len(buffer) - _SIZE_PREFIX:
                self._start_big_frame(size, body, end - body)
                start = end = 0
                break
            else:
                break
        self._start, self._end = (0, 0) if start == end else (start, end)
        if frames:
            self._enqueue(frames)

    def _start_big_frame(self, size: int, body: int, available: int) -> None:
        """A frame that cannot fit the shared buffer: receive the rest straight into its own buffer."""
        frame = bytearray(size)
        frame[:available] = self._view[body : body + available]
        self._big_frame, self._big_filled = frame, available

    def _receive_big_frame(self) -> None:
        assert self._big_frame is not None
        received = self._sock.recv_into(memoryview(self._big_frame)[self._big_filled :])
        if received == 0:
            self.start_draining()
            return
        self._big_filled += received
        if self._big_filled == len(self._big_frame):
            frame, self._big_frame = self._big_frame, None
            self._enqueue([frame])

    def _enqueue(self, frames: list[bytearray]) -> None:
        self._queue.extend(frames)
        self._queued_bytes += sum(map(len, frames))
        self._wakeup.set()
        if len(self._queue) >= self._max_queued or self._queued_bytes >= MAX_QUEUED_BYTES:
            self._pause_reading()

    # -- processing and writing --------------------------------------------------------------------

    async def _process(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    if self._draining:
                        break
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                frame = self._queue.popleft()
                self._queued_bytes -= len(frame)
                if not self._reading and self._below_half_of_limits():
                    self._resume_reading()
                response = await self._handler(frame, self.client)
                if response is not None:
                    await self._send_response(response)
        except CloseConnection:
            self.close(None)  # the handler has logged why
        except OSError as exc:
            self.close(f"write failed: {exc}")
        except Exception:
            log.exception("Closing connection from %s after an unexpected error", self.client)
            self.close("unexpected error")
        finally:
            if self._draining:
                self.close(None)

    def _below_half_of_limits(self) -> bool:
        return len(self._queue) <= self._max_queued // 2 and self._queued_bytes <= MAX_QUEUED_BYTES // 2

    async def _send_response(self, chunks: Sequence[ResponseChunk]) -> None:
        total = sum(c.length if isinstance(c, FileSlice) else len(c) for c in chunks)
        pending: list[bytes | bytearray | memoryview] = [total.to_bytes(_SIZE_PREFIX, "big", signed=True)]
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                await self._send_buffers(pending, more=True)
                pending = []
                await self._send_file(chunk)
            else:
                pending.append(chunk)
        if pending:
            await self._send_buffers(pending, more=False)

    async def _send_buffers(self, buffers: list[bytes | bytearray | memoryview], more: bool) -> None:
        """Send `buffers` in order. The first `sendmsg` takes them as they are, which is all a response
        needs when the socket buffer has room; only a short write builds views to resume from."""
        if not buffers:
            return
        flags = _MSG_MORE if more else 0
        sent = 0
        if len(buffers) <= _SENDMSG_MAX_BUFFERS:
            try:
                sent = self._sock.sendmsg(buffers, [], flags)
            except (BlockingIOError, InterruptedError):
                pass
            if sent == sum(map(len, buffers)):
                return
        views = [memoryview(b).cast("B") for b in buffers if len(b)]
        await self._send_views(views, sent, flags)

    async def _send_views(self, views: list[memoryview], sent: int, flags: int) -> None:
        """Send what is left of `views` after the first `sent` bytes, waiting for writability."""
        _skip_sent(views, sent)
        while views:
            try:
                sent = self._sock.sendmsg(views[:_SENDMSG_MAX_BUFFERS], [], flags)
            except (BlockingIOError, InterruptedError):
                await self._writable()
                continue
            _skip_sent(views, sent)

    async def _send_file(self, chunk: FileSlice) -> None:
        offset, remaining = chunk.offset, chunk.length
        while remaining > 0:
            try:
                sent = os.sendfile(self._fd, chunk.fd, offset, remaining)
            except (BlockingIOError, InterruptedError):
                await self._writable()
                continue
            if sent == 0:
                raise OSError(errno.EIO, f"file ended {remaining} bytes short of the slice {chunk}")
            offset += sent
            remaining -= sent

    async def _writable(self) -> None:
        waiter = self._loop.create_future()
        self._loop.add_writer(self._fd, _set_result_once, waiter)
        try:
            await waiter
        finally:
            self._loop.remove_writer(self._fd)

    # -- closing ---------------------------------------------------------------------------------

    def start_draining(self) -> None:
        """Stop reading; the worker answers the frames already queued, then closes."""
        self._draining = True
        self._pause_reading()
        self._wakeup.set()

    async def wait_closed(self) -> None:
        await asyncio.wait({self._worker})

    def close(self, reason: str | None) -> None:
        if self._closed:
            return
        self._closed = True
        if reason is not None:
            log.info("Connection from %s closed: %s", self.client, reason)
        self._pause_reading()
        self._loop.remove_writer(self._fd)
        self._queue.clear()
        self._queued_bytes = 0
        if self._worker is not asyncio.current_task():
            self._worker.cancel()
        self._sock.close()
        self._on_closed(self)


def _skip_sent(views: list[memoryview], sent: int) -> None:
    """Drop the first `sent` bytes from `views` (whole views, then the front of a partly sent one)."""
    while sent and views:
        head = views[0]
        if sent >= len(head):
            sent -= len(head)
            views.pop(0)
        else:
            views[0] = head[sent:]
            sent = 0


def _set_result_once(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class KafkaServer:
    """Accepts connections on its listeners and runs a `Connection` for each."""

    def __init__(
        self,
        handler: RequestHandler,
        max_request_size: int,
        max_queued_requests: int = DEFAULT_MAX_QUEUED_REQUESTS,
    ) -> None:
        self._handler = handler
        self._max_request_size = max_request_size
        self._max_queued = max_queued_requests
        self._listen_socks: dict[str, socket.socket] = {}
        self._accept_tasks: list[asyncio.Task[None]] = []
        self._connections: set[Connection] = set()
        self._next_connection_id = 0

    @property
    def connections(self) -> int:
        return len(self._connections)

    async def bind(self, listener: str, host: str, port: int) -> tuple[str, int]:
        """Bind a listener (empty host = every interface) without accepting yet; returns the bound
        address."""
        infos = await asyncio.get_running_loop().getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
        self._listen_socks[listener] = sock
        bound = sock.getsockname()
        return bound[0], bound[1]

    def listen(self) -> None:
        """Start accepting connections on every bound listener."""
        assert self._listen_socks, "bind() first"
        loop = asyncio.get_running_loop()
        for listener, sock in self._listen_socks.items():
            sock.listen(socket.SOMAXCONN)
            self._accept_tasks.append(
                loop.create_task(self._accept_loop(listener, sock), name=f"accept-{listener}")
            )

    async def _accept_loop(self, listener: str, listen_sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, address = await loop.sock_accept(listen_sock)
            except OSError as exc:
                log.warning("Accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._open_connection(sock, address, listener)

    def _open_connection(self, sock: socket.socket, address: tuple, listener: str) -> None:
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_connection_id += 1
        client = ClientInfo(str(address[0]), int(address[1]), self._next_connection_id, listener)
        connection = Connection(
            sock, client, self._handler, self._max_request_size, self._max_queued, self._connections.discard
        )
        self._connections.add(connection)

    def close(self) -> None:
        """Stop accepting new connections."""
        for task in self._accept_tasks:
            task.cancel()
        self._accept_tasks.clear()
        for sock in self._listen_socks.values():
            sock.close()
        self._listen_socks.clear()

    async def drain(self, timeout_s: float) -> None:
        """Let every connection answer what it has received, then close them all."""
        connections = list(self._connections)
        for connection in connections:
            connection.start_draining()
        if connections:
            await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in connections], timeout=timeout_s
            )
        for connection in list(self._connections):
            connection.close("broker shutting down")
