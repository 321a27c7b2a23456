"""Produce and consume throughput of odradek against a peer broker (Tansu 0.6, Rust, in-memory).

For each record size (100 B, 1 KiB) and each broker (a real process on a free loopback port, odradek
with a temporary log dir): a confluent-kafka Producer (linger.ms=5, batch.size=1 MiB, acks=1, no
compression) sends N records to a fresh one-partition topic, timed from the first produce() to the end
of flush(); then a Consumer (assign, from the beginning) reads all N back, timed from assign() to the
last record, checking each value's size. A warm-up of N/10 records to another topic precedes the
measurements; each figure is the median of 3 runs. MB/s counts value bytes (10^6 bytes/s). The
machine limits (bench/machine_limits.py) are measured in the same run.

Run `python bench/throughput.py [--records N] [--quick] [--brokers odradek,tansu]`. Not a test:
numbers, not assertions. A broker that fails is reported in the table and the run goes on.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from machine_limits import format_limits, measure_all
from peers import TansuBroker

from odradek.testing.broker import BrokerProcess

RECORD_SIZES = (100, 1024)
RUNS = 3  # each figure is the median of this many runs on fresh topics
TIMEOUT_S = 120.0
QUIET = {"log_level": 0}  # librdkafka's own log lines would drown the table; failures still surface


@dataclass(frozen=True, slots=True)
class Result:
    broker: str
    record_size: int
    records: int
    produce_s: float
    consume_s: float

    def row(self) -> str:
        payload_mb = self.records * self.record_size / 1e6
        return (
            f"| {self.broker} | {self.record_size} B | {self.records:,} "
            f"| {payload_mb / self.produce_s:,.1f} | {self.records / self.produce_s:,.0f} "
            f"| {payload_mb / self.consume_s:,.1f} | {self.records / self.consume_s:,.0f} |"
        )


@contextmanager
def odradek_broker() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as root:
        process = BrokerProcess(Path(root) / "data", output_path=Path(root) / "broker.out")
        process.start()
        try:
            yield process.bootstrap
        finally:
            process.stop()


@contextmanager
def tansu_broker() -> Iterator[str]:
    with TansuBroker() as broker:
        yield broker.bootstrap


BROKERS: dict[str, Callable[[], AbstractContextManager[str]]] = {
    "odradek": odradek_broker,
    "tansu": tansu_broker,
}


def create_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=TIMEOUT_S).topics.get(name)
        if topic is not None and topic.error is None and topic.partitions[0].leader >= 0:
            return name
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} has no leader")


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "acks": 1,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 20,
            **QUIET,
        }
    )
    failures: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(err)

    value = bytes(size)
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(TIMEOUT_S) or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Seconds to read `records` values of `size` bytes back. librdkafka's default fetch sizes, but a
    10 ms instead of 1 s fetch backoff when its local queue is full: that pause is a client artifact."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            **QUIET,
        }
    )
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + TIMEOUT_S
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {seen} of {records} records in {TIMEOUT_S}s")
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                if len(message.value()) != size:
                    raise RuntimeError(f"offset {message.offset()} holds {len(message.value())} bytes")
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def produce_then_consume(bootstrap: str, records: int, size: int) -> tuple[float, float]:
    topic = create_topic(bootstrap)
    return produce(bootstrap, topic, records, size), consume(bootstrap, topic, records, size)


def measure(name: str, records: int) -> list[Result | str]:
    rows: list[Result | str] = []
    try:
        with BROKERS[name]() as bootstrap:
            for size in RECORD_SIZES:
                warm = create_topic(bootstrap)
                produce(bootstrap, warm, max(records // 10, 1000), size)
                consume(bootstrap, warm, max(records // 10, 1000), size)
                runs = [produce_then_consume(bootstrap, records, size) for _ in range(RUNS)]
                produce_s = statistics.median(p for p, _ in runs)
                consume_s = statistics.median(c for _, c in runs)
                rows.append(Result(name, size, records, produce_s, consume_s))
    except Exception as exc:  # a failing broker is a result too; the run reports it and goes on
        rows.append(f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | | | | |")
    return rows


def machine_description() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "unknown CPU",
    )
    return f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per size (default 200k)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20k records, short limits")
    parser.add_argument("--brokers", default="odradek,tansu", help="comma-separated: odradek,tansu")
    args = parser.parse_args()
    records = 20_000 if args.quick else args.records

    print(machine_description(), flush=True)
    print(format_limits(measure_all(quick=args.quick)), flush=True)
    print()
    print("| broker | record | records | produce MB/s | produce rec/s | consume MB/s | consume rec/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in args.brokers.split(","):
        for row in measure(name.strip(), records):
            print(row if isinstance(row, str) else row.row(), flush=True)


if __name__ == "__main__":
    main()
