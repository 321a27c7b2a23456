"""The listener in-process: big frames, sendfile chunks, ordering, back-pressure, end of stream."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import resource
import socket
import struct
import tracemalloc
from pathlib import Path

import pytest

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.primitives import FileSlice
from odradek.scheduler import Scheduler
from odradek.server import socket_server
from odradek.server.limits import ConnectionLimits
from odradek.server.socket_server import RECEIVE_BUFFER_SIZE, CloseConnection, SocketServer


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def serve(handler, **limits) -> tuple[SocketServer, int]:
    limits.setdefault("max_request_size", 64 << 20)
    server = SocketServer(handler, Scheduler(SYSTEM_CLOCK), ConnectionLimits(**limits))
    _, port = await server.bind("PLAINTEXT", "127.0.0.1", 0)
    server.listen()
    return server, port


async def echo(frame_bytes, client):
    return [bytes(frame_bytes)]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_frames_larger_than_the_receive_buffer_arrive_whole():
    async def scenario():
        server, port = await serve(echo)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        payloads = [os.urandom(n) for n in (10, RECEIVE_BUFFER_SIZE - 4, RECEIVE_BUFFER_SIZE + 1, 3 << 20, 7)]
        writer.write(b"".join(frame(p) for p in payloads))
        for payload in payloads:
            assert await read_frame(reader) == payload
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_a_frame_buffer_grows_with_what_arrives_not_with_the_size_prefix():
    """A 60 MiB size prefix followed by a trickle costs a small buffer; the frame still arrives whole."""
    size = 60 << 20
    payload = os.urandom(1 << 20) * 60

    async def handler(frame_bytes, client):
        return [struct.pack(">i", len(frame_bytes)), frame_bytes[-16:]]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        tracemalloc.start()
        try:
            writer.write(struct.pack(">i", size) + payload[:100])
            await writer.drain()
            await asyncio.sleep(0.1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, f"{peak} bytes allocated for a frame of which 100 bytes arrived"
        assert server.memory_pool.used == size  # the pool counts the whole promise
        writer.write(payload[100:])
        assert await read_frame(reader) == struct.pack(">i", size) + payload[-16:]
        assert server.memory_pool.used == 0
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_file_slices_are_sent_in_place_between_bytes(tmp_path, monkeypatch):
    data = os.urandom(6 << 20)
    waits = count_writability_waits(monkeypatch)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)

    async def handler(frame_bytes, client):
        offset, length = struct.unpack(">ii", frame_bytes)
        return [b"head", FileSlice(fd, offset, length), b"mid", FileSlice(fd, 0, 3), b"tail"]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await open_slow_reader(port)
        requests = [(5, 100), (1000, len(data) - 1000), (0, 0)]
        writer.write(b"".join(frame(struct.pack(">ii", o, n)) for o, n in requests))
        await asyncio.sleep(0.2)  # let the socket buffer fill: sendfile must wait for writability
        assert waits, "sendfile never waited for writability"
        for offset, length in requests:
            body = await read_frame(reader)
            assert body == b"head" + data[offset : offset + length] + b"mid" + data[:3] + b"tail"
        writer.close()
        server.close()
        await server.drain(1)

    try:
        run(scenario())
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # sendfile never moves the file position
    finally:
        os.close(fd)


@pytest.mark.parametrize("pieces", [3, 600])
def test_byte_responses_larger_than_the_socket_buffer_resume_after_short_writes(pieces, monkeypatch):
    """A response of byte chunks the socket buffer cannot take at once (few chunks: the first sendmsg
    takes them as they are and stops short; more than one sendmsg can take: straight to the views),
    to a client with a tiny receive buffer that reads slowly: the writer waits for writability."""
    rng = random.Random(pieces)
    chunks = [os.urandom(rng.randrange(1, (12 << 20) // pieces)) for _ in range(pieces)]
    waits = count_writability_waits(monkeypatch)

    async def handler(frame_bytes, client):
        return chunks

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await open_slow_reader(port)
        writer.write(frame(b"go") * 2)
        await asyncio.sleep(0.2)  # let the socket buffer fill before anything is read
        assert waits, "the writer never waited for writability"
        for _ in range(2):
            assert await read_frame(reader) == b"".join(chunks)
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_a_throttled_response_larger_than_the_socket_buffer_arrives_whole_before_the_mute_ends():
    """KIP-219: the response of the request that crossed the quota goes out at once, all of it; only
    the connection's next request waits for the mute (here 30 s, far longer than the sending)."""
    body = os.urandom(8 << 20)

    async def handler(frame_bytes, client):
        client.throttle(30_000)
        return [body]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await open_slow_reader(port)
        writer.write(frame(b"go"))
        assert await asyncio.wait_for(read_frame(reader), 20) == body
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def count_writability_waits(monkeypatch) -> list[int]:
    """Each time a connection waits for its socket to become writable, its fd is appended."""
    waits: list[int] = []
    original = socket_server.Connection._writable

    async def counting(self):
        waits.append(self._fd)
        await original(self)

    monkeypatch.setattr(socket_server.Connection, "_writable", counting)
    return waits


async def open_slow_reader(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client whose socket takes 4 KiB at a time (SO_RCVBUF), so the server's sends stop short."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock, limit=1 << 16)


def test_responses_keep_request_order_with_uneven_handler_latency():
    async def handler(frame_bytes, client):
        await asyncio.sleep(random.random() / 200)
        return [frame_bytes]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(struct.pack(">i", i)) for i in range(200)))
        answered = [struct.unpack(">i", await read_frame(reader))[0] for _ in range(200)]
        assert answered == list(range(200))
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_responses_ready_together_go_out_in_one_sendmsg_in_order_with_file_slices(tmp_path, monkeypatch):
    """200 pipelined requests handled in one go: their byte responses share a few sendmsg calls (the
    outbox is flushed when the worker next waits), and a response with a FileSlice still comes after
    the byte responses before it."""
    calls: list[int] = []
    original = socket.socket.sendmsg

    def counting(sock, buffers, *args):
        calls.append(len(buffers))
        return original(sock, buffers, *args)

    monkeypatch.setattr(socket.socket, "sendmsg", counting)
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(range(256)) * 16)
    fd = os.open(path, os.O_RDONLY)

    async def handler(frame_bytes, client):
        (index,) = struct.unpack(">i", frame_bytes)
        return [frame_bytes, FileSlice(fd, index, 7)] if index % 50 == 49 else [frame_bytes]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(struct.pack(">i", i)) for i in range(200)))
        for i in range(200):
            body = await read_frame(reader)
            assert body[:4] == struct.pack(">i", i)
            assert body[4:] == (bytes((i + k) % 256 for k in range(7)) if i % 50 == 49 else b"")
        writer.close()
        server.close()
        await server.drain(1)

    try:
        run(scenario())
    finally:
        os.close(fd)
    assert len(calls) <= 50, f"{len(calls)} sendmsg calls for 200 responses"


def server_receive_queue(server_port: int, client_port: int) -> int:
    """Bytes the kernel holds for the server's side of a loopback connection, unread by the server
    (rx_queue in /proc/net/tcp)."""
    local, remote = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"no socket {local} -> {remote}")


@pytest.mark.parametrize(
    "limits",
    [{"max_queued_requests": 4}, {"queued_max_request_bytes": 40_000, "max_request_size": 40_000}],
    ids=["queued.max.requests", "queued.max.request.bytes"],
)
def test_reading_pauses_when_requests_pile_up(limits):
    """With the handler held, the server stops reading after a few frames (queued.max.requests per
    connection, or the queued.max.request.bytes pool): the rest stays in the kernel's receive queue;
    once the handler goes on, reading resumes and every request is answered in order."""
    gate = asyncio.Event()
    count, size = 300, 10_000

    async def handler(frame_bytes, client):
        await gate.wait()
        return [frame_bytes[:4]]

    async def scenario():
        server, port = await serve(handler, **limits)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client_port = writer.get_extra_info("sockname")[1]
        writer.write(b"".join(frame(struct.pack(">i", i) + bytes(size)) for i in range(count)))
        await asyncio.sleep(0.3)  # time enough for a server that kept reading to empty the socket
        assert server_receive_queue(port, client_port) > 4 * size
        assert server.memory_pool.used <= RECEIVE_BUFFER_SIZE + size  # one read may overshoot the limit
        gate.set()
        answered = [struct.unpack(">i", await read_frame(reader))[0] for _ in range(count)]
        assert answered == list(range(count))
        assert server_receive_queue(port, client_port) == 0
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_frames_received_before_end_of_stream_are_still_handled():
    handled = []

    async def handler(frame_bytes, client):
        await asyncio.sleep(0.01)
        handled.append(bytes(frame_bytes))
        return None

    async def scenario():
        server, port = await serve(handler)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(b"acks=0 %d" % i) for i in range(5)))
        await writer.drain()
        writer.close()
        for _ in range(100):
            if len(handled) == 5 and server.connections == 0:
                break
            await asyncio.sleep(0.02)
        server.close()
        await server.drain(1)

    run(scenario())
    assert handled == [b"acks=0 %d" % i for i in range(5)]


@pytest.mark.parametrize("failure", [CloseConnection("bad request"), RuntimeError("handler bug")])
def test_a_failing_handler_closes_its_connection_only(failure):
    async def handler(frame_bytes, client):
        if frame_bytes == b"fail":
            raise failure
        return [frame_bytes]

    async def scenario():
        server, port = await serve(handler)
        bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", port)
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", port)
        bad_writer.write(frame(b"fail") + frame(b"never answered"))
        assert await bad_reader.read() == b""
        good_writer.write(frame(b"still fine"))
        assert await read_frame(good_reader) == b"still fine"
        good_writer.close()
        bad_writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


def test_drain_answers_queued_requests_then_closes():
    gate = asyncio.Event()

    async def handler(frame_bytes, client):
        await gate.wait()
        return [frame_bytes]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"one") + frame(b"two"))
        await asyncio.sleep(0.05)
        server.close()
        drained = asyncio.create_task(server.drain(5))
        await asyncio.sleep(0.05)
        gate.set()
        await drained
        assert [await read_frame(reader), await read_frame(reader)] == [b"one", b"two"]
        assert await reader.read() == b""
        writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    run(scenario())


def test_a_client_that_resets_its_connection_is_logged_at_debug(caplog):
    """A client going away mid-response (connection reset, broken pipe) is routine: DEBUG, not INFO."""

    async def handler(frame_bytes, client):
        return [bytes(8 << 20)]

    async def scenario():
        server, port = await serve(handler)
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(frame(b"big answer please"))
        await asyncio.sleep(0.1)  # the response is being written
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # with unread data and linger 0: a reset
        for _ in range(200):
            if server.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert server.connections == 0
        server.close()
        await server.drain(1)

    with caplog.at_level(logging.DEBUG, logger="odradek.server.socket_server"):
        run(scenario())
    closes = [r for r in caplog.records if "closed" in r.getMessage()]
    assert closes, "the reset connection was not logged at all"
    assert all(r.levelno == logging.DEBUG for r in closes), [(r.levelname, r.getMessage()) for r in closes]


def test_accepting_pauses_without_spinning_when_descriptors_run_out(caplog):
    """accept() failing with EMFILE pauses accepting for a second with one WARNING; the clients that
    waited are served once descriptors are free again."""

    async def scenario():
        server, port = await serve(echo)
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]  # in the backlog
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        lowest_free = os.dup(0)
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no new descriptor now
        try:
            await asyncio.sleep(0.5)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert server.connections == 0
        for client in clients:
            client.sendall(frame(b"served later"))
        for client in clients:
            reader, writer = await asyncio.open_connection(sock=client)
            assert await read_frame(reader) == b"served later"
            writer.close()
        server.close()
        await server.drain(1)

    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"):
        run(scenario())
    failures = [r for r in caplog.records if "Accept failed" in r.getMessage()]
    assert len(failures) == 1 and "Too many open files" in failures[0].getMessage()
