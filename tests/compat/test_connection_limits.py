"""Connection limits and memory per connection against real broker processes, over raw sockets.

What a client can do to a broker through its connections alone, and what the broker must do about
it (Kafka's SocketServer behaviour, see server/socket_server.py's header):
- 500 connections each sending a 100 MiB size prefix, then a byte a second: the broker's RSS grows by
  less than SLOW_FLOOD_RSS_BOUND (each holds a 32 KiB buffer, not 100 MiB), ApiVersions on another
  connection is answered within 100 ms throughout (the worst of hundreds of probes is asserted),
  and the memory comes back once they close.
- Many idle connections: each costs less than IDLE_CONNECTION_BOUND of RSS.
- A flood of large partial frames: RSS comes back down after the connections close.
- max.connections.per.ip and its overrides close the extra connection at once; max.connections makes
  new clients wait until a connection closes; max.connection.creation.rate paces accepts;
  connections.max.idle.ms closes an idle connection; at a low open-file limit the broker accepts only
  the connections its descriptor budget allows and never fails with EMFILE.
- A config asking for a protection odradek does not provide stops `odradek serve` with exit code 2.

RSS is read from /proc/<pid>/status. Timing bounds are asserted only where the task demands them
(the 100 ms ApiVersions bound, and lower bounds on pacing, which load cannot make flaky).
"""

from __future__ import annotations

import contextlib
import resource
import select
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess, BrokerStartError
from tests.compat import wire

SLOW_PREFIX = bytes.fromhex("06400000 00000009 00000001")  # size 104857600, then the header's start
SLOW_CONNECTIONS = 500
SLOW_FLOOD_SECONDS = 8
SLOW_FLOOD_RSS_BOUND = 64 << 20  # 500 x 32 KiB frame buffers + connection state, with room to spare
APIVERSIONS_BOUND_S = 0.100
IDLE_CONNECTIONS = 2000
IDLE_CONNECTION_BOUND = 16 << 10
RSS_SETTLED_BOUND = 24 << 20  # how far above its starting RSS the broker may stay after a flood


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def probe_api_versions(broker: BrokerProcess, sock: socket.socket, correlation_id: int) -> float:
    """Seconds from sending ApiVersions v0 to its whole response."""
    started = time.perf_counter()
    sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, correlation_id, b""))
    got, body = wire.recv_response(sock)
    elapsed = time.perf_counter() - started
    assert got == correlation_id and wire.parse_api_versions_v0(body).error_code == 0
    return elapsed


def answered(sock: socket.socket, timeout: float = 10.0) -> bool:
    """Send ApiVersions and wait for its answer; False when the broker closes the connection."""
    sock.settimeout(timeout)
    try:
        sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, 7, b""))
        return wire.recv_response(sock)[0] == 7
    except (wire.ConnectionClosed, ConnectionResetError, BrokenPipeError):
        return False


def connect_from(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect((broker.host, broker.port))
    return sock


@contextlib.contextmanager
def open_sockets(count: int, broker: BrokerProcess) -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            socks.append(socket.create_connection((broker.host, broker.port), timeout=10))
        yield socks
    finally:
        for sock in socks:
            sock.close()


def wait_for_rss_at_most(pid: int, bound: int, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        current = rss(pid)
        if current <= bound or time.monotonic() > deadline:
            return current
        time.sleep(0.2)


def settled_rss(broker: BrokerProcess) -> int:
    """The broker's RSS once it has served a request."""
    with wire.Connection(broker.bootstrap) as conn:
        conn.api_versions()
    time.sleep(0.5)
    assert broker.pid is not None
    return rss(broker.pid)


@pytest.fixture(autouse=True)
def enough_descriptors() -> None:
    """This test process holds thousands of sockets: raise its own soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def test_slow_connections_promising_100_mib_cost_little_and_never_delay_other_clients(make_broker):
    broker = make_broker()
    assert broker.pid is not None
    baseline = settled_rss(broker)
    probe = wire.connect(broker.bootstrap)
    latencies: list[float] = []
    peak = baseline
    with open_sockets(SLOW_CONNECTIONS, broker) as slow:
        for sock in slow:
            sock.sendall(SLOW_PREFIX)
        for _ in range(SLOW_FLOOD_SECONDS):
            for sock in slow:
                sock.sendall(b"\0")
            second_ends = time.monotonic() + 1
            while time.monotonic() < second_ends:
                latencies.append(probe_api_versions(broker, probe, len(latencies) + 1))
                time.sleep(0.01)
            peak = max(peak, rss(broker.pid))
        assert answered(probe)  # the slow connections are all still open here
    probe.close()
    assert len(latencies) >= 200
    worst = max(latencies)
    print(f"{len(latencies)} probes: worst {worst * 1000:.1f} ms; RSS {baseline >> 20} -> {peak >> 20} MiB")
    assert worst < APIVERSIONS_BOUND_S, f"worst ApiVersions latency {worst * 1000:.1f} ms"
    assert peak - baseline < SLOW_FLOOD_RSS_BOUND, f"RSS grew by {(peak - baseline) >> 20} MiB"
    after = wait_for_rss_at_most(broker.pid, baseline + RSS_SETTLED_BOUND)
    assert after <= baseline + RSS_SETTLED_BOUND, f"RSS stayed at {after >> 20} MiB (from {baseline >> 20})"
    assert "Too many open files" not in broker.output_tail(1 << 20)


def test_memory_comes_back_after_a_flood_of_large_partial_frames(make_broker):
    broker = make_broker()
    assert broker.pid is not None
    baseline = settled_rss(broker)
    sent_per_connection = 1 << 20
    with open_sockets(64, broker) as flood:
        for sock in flood:
            sock.sendall(struct.pack(">i", 16 << 20) + bytes(sent_per_connection))
        time.sleep(1)
        peak = rss(broker.pid)
    assert peak - baseline >= 32 << 20, "the flood did not reach the broker's memory"
    after = wait_for_rss_at_most(broker.pid, baseline + RSS_SETTLED_BOUND)
    print(f"RSS {baseline >> 20} MiB -> flood {peak >> 20} MiB -> after {after >> 20} MiB")
    assert after <= baseline + RSS_SETTLED_BOUND, f"RSS stayed at {after >> 20} MiB (from {baseline >> 20})"


def test_idle_connections_cost_little_memory_each(make_broker):
    broker = make_broker()
    assert broker.pid is not None
    baseline = settled_rss(broker)
    with open_sockets(IDLE_CONNECTIONS, broker) as idle:
        for sock in idle:  # answered: each connection is accepted and has run a request
            assert answered(sock)
        time.sleep(0.5)
        per_connection = (rss(broker.pid) - baseline) / IDLE_CONNECTIONS
    print(f"{IDLE_CONNECTIONS} idle connections: {per_connection / 1024:.1f} KiB of RSS each")
    assert per_connection < IDLE_CONNECTION_BOUND


def test_per_ip_limit_and_its_override_close_the_extra_connection(make_broker):
    broker = make_broker({"max.connections.per.ip": 3, "max.connections.per.ip.overrides": "127.0.0.2:5"})
    time.sleep(0.5)  # the readiness probe's connection is closed by now
    for source, allowed in (("127.0.0.1", 3), ("127.0.0.2", 5)):
        with contextlib.ExitStack() as stack:
            kept = [stack.enter_context(connect_from(broker, source)) for _ in range(allowed)]
            assert all(answered(sock) for sock in kept)
            with connect_from(broker, source) as extra:
                assert not answered(extra), f"connection {allowed + 1} from {source} was served"
            kept[0].close()
            assert answered_eventually(broker, source)
    output = broker.output_tail(1 << 20)
    assert "Rejected connection from 127.0.0.1" in output and "maximum of 3" in output
    assert "Rejected connection from 127.0.0.2" in output and "maximum of 5" in output


def answered_eventually(broker: BrokerProcess, source: str, timeout: float = 10.0) -> bool:
    """A new connection from `source` is served once the broker has seen an earlier one close."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connect_from(broker, source) as sock:
            if answered(sock):
                return True
        time.sleep(0.05)
    return False


def test_max_connections_makes_new_clients_wait_for_a_free_slot(make_broker):
    broker = make_broker({"max.connections": 4})
    with open_sockets(4, broker) as kept:
        time.sleep(0.5)  # the readiness probe's connection is closed by now
        assert all(answered(sock) for sock in kept)
        waiting = socket.create_connection((broker.host, broker.port), timeout=10)
        waiting.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, 99, b""))
        readable, _, _ = select.select([waiting], [], [], 1.0)
        assert not readable, "a connection beyond max.connections was served"
        kept[0].close()
        waiting.settimeout(10)
        assert wire.recv_response(waiting)[0] == 99
        waiting.close()
    assert "max.connections" in broker.output_tail(1 << 20)


def test_connection_creation_rate_paces_accepts(make_broker):
    rate, count = 10, 30
    broker = make_broker({"max.connection.creation.rate": rate})
    time.sleep(1.5)  # the bucket refills after the readiness probe
    started = time.monotonic()
    with open_sockets(count, broker) as socks:
        for sock in socks:
            sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, 5, b""))
        for sock in socks:
            assert wire.recv_response(sock)[0] == 5
        elapsed = time.monotonic() - started
    minimum = (count - rate) / rate
    assert elapsed >= minimum * 0.9, f"{count} connections accepted in {elapsed:.2f} s at {rate}/s"
    assert "max.connection.creation.rate" in broker.output_tail(1 << 20)


def test_idle_connections_are_closed_after_connections_max_idle_ms(make_broker):
    broker = make_broker({"connections.max.idle.ms": 500})
    with wire.Connection(broker.bootstrap) as active, wire.Connection(broker.bootstrap) as idle:
        idle.api_versions()
        opened = time.monotonic()
        while time.monotonic() - opened < 1.5:  # a connection in use is never idle
            active.api_versions()
            time.sleep(0.1)
        assert wire.is_closed_by_peer(idle.sock, timeout=10)
        assert time.monotonic() - opened >= 0.5
        active.api_versions()
    assert "connections.max.idle.ms" in broker.output_tail(1 << 20)


class LowFileLimitBroker(BrokerProcess):
    """A broker whose hard open-file limit is `nofile` (prlimit), so its budget is small."""

    def __init__(self, *args: object, nofile: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", *super().command()]


def test_connections_never_take_the_descriptors_storage_needs(tmp_path):
    from odradek.server.limits import descriptor_budget

    budget = descriptor_budget(300)
    broker = LowFileLimitBroker(tmp_path / "data", output_path=tmp_path / "broker.out", nofile=300)
    broker.start()
    try:
        with open_sockets(budget.max_client_connections + 50, broker) as socks:
            for sock in socks:
                sock.sendall(wire.request_frame(wire.API_API_VERSIONS, 0, 3, b""))
            served = 0
            for sock in socks:
                readable, _, _ = select.select([sock], [], [], 2.0 if served == 0 else 0.5)
                if readable and wire.recv_response(sock)[0] == 3:
                    served += 1
        assert served == budget.max_client_connections
        with wire.Connection(broker.bootstrap) as conn:
            assert conn.api_versions().error_code == 0
        assert broker.stop() == 0, broker.output_tail()  # the shutdown checkpoints found their descriptors
    finally:
        broker.kill()
    output = broker.output_tail(1 << 20)
    assert "Too many open files" not in output
    assert f"Client connections limited to {budget.max_client_connections}" in output
    assert "soft 300" in output


def test_serve_refuses_a_protection_it_does_not_provide(make_broker):
    broker = make_broker({"principal.builder.class": "com.example.Builder"}, start=False)
    with pytest.raises(BrokerStartError):
        broker.start()
    assert broker.returncode == 2, broker.output_tail()
    assert "principal.builder.class" in broker.output_tail()
