"""The broker's system calls per Produce request, counted by strace, for a producer over many partitions.

One broker process (the testing helper, single node) with one topic of N partitions (default 100),
and a producer in this process writing 1 KiB records without keys at a fixed rate (acks=all,
linger.ms 1, as bench/latency.py), once per producer:
- `librdkafka sticky`: confluent-kafka as configured by default, which fills one partition's
  batch for sticky.partitioning.linger.ms (10 ms) before moving on, as Java clients do since KIP-480;
- `librdkafka spread`: sticky.partitioning.linger.ms 0, every record to a random partition;
- `kafka-python`: its producer, which sends a random partition's records and drains every ready
  partition's batch for a broker into one request, as the Java client's sender does.
librdkafka puts one partition in each Produce request whatever the partitioning; the Java
client's and kafka-python's requests carry as many partitions as the linger gathers.
While the producer runs, `strace -f -c` is attached to the broker for a window of the run; the
Produce requests answered meanwhile come from the broker's own counter
(`kafka_network_requestmetrics_requests_total{request="Produce"}` on `http.listeners`). It prints
the requests, the partitions a request carries (pwrite64 calls per request: the broker writes
each partition's batch with one positional write) and every system call per request.

Run `python bench/produce_syscalls.py [--partitions 100] [--rate 10] [--seconds 4]`; needs strace
(Debian's package) and the right to trace the broker (root, or ptrace_scope 0). strace slows the
traced broker, so time nothing here. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from latency import requests_by_api  # bench/latency.py

from odradek.testing.broker import BrokerProcess, free_port

RECORD = 1024
QUIET = {"log_level": 3}


class Librdkafka:
    def __init__(self, bootstrap: str, sticky: bool) -> None:
        from confluent_kafka import Producer

        spread = {} if sticky else {"sticky.partitioning.linger.ms": 0}
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, **QUIET, **spread}
        )

    def send(self, topic: str, value: bytes) -> None:
        self._producer.produce(topic, value=value)
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(30)


class KafkaPython:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1)

    def send(self, topic: str, value: bytes) -> None:
        self._producer.send(topic, value=value)

    def close(self) -> None:
        self._producer.close(30)


PRODUCERS: dict[str, Callable[[str], Librdkafka | KafkaPython]] = {
    "librdkafka sticky": lambda bootstrap: Librdkafka(bootstrap, sticky=True),
    "librdkafka spread": lambda bootstrap: Librdkafka(bootstrap, sticky=False),
    "kafka-python": KafkaPython,
}


def produce(bootstrap: str, topic: str, rate: float, seconds: float, mode: str) -> None:
    """1 KiB records at `rate` MB/s for `seconds`, sleeping between sends."""
    producer = PRODUCERS[mode](bootstrap)
    value, interval = b"x" * RECORD, RECORD / (rate * 1e6)
    started, sent = time.monotonic(), 0
    while (now := time.monotonic()) - started < seconds:
        for _ in range(int((now - started) / interval) + 1 - sent):
            producer.send(topic, value)
            sent += 1
        time.sleep(max(0.0, started + sent * interval - time.monotonic()))
    producer.close()


def produce_requests(metrics_url: str) -> int:
    return requests_by_api([metrics_url]).get("Produce", 0)


def strace_counts(pid: int, seconds: float, out: Path) -> dict[str, int]:
    """System call name -> calls of every thread of `pid` during `seconds` (strace -c)."""
    tracer = subprocess.Popen(
        ["strace", "-f", "-c", "-o", str(out), "-p", str(pid)], stderr=subprocess.DEVNULL
    )
    time.sleep(seconds)
    tracer.send_signal(2)
    tracer.wait(30)
    counts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return counts


def measure(broker: BrokerProcess, metrics_url: str, topic: str, args: argparse.Namespace, mode: str) -> None:
    producer = threading.Thread(
        target=produce, args=(broker.bootstrap, topic, args.rate, args.seconds + 3, mode)
    )
    producer.start()
    time.sleep(1.5)  # past the producer's start-up
    before = produce_requests(metrics_url)
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        counts = strace_counts(broker.pid or 0, args.seconds, Path(out.name))
    requests = produce_requests(metrics_url) - before
    producer.join()
    per_request = {
        name: calls / max(requests, 1) for name, calls in sorted(counts.items(), key=lambda c: -c[1])
    }
    print(f"{mode}: {requests} Produce requests, {per_request.get('pwrite64', 0.0):.2f} partitions each")
    print(
        "  system calls per request: "
        + ", ".join(f"{n} {c:.2f}" for n, c in per_request.items() if c >= 0.01)
    )
    print(f"  all together: {sum(counts.values()) / max(requests, 1):.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="MB/s")
    parser.add_argument("--seconds", type=float, default=4.0, help="the traced window")
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    http = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="odradek-syscalls-") as root:
        broker = BrokerProcess(Path(root) / "data", overrides={"http.listeners": f"http://{http}"})
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
            admin.create_topics([NewTopic("syscalls", args.partitions, 1)])["syscalls"].result(30)
            print(f"{args.partitions} partitions, {args.rate:g} MB/s of 1 KiB records, acks=all, linger.ms 1")
            for mode in PRODUCERS:
                measure(broker, f"http://{http}/metrics", "syscalls", args, mode)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
