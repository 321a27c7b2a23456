"""The listener in-process: big frames, sendfile chunks, ordering, back-pressure, end of stream."""

from __future__ import annotations

import asyncio
import os
import random
import struct

import pytest

from odradek.protocol.primitives import FileSlice
from odradek.server import network
from odradek.server.limits import ConnectionLimits
from odradek.server.network import RECEIVE_BUFFER_SIZE, CloseConnection, KafkaServer


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def serve(handler, **limits) -> tuple[KafkaServer, int]:
    limits.setdefault("max_request_size", 64 << 20)
    server = KafkaServer(handler, ConnectionLimits(**limits))
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


def test_file_slices_are_sent_in_place_between_bytes(tmp_path):
    data = os.urandom(6 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)

    async def handler(frame_bytes, client):
        offset, length = struct.unpack(">ii", frame_bytes)
        return [b"head", FileSlice(fd, offset, length), b"mid", FileSlice(fd, 0, 3), b"tail"]

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
        requests = [(5, 100), (1000, len(data) - 1000), (0, 0)]
        writer.write(b"".join(frame(struct.pack(">ii", o, n)) for o, n in requests))
        await asyncio.sleep(0.2)  # let the socket buffer fill: sendfile must wait for writability
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
def test_byte_responses_larger_than_the_socket_buffer_resume_after_short_writes(pieces):
    """A response of byte chunks the socket buffer cannot take at once (few chunks: the first sendmsg
    takes them as they are and stops short; more than one sendmsg can take: straight to the views)."""
    rng = random.Random(pieces)
    chunks = [os.urandom(rng.randrange(1, (12 << 20) // pieces)) for _ in range(pieces)]

    async def handler(frame_bytes, client):
        return chunks

    async def scenario():
        server, port = await serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
        writer.write(frame(b"go") * 2)
        await asyncio.sleep(0.2)  # let the socket buffer fill before anything is read
        for _ in range(2):
            assert await read_frame(reader) == b"".join(chunks)
        writer.close()
        server.close()
        await server.drain(1)

    run(scenario())


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


def test_reading_pauses_when_requests_pile_up(monkeypatch):
    pauses = []
    original = network.Connection._pause_reading

    def counting_pause(self):
        pauses.append(self._reading)
        original(self)

    monkeypatch.setattr(network.Connection, "_pause_reading", counting_pause)
    gate = asyncio.Event()

    async def handler(frame_bytes, client):
        await gate.wait()
        return [frame_bytes]

    async def scenario():
        server, port = await serve(handler, max_queued_requests=4)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(struct.pack(">i", i)) for i in range(100)))
        await asyncio.sleep(0.1)
        assert True in pauses
        gate.set()
        answered = [struct.unpack(">i", await read_frame(reader))[0] for _ in range(100)]
        assert answered == list(range(100))
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
