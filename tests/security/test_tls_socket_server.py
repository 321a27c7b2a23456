"""The TLS transport of the listener, in-process: pipelined frames of every size through TLS (the
plaintext the TLS engine holds after a read that filled its buffer is read without waiting for more
bytes), a SASL_SSL listener's TLS layer (its principal is SASL's to set, never the certificate's),
file slices read in bounded pieces and encrypted instead of sendfile'd while a PLAINTEXT listener
of the same server keeps sendfile, the memory a large TLS fetch holds, and a handshake never
finished (closed by connections.max.idle.ms)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import tracemalloc
from pathlib import Path

import pytest

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.primitives import FileSlice
from odradek.scheduler import Scheduler
from odradek.security.principal import ANONYMOUS
from odradek.security.ssl_config import listener_ssl
from odradek.server import socket_server
from odradek.server.limits import ConnectionLimits
from odradek.server.socket_server import RECEIVE_BUFFER_SIZE, TLS_SEND_BATCH, SocketServer
from odradek.testing.certs import CertificateAuthority
from tests.server.test_socket_server import echo, frame, read_frame, run


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


async def serve_tls(handler, ca: CertificateAuthority) -> tuple[SocketServer, int, int]:
    """A server with an SSL listener and a PLAINTEXT one: (server, ssl port, plaintext port)."""
    broker = ca.issue("broker")
    tls = listener_ssl(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker.keystore_path)}, "SSL"
    )
    server = SocketServer(handler, Scheduler(SYSTEM_CLOCK), ConnectionLimits(max_request_size=64 << 20))
    _, ssl_port = await server.bind("SSL", "127.0.0.1", 0, "SSL", tls)
    _, plain_port = await server.bind("PLAINTEXT", "127.0.0.1", 0)
    server.listen()
    return server, ssl_port, plain_port


async def open_tls(port: int, ca: CertificateAuthority, receive_buffer: int | None = None):
    """A TLS client; with `receive_buffer`, a socket that takes that much at a time (SO_RCVBUF)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    return await asyncio.open_connection(sock=sock, ssl=context, server_hostname="localhost", limit=1 << 16)


async def stop(server: SocketServer, writer: asyncio.StreamWriter) -> None:
    writer.close()
    server.close()
    await server.drain(1)


def test_pipelined_frames_of_every_size_arrive_whole_through_tls(ca):
    async def scenario():
        server, port, _ = await serve_tls(echo, ca)
        reader, writer = await open_tls(port, ca)
        sizes = (10, RECEIVE_BUFFER_SIZE - 4, RECEIVE_BUFFER_SIZE + 1, 3 << 20, 40_000, 7, 3)
        payloads = [os.urandom(n) for n in sizes]
        writer.write(b"".join(frame(p) for p in payloads))  # the last frames trail a frame buffer's end
        for payload in payloads:
            assert await read_frame(reader) == payload
        await stop(server, writer)

    run(scenario())


def test_a_sasl_ssl_listener_runs_tls_and_leaves_the_principal_to_sasl(ca):
    seen = []

    async def handler(frame_bytes, client):
        seen.append((client.security_protocol, client.principal))
        return [bytes(frame_bytes)]

    async def scenario():
        broker, client = ca.issue("broker"), ca.issue("client")
        tls = listener_ssl(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(broker.keystore_path),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(ca.cert_path),
                "ssl.client.auth": "required",
            },
            "SASL_SSL",
        )
        server = SocketServer(handler, Scheduler(SYSTEM_CLOCK))
        _, port = await server.bind("SASL_SSL", "127.0.0.1", 0, "SASL_SSL", tls)
        server.listen()
        context = ssl.create_default_context(cafile=str(ca.cert_path))
        context.load_cert_chain(str(client.cert_path), str(client.key_path))
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
        writer.write(frame(b"hello"))
        assert await read_frame(reader) == b"hello"
        await stop(server, writer)

    run(scenario())
    assert seen == [("SASL_SSL", ANONYMOUS)]  # a certificate names no principal on SASL_SSL


def test_file_slices_go_through_tls_in_bounded_pieces_and_plaintext_keeps_sendfile(ca, tmp_path, monkeypatch):
    data = os.urandom(6 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    preads, sendfiles = [], []
    pread, sendfile = os.pread, os.sendfile

    def counting_pread(file, length, offset):
        preads.append(length)
        return pread(file, length, offset)

    def counting_sendfile(out, file, offset, length):
        sendfiles.append(out)
        return sendfile(out, file, offset, length)

    monkeypatch.setattr(socket_server.os, "pread", counting_pread)
    monkeypatch.setattr(socket_server.os, "sendfile", counting_sendfile)

    async def handler(frame_bytes, client):
        offset, length = struct.unpack(">ii", frame_bytes)
        return [b"head", FileSlice(fd, offset, length), b"mid", FileSlice(fd, 0, 3), b"tail"]

    async def scenario():
        server, ssl_port, plain_port = await serve_tls(handler, ca)
        reader, writer = await open_tls(ssl_port, ca, receive_buffer=4096)
        requests = [(5, 100), (1000, len(data) - 1000), (0, 0)]
        writer.write(b"".join(frame(struct.pack(">ii", o, n)) for o, n in requests))
        await asyncio.sleep(0.2)  # the socket buffer fills: the writer waits for writability
        for offset, length in requests:
            assert (
                await read_frame(reader)
                == b"head" + data[offset : offset + length] + b"mid" + data[:3] + b"tail"
            )
        assert (
            not sendfiles
            and max(preads) <= TLS_SEND_BATCH
            and sum(preads) == sum(n for _, n in requests) + 3 * len(requests)
        )
        plain_reader, plain_writer = await asyncio.open_connection("127.0.0.1", plain_port)
        plain_writer.write(frame(struct.pack(">ii", 0, 1 << 20)))
        assert await read_frame(plain_reader) == b"head" + data[: 1 << 20] + b"mid" + data[:3] + b"tail"
        assert sendfiles, "a PLAINTEXT listener's file slices go out with sendfile"
        plain_writer.close()
        await stop(server, writer)

    try:
        run(scenario())
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # pread never moves the file position
    finally:
        os.close(fd)


def test_a_large_tls_fetch_holds_a_bounded_amount_of_memory(ca, tmp_path: Path):
    size = 32 << 20
    path = tmp_path / "segment.log"
    with open(path, "wb") as out:
        out.truncate(size)
    fd = os.open(path, os.O_RDONLY)

    async def handler(frame_bytes, client):
        return [b"h", FileSlice(fd, 0, size)]

    async def scenario():
        server, port, _ = await serve_tls(handler, ca)
        reader, writer = await open_tls(port, ca, receive_buffer=4096)
        tracemalloc.start()
        try:
            writer.write(frame(b"fetch"))
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            assert length == size + 1
            remaining = length
            while remaining:
                remaining -= len(await reader.read(min(remaining, 1 << 16)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # the client's own buffers count too; a response held whole would be 32 MiB or more
        assert peak < 8 * TLS_SEND_BATCH, f"{peak} bytes allocated for a {size}-byte TLS response"
        await stop(server, writer)

    try:
        run(scenario())
    finally:
        os.close(fd)


def test_a_client_that_never_finishes_the_tls_handshake_is_closed_when_idle(ca):
    async def scenario():
        broker = ca.issue("broker")
        tls = listener_ssl(
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker.keystore_path)}, "SSL"
        )
        limits = ConnectionLimits(connections_max_idle_ms=200)
        server = SocketServer(echo, Scheduler(SYSTEM_CLOCK), limits)
        _, port = await server.bind("SSL", "127.0.0.1", 0, "SSL", tls)
        server.listen()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by connections.max.idle.ms
        assert server.connections == 0
        await stop(server, writer)

    run(scenario())
