"""The fault proxy of the cluster tests: it forwards, delays, stalls and cuts connections on demand."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from odradek.testing.proxy import FaultProxy


@pytest.fixture
def echo_server():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _roundtrip(port: int, payload: bytes = b"ping", timeout: float = 2.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        return sock.recv(65536)


def test_forwards_and_delays(echo_server):
    with FaultProxy("127.0.0.1", echo_server) as proxy:
        assert _roundtrip(proxy.port) == b"ping"
        proxy.delay_ms = 100
        started = time.monotonic()
        assert _roundtrip(proxy.port) == b"ping"
        assert time.monotonic() - started >= 0.2  # 100 ms each way


def test_stall_holds_data_until_healed(echo_server):
    with FaultProxy("127.0.0.1", echo_server) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=0.3) as sock:
            sock.sendall(b"a")
            assert sock.recv(10) == b"a"
            proxy.stall()
            sock.sendall(b"b")
            with pytest.raises(TimeoutError):
                sock.recv(10)
            proxy.heal()
            sock.settimeout(2)
            assert sock.recv(10) == b"b"


def test_cut_closes_open_connections_and_refuses_new_ones(echo_server):
    with FaultProxy("127.0.0.1", echo_server) as proxy:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        sock.sendall(b"a")
        assert sock.recv(10) == b"a"
        proxy.cut()
        try:
            assert sock.recv(10) == b""
        except ConnectionResetError:
            pass
        sock.close()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as refused:
            try:
                assert refused.recv(10) == b""
            except ConnectionResetError:
                pass
        proxy.heal()
        assert _roundtrip(proxy.port) == b"ping"
