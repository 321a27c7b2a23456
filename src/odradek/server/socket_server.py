"""The listener (`SocketServer`, Kafka's SocketServer): TCP connections, Kafka's size-prefixed framing,
in-order responses, sendfile, and the connection limits that keep one client from freezing, bloating
or stopping the broker.

The request path: this layer is its first and last stages, `frame` (cut requests out of the bytes
received, within the connection limits) and `send` (the response chunks, in request order); the
request handler (server/dispatcher.py, which lists every stage) runs the stages between them:
header, principal, authorize, quota, decode, handle, encode.

Theory of operation. Each connection owns its non-blocking socket directly (not an asyncio
transport), because a fetch response mixes bytes with `FileSlice` chunks that must go out with
`os.sendfile`, strictly after the bytes queued before them: an asyncio transport keeps its own write
buffer and refuses a second writer on its fd, so it cannot interleave sendfile correctly.

- Reading: `loop.add_reader` calls `_on_readable`. A connection has no receive buffer of its own: it
  `recv_into`s the server's shared RECEIVE_BUFFER_SIZE buffer (one event loop, used only inside that
  synchronous call; the BufferedProtocol technique without the transport) and cuts complete frames
  out of it: a 4-byte big-endian signed size, then the request. A size below 0 or above
  `socket.request.max.bytes` is logged and the connection closed (as Kafka does). What is left of an
  incomplete frame is copied out: up to TAIL_MAX bytes as the connection's tail, put back in front of
  the next receive; a larger frame gets a buffer of its own, received into directly (big produce
  requests are copied once). That buffer starts at the largest of FRAME_BUFFER_START (32 KiB), twice
  the bytes of the frame already arrived, and eight times them up to FRAME_BUFFER_EAGER (2 MiB), capped
  by the frame's size; it doubles when full. So memory follows what has arrived, never what a size
  prefix promises: a client that sends a 100 MiB prefix and then a byte a second holds 32 KiB, and no
  frame buffer exceeds max(2 MiB, 2 x its bytes received). The eager factor lets a 1 MiB produce
  request whose first read brought 128 KiB or more get its whole buffer at once: a growth costs a
  realloc and zero-filling, and growing nearly every 1 MiB request made their receive 2x slower.
  An idle connection holds no buffer at all.
- Memory pool (`queued.max.request.bytes`, Kafka's MemoryPool): every frame counts against the pool
  from its size prefix to the end of its handling (a frame being received counts its full size, so a
  connection that started a frame can always finish it). A connection that needs a new frame while
  the pool is used up stops reading (its bytes stay in the kernel) until a frame is released; as in
  Kafka the pool is not strict, one read may overshoot it. -1 or 0 (Kafka's default): unbounded.
  When the frames held fall to a quarter of their high-water mark after a flood of at least
  TRIM_AFTER_BYTES, glibc's malloc_trim returns the freed heap to the kernel (in a worker thread).
- Processing: frames wait in a per-connection FIFO; one task per connection hands them one at a time
  to the request handler (Kafka's one-in-flight-per-connection), so responses leave in request order.
  Reading continues meanwhile (pipelining) until `queued.max.requests` frames or `MAX_QUEUED_BYTES`
  bytes wait: then reading pauses, and resumes when the queue has drained to half of both limits.
- Throttling: the request path's quota stage may mute a connection (`ClientInfo.throttle`, Kafka's
  muted channel, KIP-219); after sending its response the connection then reads and handles nothing
  until the mute ends. The default quota manager never mutes.
- Writing: the handler returns the response chunks (header and body, without the size prefix);
  runs of bytes go out with `sendmsg` (flagged MSG_MORE when a file slice follows), each `FileSlice`
  with `os.sendfile` from its fd at its offset (the file position is never touched). When the socket
  buffer is full the writer waits for writability with `loop.add_writer`. A response of bytes only
  is sent at once when no other request of the connection is queued; otherwise it joins the
  connection's outbox, which goes out in one `sendmsg` when the worker next waits (a handler or a
  mute waiting, or nothing left to handle: a callback of the same loop turn), or at once when it
  holds OUTBOX_MAX_BYTES or as many buffers as one sendmsg takes. So a client that pipelines
  (librdkafka keeps several Produce requests in flight per connection) gets the responses handled in
  one turn with one system call, and no response waits for a later request's handling. A response
  with a `FileSlice` sends the outbox first.
- Observing (the broker's request metrics, server/metrics.py): with a `RequestObserver`, each frame
  is stamped when queued, and once answered (the response sent, or none for acks=0) the observer gets
  the frame with its arrival, start and end times. Without one, nothing is stamped.
- End of stream: the frames already received are still processed (an acks=0 produce sent just
  before the client closed is appended, as in Kafka), then the connection closes.
- Errors: the handler raises `CloseConnection` to drop a client (unknown API key, undecodable
  request), optionally with a last response sent before the close and a delay held after it (a
  failed SASL authentication); any other exception is logged with the client address and closes
  the connection. A client that closes its side (broken pipe, connection reset) is logged at
  DEBUG. A connection's failure never affects another one.

Connection limits (values in limits.ConnectionLimits, from Kafka's configs):
- `max.connections`, capped by the file-descriptor budget (limits.py: descriptors stay reserved for
  the process and for storage). At the limit the broker stops accepting on every listener, as Kafka's
  acceptor blocks: new clients wait in the kernel's listen backlog (their connect succeeds, their
  first request is answered once a connection closes; a client's own timeout may fire first). A
  WARNING is logged (at most every LOG_INTERVAL_S). Kafka exempts the inter-broker listener, closing
  the least recently used connection of another listener instead; odradek has no inter-broker
  connections, so every listener is treated alike.
- `max.connections.per.ip` and `max.connections.per.ip.overrides`: a connection beyond its address's
  limit is accepted and closed at once, with Kafka's INFO line "Rejected connection from ..." (at
  most once per address per LOG_INTERVAL_S, with the count of those not logged).
- `max.connection.creation.rate`: accepts are paced by a token bucket (a burst of one second's worth,
  then the rate); beyond it accepting pauses until the next token, as Kafka's acceptor waits out its
  throttle time. Kafka measures the rate over quota.window.num x quota.window.size.seconds.
- `connections.max.idle.ms` (default 10 minutes, negative: never): a connection with no bytes
  received or sent for that long, and no request queued or being handled, is closed (checked every
  half interval, at most every second). One INFO line per check counts the closed connections.
- Dynamic broker configs replace the limits (`update_limits`): later accepts check the new
  max.connections / max.connections.per.ip / overrides; open connections stay.
- An accept that fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses
  accepting for ACCEPT_RETRY_S and logs at most once per LOG_INTERVAL_S: no spin, no log flood.

Listeners: `bind(listener_name, host, port, security_protocol, tls)` once per entry of `listeners`
(PLAINTEXT and SASL_PLAINTEXT, or SSL / SASL_SSL with the listener's `ListenerSsl`; an address that
cannot be bound is an OSError naming the listener and the address, in Kafka's words "Socket server
failed to bind to HOST:PORT: REASON."); every connection knows, from its accept, the listener it arrived on
(`ClientInfo.listener`; handlers answer with that listener's advertised endpoints, as Kafka does),
its security protocol and its principal (security/principal.py: User:ANONYMOUS on PLAINTEXT; on SSL
the client certificate's, once the handshake is done). A listener given an `Authenticator`
(`authenticate(listener, ...)`: the SASL gate of SASL_PLAINTEXT / SASL_SSL listeners,
server/sasl_authenticator.py) routes each of its connections' frames through that connection's
own gate, which sets `ClientInfo.principal` once the client has authenticated; the other listeners'
frames go straight to the request handler, so they pay nothing for it.

TLS (`TlsConnection`, a `Connection` of an SSL or SASL_SSL listener): an SSLObject over memory BIOs
on the same raw non-blocking socket. The handshake runs before any frame is read; a failed one
(untrusted or expired certificate, no certificate under ssl.client.auth=required, not TLS at all)
is logged at INFO in Kafka's words "Failed authentication with HOST:PORT (SSL handshake failed:
REASON)" and the connection closed. Decrypted bytes go through `Connection`'s framing unchanged (the
TLS stream offers it `recv_into`); plaintext the TLS engine still holds after a read that filled the
buffer is read on the next loop iteration, since the socket will not signal it. A response is
encrypted TLS_SEND_BATCH bytes at a time and its `FileSlice`s read with `os.pread` in pieces of that
size (no sendfile through TLS), so a fetch of any size holds one batch of plaintext and its
ciphertext at once. PLAINTEXT connections are the plain `Connection`: no TLS check on their path.

Shutdown: `close()` stops accepting on every listener, then `drain()` lets each connection finish
the frames already received (bounded by a timeout) before the sockets close.

Callers: the broker (creates `SocketServer` with the dispatcher as its request handler and
`limits.connection_limits(config)`).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import math
import os
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from odradek.protocol.primitives import FileSlice
from odradek.scheduler import Job, Lane, Lanes, Scheduler, Timer
from odradek.security.principal import ANONYMOUS, PLAINTEXT, SSL, KafkaPrincipal, principal_for
from odradek.security.ssl_config import TLS_SECURITY_PROTOCOLS, ListenerSsl
from odradek.server.limits import INT_MAX, ConnectionLimits, normalize_ip, release_free_memory

log = logging.getLogger(__name__)

RECEIVE_BUFFER_SIZE = 256 * 1024
TAIL_MAX = 16 * 1024
FRAME_BUFFER_START = 32 * 1024
FRAME_BUFFER_EAGER = 2 << 20
FRAME_BUFFER_EAGER_FACTOR = 8
FRAME_BUFFER_GROWTH = 2
MAX_QUEUED_BYTES = 16 << 20
TRIM_AFTER_BYTES = 16 << 20
ACCEPT_BATCH = 64
ACCEPT_RETRY_S = 1.0
LOG_INTERVAL_S = 10.0
PER_IP_LOGS_MAX = 1024
_FRAME_SIZE = struct.Struct(">i")
_SIZE_PREFIX = 4
_SENDMSG_MAX_BUFFERS = 512
OUTBOX_MAX_BYTES = 256 * 1024  # responses held for one sendmsg at most; more are sent at once
TLS_SEND_BATCH = 256 * 1024
TLS_RECEIVE_SIZE = 256 * 1024
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_PEER_GONE = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.ENOTCONN})
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

ResponseChunk = bytes | bytearray | memoryview | FileSlice


@dataclass(slots=True, eq=False)
class ClientInfo:
    """Who sent a request, set once per connection at accept: the peer address, a connection id
    unique within the server, the name of the listener the connection arrived on, its security
    protocol and the connection's principal. `muted_until` (event loop time; 0: never) is the
    connection-level mute the request path's quota stage sets (`throttle`)."""

    host: str
    port: int
    connection_id: int
    listener: str = PLAINTEXT
    security_protocol: str = PLAINTEXT
    principal: KafkaPrincipal = ANONYMOUS
    muted_until: float = 0.0
    throttle_ms: int = 0  # the throttle of the request being answered, for the request metrics

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def throttle(self, throttle_ms: int) -> None:
        """Mute the connection for `throttle_ms`: no further request of it is read or handled
        before then (the response to this one still goes out at once)."""
        self.muted_until = max(self.muted_until, time.monotonic() + throttle_ms / 1000)
        self.throttle_ms = max(self.throttle_ms, throttle_ms)


class CloseConnection(Exception):
    """Raised by a request handler to close the client's connection: without answering, or after
    sending `response` and then waiting `delay_s` while reading nothing (Kafka's delayed close of a
    failed authentication, connection.failed.authentication.delay.ms)."""

    def __init__(
        self, reason: str = "", response: Sequence[ResponseChunk] | None = None, delay_s: float = 0.0
    ) -> None:
        super().__init__(reason)
        self.response = response
        self.delay_s = delay_s


RequestHandler = Callable[[bytes | bytearray, ClientInfo], Awaitable[Sequence[ResponseChunk] | None]]
# A listener's authentication (SASL): given the server's request handler and a new connection, the
# request handler of that connection (server/sasl_authenticator.py). Listeners without one hand
# every frame straight to the server's handler.
Authenticator = Callable[[RequestHandler, "Connection"], RequestHandler]
# Told of each answered request: its frame, when it arrived, was taken from the queue, was answered
# (time.monotonic() seconds), and the throttle time in ms the quota stage gave it (0: none).
RequestObserver = Callable[[bytes | bytearray, float, float, float, int], None]


class ThrottledLog:
    """A recurring event logged at most once per LOG_INTERVAL_S, with the count of those not logged."""

    def __init__(self, level: int) -> None:
        self._level = level
        self._last = -LOG_INTERVAL_S
        self._suppressed = 0

    def __call__(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < LOG_INTERVAL_S:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more since the last report)"
        log.log(self._level, message, *args)
        self._last, self._suppressed = now, 0


class MemoryPool:
    """The bytes of request frames held by the connections (`queued.max.request.bytes`; <= 0:
    unbounded), and connections waiting for room. Gives freed heap back to the kernel after a flood."""

    def __init__(self, capacity: int, lanes: Lanes) -> None:
        self.capacity = capacity
        self._lanes = lanes
        self.used = 0
        self._high_water = 0
        self._trim_at = -1  # trim once `used` falls to this (a quarter of a high water >= TRIM_AFTER_BYTES)
        self._waiting: dict[Connection, None] = {}
        self._trimming = False

    @property
    def exhausted(self) -> bool:
        return 0 < self.capacity <= self.used

    def reserve(self, size: int) -> None:
        self.used += size
        if self.used > self._high_water:
            self._high_water = self.used
            if self._high_water - self._high_water // 4 >= TRIM_AFTER_BYTES:
                self._trim_at = self._high_water // 4

    def release(self, size: int) -> None:
        self.used -= size
        if self._waiting and not self.exhausted:
            waiting, self._waiting = self._waiting, {}
            for connection in waiting:
                connection.maybe_resume_reading()
        if self.used <= self._trim_at:
            self._high_water, self._trim_at = self.used, -1
            self._trim()

    def wait(self, connection: Connection) -> None:
        self._waiting[connection] = None

    def forget(self, connection: Connection) -> None:
        self._waiting.pop(connection, None)

    def _trim(self) -> None:
        if self._trimming:
            return
        self._trimming = True
        done = asyncio.wrap_future(self._lanes.submit(Lane.REQUEST, release_free_memory))
        done.add_done_callback(self._trimmed)

    def _trimmed(self, _: asyncio.Future[None]) -> None:
        self._trimming = False


class Connection:
    """One client connection: framing, the ordered request queue and the writer."""

    def __init__(
        self,
        sock: socket.socket,
        client: ClientInfo,
        handler: RequestHandler,
        limits: ConnectionLimits,
        receive_buffer: bytearray,
        pool: MemoryPool,
        on_closed: Callable[[Connection], None],
        observer: RequestObserver | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self.client = client
        self._handler = handler
        self._max_request_size = self._default_max_request_size = limits.max_request_size
        self._max_request_size_key = "socket.request.max.bytes"
        self._max_queued = limits.max_queued_requests
        self._shared_buffer = receive_buffer
        self._shared = memoryview(receive_buffer)
        self._pool = pool
        self._on_closed = on_closed
        self._tail = b""
        self._frame: bytearray | None = None
        self._frame_size = 0
        self._filled = 0
        self._held = 0
        self._queue: collections.deque[bytearray] = collections.deque()
        self._queued_bytes = 0
        self._observer = observer
        self._arrived: collections.deque[float] = collections.deque()  # per queued frame, when observed
        self._handling = False
        self.last_active = self._loop.time()
        self._idle: asyncio.Future[None] | None = None  # what the worker awaits with nothing to do
        self._reading = False
        self._mute_end: asyncio.Future[None] | None = None  # while throttled (`_wait_unmuted`)
        # responses ready to send, sent together when the worker next waits (`_flush_outbox`), and
        # what a short write left of them for the worker to send first (`_unsent`)
        self._outbox: list[bytes | bytearray | memoryview] = []
        self._outbox_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._unsent: list[memoryview] = []
        self._closed = False
        self._draining = False
        self._worker = self._loop.create_task(self._process(), name=f"connection-{client}")
        self._resume_reading()

    @property
    def closed(self) -> bool:
        return self._closed

    def authenticate_with(self, authenticator: Authenticator) -> None:
        """Route this connection's frames through `authenticator` (before its first frame)."""
        self._handler = authenticator(self._handler, self)

    def limit_request_size(self, size: int | None, key: str = "socket.request.max.bytes") -> None:
        """Refuse frames above `size` bytes (the config `key`, named in the log) from now on; None:
        back to socket.request.max.bytes."""
        if size is None:
            size = self._default_max_request_size
        self._max_request_size, self._max_request_size_key = size, key

    def idle_for(self, now: float) -> float:
        """Seconds since the last byte in or out; 0 while a request waits or is being handled (the
        worker is busy from a wake-up until the queue is empty again)."""
        if self._handling or self._queue:
            return 0.0
        return now - self.last_active

    # -- reading ---------------------------------------------------------------------------------

    def _resume_reading(self) -> None:
        if not self._reading and not self._closed and not self._draining and self._mute_end is None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def _pause_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def maybe_resume_reading(self) -> None:
        """Read again unless the request queue is still above half of its limits."""
        if len(self._queue) <= self._max_queued // 2 and self._queued_bytes <= MAX_QUEUED_BYTES // 2:
            self._resume_reading()

    def _on_readable(self) -> None:
        if self._frame is None and self._pool.exhausted:
            self._pause_reading()
            self._pool.wait(self)
            return
        try:
            if self._frame is not None:
                self._receive_frame_part()
            else:
                self._receive_shared()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close_after_error("read failed", exc)

    def _receive_shared(self) -> None:
        """Receive into the shared buffer behind the tail kept from the last read, then cut frames."""
        view, kept = self._shared, len(self._tail)
        if kept:
            view[:kept] = self._tail
        received = self._sock.recv_into(view[kept:])
        self._tail = b""
        if received == 0:
            self.start_draining()
            return
        self.last_active = self._loop.time()
        self._cut_frames(kept + received)

    def _cut_frames(self, end: int) -> None:
        buffer, view, start = self._shared_buffer, self._shared, 0
        frames = []
        while end - start >= _SIZE_PREFIX:
            (size,) = _FRAME_SIZE.unpack_from(buffer, start)
            if size < 0 or size > self._max_request_size:
                log.warning(
                    "Closing connection from %s: request size %d is outside 0..%d (%s)",
                    self.client,
                    size,
                    self._max_request_size,
                    self._max_request_size_key,
                )
                self.close("invalid request size")
                return
            body = start + _SIZE_PREFIX
            if end - body >= size:
                frames.append(buffer[body : body + size])
                start = body + size
            elif size > TAIL_MAX:
                self._start_frame(size, view[body:end])
                start = end
            else:
                break
        if start < end:
            self._tail = view[start:end].tobytes()
        if frames:
            self._enqueue(frames)

    def _start_frame(self, size: int, arrived: memoryview) -> None:
        """A frame too big to keep as a tail: its own buffer, sized by what has arrived. The pool
        counts its full size at once, so that a frame begun can always be finished."""
        eager = min(FRAME_BUFFER_EAGER_FACTOR * len(arrived), FRAME_BUFFER_EAGER)
        capacity = min(size, max(FRAME_BUFFER_START, eager, FRAME_BUFFER_GROWTH * len(arrived)))
        frame = bytearray(capacity)
        frame[: len(arrived)] = arrived
        self._frame, self._frame_size, self._filled = frame, size, len(arrived)
        self._hold(size)

    def _receive_frame_part(self) -> None:
        frame = self._frame
        assert frame is not None
        if self._filled == len(frame):
            grown = min(self._frame_size, FRAME_BUFFER_GROWTH * len(frame))
            frame.extend(bytes(grown - len(frame)))
        received = self._sock.recv_into(memoryview(frame)[self._filled :])
        if received == 0:
            self.start_draining()
            return
        self.last_active = self._loop.time()
        self._filled += received
        if self._filled == self._frame_size:
            self._frame = None
            self._enqueue([frame], held=True)

    def _hold(self, size: int) -> None:
        self._held += size
        self._pool.reserve(size)

    def _release(self, size: int) -> None:
        self._held -= size
        self._pool.release(size)

    def _enqueue(self, frames: list[bytearray], held: bool = False) -> None:
        size = sum(map(len, frames))
        if not held:
            self._hold(size)
        self._queue.extend(frames)
        if self._observer is not None:
            self._arrived.extend([time.monotonic()] * len(frames))
        self._queued_bytes += size
        self._wake()
        if len(self._queue) >= self._max_queued or self._queued_bytes >= MAX_QUEUED_BYTES:
            self._pause_reading()

    # -- processing and writing --------------------------------------------------------------------

    def _wake(self) -> None:
        """Wake the worker if it waits for work (it looks at its queue, `_unsent` and draining before
        it waits, all on this loop, so a wake-up with no one waiting is not lost)."""
        idle = self._idle
        if idle is not None:
            self._idle = None
            if not idle.done():
                idle.set_result(None)

    async def _process(self) -> None:
        try:
            while not self._closed:
                if self._unsent:
                    await self._send_views(self._unsent, 0, 0)
                if not self._queue:
                    if self._draining:
                        await self._send_ready()
                        break
                    self.last_active = self._loop.time()
                    self._handling = False
                    self._idle = self._loop.create_future()
                    await self._idle
                    self._handling = True
                    continue
                frame = self._queue.popleft()
                size = len(frame)
                self._queued_bytes -= size
                if not self._reading:
                    self.maybe_resume_reading()
                observer = self._observer
                if observer is not None:
                    arrived, started = self._arrived.popleft(), time.monotonic()
                response = await self._handler(frame, self.client)
                self._held -= size
                self._pool.release(size)
                if response is not None:
                    await self._send_response(response)  # send
                if observer is not None:
                    observer(frame, arrived, started, time.monotonic(), self.client.throttle_ms)
                self.client.throttle_ms = 0
                if self.client.muted_until:
                    await self._send_ready()  # the whole response before the mute (KIP-219)
                    await self._wait_unmuted()
        except CloseConnection as exc:
            if exc.response is not None or exc.delay_s > 0:
                await self._answer_then_close(exc)
            self.close(None)  # the handler has logged why
        except OSError as exc:
            self._close_after_error("write failed", exc)
        except Exception:
            log.exception("Closing connection from %s after an unexpected error", self.client)
            self.close("unexpected error")
        finally:
            if self._draining:
                self.close(None)

    async def _answer_then_close(self, exc: CloseConnection) -> None:
        """Send the closing request's response, then hold the connection `delay_s` without reading."""
        self._pause_reading()
        self._draining = True
        try:
            if exc.response is not None:
                await self._send_response(exc.response)
                await self._send_ready()
            await asyncio.sleep(exc.delay_s)
        except OSError as error:
            log.debug("Connection from %s gone before its last response was sent: %s", self.client, error)

    async def _wait_unmuted(self) -> None:
        """A throttled connection (`ClientInfo.throttle`): read and handle nothing until its mute ends."""
        delay = self.client.muted_until - time.monotonic()
        self.client.muted_until = 0.0
        if delay > 0:
            self._pause_reading()
            self._mute_end = self._loop.create_future()
            timer = self._loop.call_later(delay, _set_result_once, self._mute_end)
            try:
                await self._mute_end
            finally:
                timer.cancel()
                self._mute_end = None
            self.maybe_resume_reading()

    async def _send_response(self, chunks: Sequence[ResponseChunk]) -> None:
        """Send one response after those before it. A response of buffers only joins the outbox,
        sent with one `sendmsg` at once when no other request is queued, else when the worker next
        waits (a handler or a mute waiting) or the outbox is full; one with a `FileSlice` is sent at
        once, after the outbox, with `sendfile` for the slice."""
        if not any(isinstance(chunk, FileSlice) for chunk in chunks):
            total = sum(map(len, chunks))
            self._outbox.append(total.to_bytes(_SIZE_PREFIX, "big", signed=True))
            self._outbox += chunks  # type: ignore[arg-type]
            self._outbox_bytes += _SIZE_PREFIX + total
            if not self._queue:  # nothing else to answer in this turn: no reason to wait
                self._flush_outbox()
            elif len(self._outbox) >= _SENDMSG_MAX_BUFFERS or self._outbox_bytes >= OUTBOX_MAX_BYTES:
                await self._send_ready()
            elif self._flush_handle is None:
                self._flush_handle = self._loop.call_soon(self._flush_outbox)
            return
        await self._send_ready()
        await self._send_with_files(chunks)

    async def _send_ready(self) -> None:
        """Send the outbox and anything a short write left, waiting for the socket as needed."""
        self._flush_outbox()
        if self._unsent:
            await self._send_views(self._unsent, 0, 0)

    def _flush_outbox(self) -> None:
        """One `sendmsg` of the outbox (also the callback `_send_response` schedules); what does not
        fit in the socket buffer goes to `_unsent`, which the worker sends before anything else."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        buffers, total = self._outbox, self._outbox_bytes
        if not buffers or self._closed:
            return
        self._outbox, self._outbox_bytes = [], 0
        if self._unsent:  # still behind an earlier short write
            self._unsent += [memoryview(b).cast("B") for b in buffers if len(b)]
            return
        sent = 0
        try:
            sent = self._sock.sendmsg(buffers[:_SENDMSG_MAX_BUFFERS], [], 0)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._close_after_error("write failed", exc)
            return
        if sent == total:
            return
        views = [memoryview(b).cast("B") for b in buffers if len(b)]
        _skip_sent(views, sent)
        self._unsent = views
        self._wake()  # an idle worker wakes to send the rest

    async def _send_with_files(self, chunks: Sequence[ResponseChunk]) -> None:
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
        """Stop reading; the worker answers the frames already queued, then closes (a throttled
        connection's mute ends now: a shutdown does not wait out a throttle time)."""
        self._draining = True
        self._pause_reading()
        self._wake()
        if self._mute_end is not None:
            _set_result_once(self._mute_end)

    async def wait_closed(self) -> None:
        await asyncio.wait({self._worker})

    def _close_after_error(self, what: str, exc: OSError) -> None:
        """A client that went away is routine (DEBUG); any other socket error is worth an INFO line."""
        self.close(f"{what}: {exc}", logging.DEBUG if exc.errno in _PEER_GONE else logging.INFO)

    def close(self, reason: str | None, level: int = logging.INFO) -> None:
        if self._closed:
            return
        self._closed = True
        if reason is not None:
            log.log(level, "Connection from %s closed: %s", self.client, reason)
        self._pause_reading()
        self._loop.remove_writer(self._fd)
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._queue.clear()
        self._arrived.clear()
        self._queued_bytes = 0
        self._tail, self._frame = b"", None
        self._pool.forget(self)
        if self._held:
            self._release(self._held)
        if self._worker is not asyncio.current_task():
            self._worker.cancel()
        self._sock.close()
        self._on_closed(self)


class _TlsStream:
    """The client's socket seen through TLS (an SSLObject over memory BIOs), with the two methods the
    reading code of `Connection` calls on a socket: `recv_into` gives plaintext (0: end of stream),
    `close`. Ciphertext to send (handshake records, encrypted responses) goes out with `flush`."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, raw_buffer: bytearray) -> None:
        self.raw = sock
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._raw_buffer = memoryview(raw_buffer)
        self._unsent = memoryview(b"")
        self.filled = False  # the last recv_into filled its buffer: more plaintext may be held here

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()

    def receive_raw(self) -> bool:
        """Move what the socket holds (up to TLS_RECEIVE_SIZE) into the TLS engine; False at end of
        stream. BlockingIOError when nothing has arrived."""
        received = self.raw.recv_into(self._raw_buffer)
        if received:
            self._incoming.write(self._raw_buffer[:received])
        return received > 0

    def recv_into(self, view: memoryview) -> int:
        """Plaintext into `view`: every complete record received, up to its length."""
        self.filled, total, wanted = False, 0, len(view)
        while total < wanted:
            try:
                received = cast(int, self.tls.read(wanted - total, view[total:]))
            except ssl.SSLWantReadError:
                self.flush()  # a TLS 1.3 post-handshake message may have been answered
                try:
                    if not self.receive_raw():
                        break
                except (BlockingIOError, InterruptedError):
                    if total:
                        break
                    raise
                continue
            if not received:  # the client's close_notify
                break
            total += received
        self.filled = total == wanted
        return total

    def flush(self) -> bool:
        """Send the ciphertext waiting, until the socket takes no more; True once all of it is out.
        A partly sent buffer is resumed from a view (no copy)."""
        while True:
            if not self._unsent:
                if not self._outgoing.pending:
                    return True
                self._unsent = memoryview(self._outgoing.read())
            try:
                sent = self.raw.send(self._unsent)
            except (BlockingIOError, InterruptedError):
                return False
            self._unsent = self._unsent[sent:]


class TlsConnection(Connection):
    """A connection of an SSL or SASL_SSL listener: the TLS handshake before any frame, then the same
    framing and request path as `Connection` over the decrypted bytes. On SSL the principal comes from
    the client's certificate once the handshake is done. A response is encrypted TLS_SEND_BATCH bytes
    at a time; a `FileSlice` is read with `os.pread` in pieces of at most that size (TLS cannot use
    sendfile), so a fetch holds at most one batch of plaintext and its ciphertext at once."""

    def __init__(
        self,
        sock: socket.socket,
        client: ClientInfo,
        tls: ListenerSsl,
        raw_buffer: bytearray,
        *args: object,
        **kwargs: object,
    ) -> None:
        self._tls_stream = _TlsStream(sock, tls.server_context, raw_buffer)
        self._tls_settings = tls
        self._established = False
        self._sending = False
        super().__init__(self._tls_stream, client, *args, **kwargs)  # type: ignore[arg-type]

    # -- handshake and reading ---------------------------------------------------------------------

    def _on_readable(self) -> None:
        if not self._established and not self._handshake():
            return
        super()._on_readable()
        if self._tls_stream.filled:
            self._loop.call_soon(self._read_held)

    def _resume_reading(self) -> None:
        super()._resume_reading()
        if self._reading and self._tls_stream.filled:
            self._loop.call_soon(self._read_held)

    def _read_held(self) -> None:
        """Plaintext held by the TLS engine: the socket will not signal it, so read it now."""
        if self._reading and not self._closed:
            self._on_readable()

    def _handshake(self) -> bool:
        """Advance the handshake with what has arrived; True once it is complete."""
        stream = self._tls_stream
        try:
            while True:
                try:
                    stream.tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self._flush_soon()
                    if not stream.receive_raw():
                        self.close("end of stream during the SSL handshake", logging.DEBUG)
                        return False
        except (BlockingIOError, InterruptedError):
            return False
        except ssl.SSLError as exc:
            stream.flush()  # the alert, if the socket takes it
            reason = getattr(exc, "verify_message", None) or exc.reason or exc
            log.info("Failed authentication with %s (SSL handshake failed: %s)", self.client, reason)
            self.close(None)
            return False
        except OSError as exc:
            self._close_after_error("SSL handshake failed", exc)
            return False
        self._flush_soon()
        return self._authenticated()

    def _authenticated(self) -> bool:
        self._established = True
        self.last_active = self._loop.time()
        if self.client.security_protocol != SSL:
            return True  # SASL_SSL: the principal comes from SASL
        certificate = self._tls_stream.tls.getpeercert()
        subject = cast(
            Sequence[Sequence[tuple[str, str]]], certificate.get("subject") if certificate else None
        )
        try:
            self.client.principal = self._tls_settings.principal_mapper.principal(subject)
        except ValueError as exc:
            log.info("Failed authentication with %s (%s)", self.client, exc)
            self.close(None)
            return False
        log.debug("SSL handshake completed with %s, principal %s", self.client, self.client.principal)
        return True

    def _flush_soon(self) -> None:
        """Send the ciphertext the read side produced; what the socket does not take now goes out when
        it is writable (the writer of a response, if one is sending, sends it first)."""
        if not self._tls_stream.flush() and not self._sending:
            self._loop.add_writer(self._fd, self._flush_when_writable)

    def _flush_when_writable(self) -> None:
        if self._tls_stream.flush() or self._closed:
            self._loop.remove_writer(self._fd)

    # -- writing -----------------------------------------------------------------------------------

    async def _send_response(self, chunks: Sequence[ResponseChunk]) -> None:
        self._sending = True
        try:
            total = sum(c.length if isinstance(c, FileSlice) else len(c) for c in chunks)
            batch: list[bytes | bytearray | memoryview] = [total.to_bytes(_SIZE_PREFIX, "big", signed=True)]
            size = _SIZE_PREFIX
            for chunk in chunks:
                for piece in _file_pieces(chunk) if isinstance(chunk, FileSlice) else (chunk,):
                    batch.append(piece)
                    size += len(piece)
                    if size >= TLS_SEND_BATCH:
                        await self._send_encrypted(batch)
                        batch, size = [], 0
            await self._send_encrypted(batch)
        finally:
            self._sending = False

    async def _send_encrypted(self, batch: list[bytes | bytearray | memoryview]) -> None:
        if batch:
            self._tls_stream.tls.write(batch[0] if len(batch) == 1 else b"".join(batch))
        while not self._tls_stream.flush():
            await self._writable()


def _file_pieces(chunk: FileSlice) -> Iterator[bytes]:
    """A file slice read in pieces of at most TLS_SEND_BATCH bytes (the file position is untouched)."""
    offset, remaining = chunk.offset, chunk.length
    while remaining > 0:
        piece = os.pread(chunk.fd, min(remaining, TLS_SEND_BATCH), offset)
        if not piece:
            raise OSError(errno.EIO, f"file ended {remaining} bytes short of the slice {chunk}")
        offset += len(piece)
        remaining -= len(piece)
        yield piece


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


class CreationRate:
    """`max.connection.creation.rate` as a token bucket: a burst of one second's worth, then `rate`
    per second. `delay()` is 0 when a connection may be accepted now, else the seconds until it may;
    `record()` counts an accepted connection."""

    def __init__(self, rate: int, now: float) -> None:
        self._rate = rate
        self._burst = max(rate, 1)
        self._tokens = float(self._burst)
        self._last = now

    def delay(self, now: float) -> float:
        if self._rate >= INT_MAX:
            return 0.0
        if self._rate <= 0:
            return ACCEPT_RETRY_S
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self._rate

    def record(self) -> None:
        if self._rate < INT_MAX:
            self._tokens -= 1


class SocketServer:
    """Accepts connections on its listeners within the connection limits and runs a `Connection` for
    each."""

    def __init__(
        self,
        handler: RequestHandler,
        scheduler: Scheduler,
        limits: ConnectionLimits | None = None,
        observer: RequestObserver | None = None,
    ) -> None:
        self._handler = handler
        self._scheduler = scheduler
        self._observer = observer
        self._limits = limits or ConnectionLimits()
        self._receive_buffer = bytearray(RECEIVE_BUFFER_SIZE)
        self._pool = MemoryPool(self._limits.queued_max_request_bytes, scheduler.lanes)
        self._listen_socks: dict[str, socket.socket] = {}
        self._security_protocols: dict[str, str] = {}
        self._authenticators: dict[str, Authenticator] = {}
        self._tls: dict[str, ListenerSsl] = {}
        self._tls_receive_buffer = bytearray(TLS_RECEIVE_SIZE)  # ciphertext, shared as _receive_buffer
        self._connections: set[Connection] = set()
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._next_connection_id = 0
        self._accepting = False
        self._accept_paused = False
        self._paused_until_ms = 0  # on the scheduler's clock, as the accept-resumption timer
        self._rate: CreationRate | None = None
        self._idle_expiration: Job | None = None
        self._accept_resumption: Timer | None = None
        self._log_at_limit = ThrottledLog(logging.WARNING)
        self._log_rate = ThrottledLog(logging.INFO)
        self._log_per_ip: dict[str, ThrottledLog] = {}
        self._log_accept_failed = ThrottledLog(logging.WARNING)

    @property
    def connections(self) -> int:
        return len(self._connections)

    def connections_by_listener(self) -> collections.Counter[str]:
        """Open connections per listener name."""
        return collections.Counter(connection.client.listener for connection in self._connections)

    @property
    def memory_pool(self) -> MemoryPool:
        return self._pool

    @property
    def limits(self) -> ConnectionLimits:
        return self._limits

    def update_limits(self, limits: ConnectionLimits) -> None:
        """Check later accepts against `limits` (connections already open stay open)."""
        self._limits = limits

    async def bind(
        self,
        listener: str,
        host: str,
        port: int,
        security_protocol: str = PLAINTEXT,
        tls: ListenerSsl | None = None,
    ) -> tuple[str, int]:
        """Bind a listener (empty host = every interface) speaking `security_protocol` without
        accepting yet (`tls`: the listener's TLS settings, for SSL and SASL_SSL); returns the bound
        address."""
        principal_for(security_protocol)  # refuses a protocol this broker does not speak
        if (security_protocol in TLS_SECURITY_PROTOCOLS) != (tls is not None):
            raise ValueError(f"listener {listener}: TLS settings go with SSL and SASL_SSL only")
        infos = await asyncio.get_running_loop().getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:  # Kafka's message, naming the listener too
            sock.close()
            ip = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
            raise OSError(
                f"Socket server failed to bind to {ip}:{port} (listener {listener}): {exc.strerror}."
            ) from exc
        sock.setblocking(False)
        self._listen_socks[listener] = sock
        self._security_protocols[listener] = security_protocol
        if tls is not None:
            self._tls[listener] = tls
        bound = sock.getsockname()
        return bound[0], bound[1]

    def authenticate(self, listener: str, authenticator: Authenticator) -> None:
        """Authenticate every connection of `listener` with `authenticator` (its SASL gate)."""
        self._authenticators[listener] = authenticator

    def listen(self) -> None:
        """Start accepting connections on every bound listener, and expiring idle ones."""
        assert self._listen_socks, "bind() first"
        loop = asyncio.get_running_loop()
        for sock in self._listen_socks.values():
            sock.listen(socket.SOMAXCONN)
        self._accepting = True
        self._rate = CreationRate(self._limits.max_connection_creation_rate, loop.time())
        self._resume_accepting()
        if self._limits.connections_max_idle_ms >= 0:
            interval_ms = min(max(self._limits.connections_max_idle_ms // 2, 10), 1000)
            self._idle_expiration = self._scheduler.every(
                "idle-connections", interval_ms, self._expire_idle_connections
            )

    # -- accepting -----------------------------------------------------------------------------------

    def _resume_accepting(self) -> None:
        loop = asyncio.get_running_loop()
        for listener, sock in self._listen_socks.items():
            loop.add_reader(sock.fileno(), self._on_acceptable, listener, sock)
        self._accept_paused = False

    def _pause_accepting(self, seconds: float = 0.0) -> None:
        loop = asyncio.get_running_loop()
        if not self._accept_paused:
            for sock in self._listen_socks.values():
                loop.remove_reader(sock.fileno())
            self._accept_paused = True
        if seconds > 0:
            self._paused_until_ms = self._scheduler.clock.monotonic_ms() + math.ceil(seconds * 1000)
            if self._accept_resumption is not None:
                self._accept_resumption.cancel()
            self._accept_resumption = self._scheduler.at(
                "accept-resumption", self._paused_until_ms, self._maybe_resume_accepting
            )

    def _maybe_resume_accepting(self) -> None:
        if (
            self._accepting
            and self._accept_paused
            and self._scheduler.clock.monotonic_ms() >= self._paused_until_ms
            and len(self._connections) < self._limits.max_connections
        ):
            self._resume_accepting()

    def _on_acceptable(self, listener: str, listen_sock: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            if not self._may_accept():
                return
            try:
                sock, address = listen_sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._log_accept_failed(
                        "Accept failed: %s; accepting paused for %.0f s (%d client connections open)",
                        exc,
                        ACCEPT_RETRY_S,
                        len(self._connections),
                    )
                    self._pause_accepting(ACCEPT_RETRY_S)
                    return
                continue  # the client gave up before we accepted (ECONNABORTED, ...)
            assert self._rate is not None
            self._rate.record()
            self._accepted(sock, address, listener)

    def _may_accept(self) -> bool:
        """Within max.connections and max.connection.creation.rate; otherwise pause accepting."""
        loop = asyncio.get_running_loop()
        if len(self._connections) >= self._limits.max_connections:
            self._log_at_limit(
                "%d connections open, the limit (max.connections, or the file descriptors left after "
                "the storage reserve): new connections wait until one closes",
                len(self._connections),
            )
            self._pause_accepting()
            return False
        assert self._rate is not None
        delay = self._rate.delay(loop.time())
        if delay > 0:
            self._log_rate(
                "Connection creation rate above max.connection.creation.rate %d/s: accepting paused",
                self._limits.max_connection_creation_rate,
            )
            self._pause_accepting(delay)
            return False
        return True

    def _accepted(self, sock: socket.socket, address: tuple, listener: str) -> None:
        ip = normalize_ip(str(address[0]))
        allowed = self._limits.max_for_ip(ip)
        if self._per_ip[ip] >= allowed:
            self._per_ip_log(ip)(
                "Rejected connection from %s, address already has the configured maximum of %d "
                "connections (max.connections.per.ip)",
                ip,
                allowed,
            )
            sock.close()
            return
        self._per_ip[ip] += 1
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_connection_id += 1
        protocol = self._security_protocols[listener]
        client = ClientInfo(
            ip, int(address[1]), self._next_connection_id, listener, protocol, principal_for(protocol)
        )
        tls = self._tls.get(listener)
        connection = (
            Connection(sock, client, *self._connection_args())
            if tls is None
            else TlsConnection(sock, client, tls, self._tls_receive_buffer, *self._connection_args())
        )
        authenticator = self._authenticators.get(listener)
        if authenticator is not None:
            connection.authenticate_with(authenticator)
        self._connections.add(connection)

    def _connection_args(self) -> tuple:
        return self._handler, self._limits, self._receive_buffer, self._pool, self._on_closed, self._observer

    def _per_ip_log(self, ip: str) -> ThrottledLog:
        """Rejections are logged per address, each at most once per LOG_INTERVAL_S (the table is
        emptied when it holds PER_IP_LOGS_MAX addresses)."""
        if ip not in self._log_per_ip and len(self._log_per_ip) >= PER_IP_LOGS_MAX:
            self._log_per_ip.clear()
        return self._log_per_ip.setdefault(ip, ThrottledLog(logging.INFO))

    def _on_closed(self, connection: Connection) -> None:
        self._connections.discard(connection)
        ip = connection.client.host
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]
        self._maybe_resume_accepting()

    # -- idle connections ------------------------------------------------------------------------------

    def _expire_idle_connections(self) -> None:
        """The periodic job "idle-connections": close those idle past connections.max.idle.ms."""
        idle_s = self._limits.connections_max_idle_ms / 1000
        now = asyncio.get_running_loop().time()
        expired = [c for c in self._connections if c.idle_for(now) > idle_s]
        for connection in expired:
            connection.close(f"idle for more than {self._limits.connections_max_idle_ms} ms", logging.DEBUG)
        if expired:
            log.info(
                "Closed %d connections idle for more than %d ms (connections.max.idle.ms)",
                len(expired),
                self._limits.connections_max_idle_ms,
            )

    # -- shutdown ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop accepting new connections."""
        if self._accepting:
            self._pause_accepting()
        self._accepting = False
        if self._idle_expiration is not None and self._idle_expiration.task is not None:
            self._idle_expiration.task.cancel()
            self._idle_expiration = None
        if self._accept_resumption is not None:
            self._accept_resumption.cancel()
            self._accept_resumption = None
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
