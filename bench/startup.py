"""Start-up time of a broker in the test process (testing/inprocess.py, what the pytest fixture
`kafka_broker` runs) against `odradek serve` as a process (what tests/server starts).

Each start is timed from the call that starts the broker until a Metadata request on a fresh
connection is answered: for the process, from spawning `python -m odradek serve` (its interpreter
start and imports included; the port is polled every 50 ms by BrokerProcess), for the in-process
broker from `InProcessBroker.start()` (its modules imported once beforehand, as a test session
would have). Each on a fresh temporary data dir; the median and range of --runs starts are printed.

Run `python bench/startup.py [--runs 5]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from metrics_overhead import frame, read_frames

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.broker import BrokerProcess
from odradek.testing.inprocess import InProcessBroker


def metadata_answered(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame(ApiKey.METADATA, 9, MetadataRequest(topics=[]), 1))
        read_frames(sock, 1)


def timed_start(make: Callable[[Path], AbstractContextManager[InProcessBroker | BrokerProcess]]) -> float:
    with tempfile.TemporaryDirectory() as root:
        began = time.perf_counter()
        with make(Path(root) / "data") as broker:
            metadata_answered(broker.bootstrap)
            return time.perf_counter() - began


def report(name: str, seconds: list[float]) -> None:
    print(
        f"  {name:28} median {statistics.median(seconds) * 1000:7.0f} ms"
        f"   (min {min(seconds) * 1000:.0f}, max {max(seconds) * 1000:.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    in_process = [timed_start(InProcessBroker) for _ in range(args.runs)]
    process = [timed_start(BrokerProcess) for _ in range(args.runs)]
    print(f"start until a Metadata request is answered, {args.runs} starts each")
    report("in-process (kafka_broker)", in_process)
    report("odradek serve (process)", process)
    print(f"  ratio: {statistics.median(process) / statistics.median(in_process):.1f}x")


if __name__ == "__main__":
    main()
