"""Start-up time: a broker in the test process (testing/inprocess.py, what the pytest fixture
`kafka_broker` runs) against `odradek serve` as a process (what tests/server starts), and, with
`--brokers`, odradek's process against its peers: Apache Kafka 3.9 and 4.x, and Tansu.

Each start is timed from the call that starts the broker until a Metadata request on a fresh
connection is answered: for the process, from spawning `python -m odradek serve` (its interpreter
start and imports included; the port is polled every 50 ms by BrokerProcess), for the in-process
broker from `InProcessBroker.start()` (its modules imported once beforehand, as a test session
would have). Each on a fresh temporary data dir; the median and range of --runs starts are printed.

The peer comparison (`peer_starts`) times every broker alike: from spawning its process until a
Metadata request (v9), sent on a fresh connection every 20 ms until one is answered, is answered
with the broker itself listed. What is prepared once and not timed: Kafka 4's storage format (a
separate `kafka-storage format` run, as an operator does once per node) and Kafka 3.9's ZooKeeper
server (already running, each start on a chroot of its own). Kafka's JVM runs with its start
script's options (testing/kafka_reference.SERVER_JVM_OPTIONS).

Run `python bench/startup.py [--runs 5] [--brokers odradek,kafka-3.9,kafka-4,tansu]`. Numbers, not
assertions.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

from metrics_overhead import frame, read_frames
from peers import KAFKA_VERSIONS, TansuBroker, label, missing

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess, LoopbackProcess
from odradek.testing.inprocess import InProcessBroker
from odradek.testing.zookeeper import ZooKeeperServer

METADATA_VERSION = 9  # flexible: the response header is a correlation id and one empty tag buffer
POLL_S = 0.02
START_TIMEOUT_S = 120.0


def metadata_answered(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame(ApiKey.METADATA, METADATA_VERSION, MetadataRequest(topics=[]), 1))
        read_frames(sock, 1)


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def brokers_listed(bootstrap: str) -> int:
    """How many brokers a Metadata answer on a fresh connection lists (OSError when there is none)."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame(ApiKey.METADATA, METADATA_VERSION, MetadataRequest(topics=[]), 1))
        body = recv_exact(sock, int.from_bytes(recv_exact(sock, 4), "big"))
    return len(decode_response(ApiKey.METADATA, METADATA_VERSION, body[5:]).brokers)


def timed_start(make: Callable[[Path], AbstractContextManager[InProcessBroker | BrokerProcess]]) -> float:
    with tempfile.TemporaryDirectory() as root:
        began = time.perf_counter()
        with make(Path(root) / "data") as broker:
            metadata_answered(broker.bootstrap)
            return time.perf_counter() - began


def timed_spawn(process: LoopbackProcess, spawn: Callable[[], None]) -> float:
    """Seconds from `spawn()` until the broker answers Metadata listing itself; the process stopped."""
    try:
        began = time.perf_counter()
        spawn()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if brokers_listed(process.bootstrap) > 0:
                    return time.perf_counter() - began
            except (OSError, ValueError):  # not listening, or not answering yet
                pass
            if not process.is_running() or time.monotonic() > deadline:
                status = process._proc.poll() if process._proc is not None else None
                last = process.last_output_line() if isinstance(process, BrokerProcess) else ""
                raise RuntimeError(
                    f"{process.bootstrap} never answered Metadata (exit status {status}) {last}".strip()
                )
            time.sleep(POLL_S)
    finally:
        process.stop()


@contextmanager
def _zookeeper(name: str, root: Path) -> Iterator[str | None]:
    """A ZooKeeper server for Kafka 3.9's starts (None for the others)."""
    if name not in KAFKA_VERSIONS or kafka_reference.is_kraft(KAFKA_VERSIONS[name]):
        yield None
        return
    with ZooKeeperServer(root / "zookeeper") as zookeeper:
        yield zookeeper.connect_string


def peer_starts(name: str, runs: int) -> list[float]:
    """`runs` start-up times of the broker `name` (bench/peers.py NAMES), each on fresh storage."""
    reason = missing(name)
    if reason is not None:
        raise RuntimeError(reason)
    seconds = []
    with tempfile.TemporaryDirectory(prefix=f"startup-{name}-") as tmp, ExitStack() as stack:
        zookeeper = stack.enter_context(_zookeeper(name, Path(tmp)))
        for run in range(runs):
            work = Path(tmp) / f"run-{run}"
            if name == "odradek":
                odradek = BrokerProcess(work / "data", output_path=work / "broker.out")
                seconds.append(timed_spawn(odradek, odradek.spawn))
            elif name == "tansu":
                tansu = TansuBroker()
                seconds.append(timed_spawn(tansu, tansu.spawn))
            else:
                kafka = kafka_reference.KafkaBroker(
                    work / "broker",
                    KAFKA_VERSIONS[name],
                    zookeeper_connect=None
                    if zookeeper is None
                    else f"{zookeeper}/start-{uuid.uuid4().hex[:8]}",
                    jvm_options=kafka_reference.SERVER_JVM_OPTIONS,
                )
                kafka.prepare()  # the config, and Kafka 4's storage format: once per node, not timed
                seconds.append(timed_spawn(kafka, kafka.spawn))
    return seconds


def report(name: str, seconds: list[float]) -> None:
    print(
        f"  {name:28} median {statistics.median(seconds) * 1000:7.0f} ms"
        f"   (min {min(seconds) * 1000:.0f}, max {max(seconds) * 1000:.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--brokers", help="comma-separated: odradek,kafka-3.9,kafka-4,tansu (spawn to Metadata)"
    )
    args = parser.parse_args()
    if args.brokers:
        print(f"spawn until a Metadata answer lists the broker, {args.runs} starts each")
        for name in args.brokers.split(","):
            try:
                report(label(name), peer_starts(name, args.runs))
            except Exception as exc:  # a peer that cannot run is reported, not fatal
                print(f"  {label(name):28} not measured: {str(exc).splitlines()[0]}")
        return
    in_process = [timed_start(InProcessBroker) for _ in range(args.runs)]
    process = [timed_start(BrokerProcess) for _ in range(args.runs)]
    print(f"start until a Metadata request is answered, {args.runs} starts each")
    report("in-process (kafka_broker)", in_process)
    report("odradek serve (process)", process)
    print(f"  ratio: {statistics.median(process) / statistics.median(in_process):.1f}x")


if __name__ == "__main__":
    main()
