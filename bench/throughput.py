"""Produce and consume throughput of odradek against its peers: Apache Kafka 3.9 (ZooKeeper mode) and
4.x (KRaft), and Tansu 0.6 (Rust, in-memory).

Two workloads, each against each broker (a real process on a free loopback port, bench/peers.py;
odradek and Kafka with a temporary log dir and message.max.bytes 2 MiB):
- small: 100 B and 1 KiB records. A confluent-kafka Producer (linger.ms=5, batch.size=1 MiB, acks=1,
  no compression, a 32 MiB local queue as Java's buffer.memory) sends N records to a fresh
  one-partition topic, timed from the first produce() to the end of flush(); then a Consumer
  (assign, from the beginning) reads all N back, timed from assign() to the last record, checking
  each value's size.
- large: 16 KiB records, 512 MiB per run, with batches of about 1 MiB: linger.ms=100,
  batch.size=1 MiB and the client's message.max.bytes 2 MiB (librdkafka caps a batch at both), acks=1;
  the Consumer fetches up to 8 MiB per partition. The mean Produce request size librdkafka reports
  for the warm-up is printed, and produce MB/s is set against the Python receive-and-write limits of
  bench/machine_limits.py, page cache absorbing and sustained (consume against the os.sendfile limit).
A warm-up of a tenth of the records to another topic precedes each measurement; each figure is the
median of 3 runs, each started after os.sync() so that no run pays for an earlier one's dirty
pages. MB/s counts value bytes (10^6 bytes/s). The machine limits are measured in the same run, first.

Run `python bench/throughput.py [--records N] [--quick] [--brokers odradek,kafka-3.9,kafka-4,tansu]
[--workloads small,large]`. Not a test: numbers, not assertions. A broker that fails, or cannot run
here (no Java, no Tansu binary), is reported in the table in one line and the run goes on.
bench/side_by_side.py runs the small workload through `measure_workload` on brokers it started.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from machine_limits import (
    RECEIVE_AND_WRITE,
    RECEIVE_AND_WRITE_SUSTAINED,
    SENDFILE,
    Limit,
    format_limits,
    measure_all,
)
from peers import missing, single_broker

RUNS = 3  # each figure is the median of this many runs on fresh topics
TIMEOUT_S = 120.0
QUIET = {"log_level": 0}  # librdkafka's own log lines would drown the table; failures still surface
MIB = 1 << 20
MESSAGE_MAX_BYTES = 2 * MIB  # broker and client: room for a whole 1 MiB batch in one Produce request
LARGE_RECORD = 16 * 1024
# The producer's local queue, capped as the Java producer's buffer.memory default (32 MiB) caps it:
# librdkafka's 1 GiB default lets the produce loop queue every record up front, and first-touching
# that much fresh memory cost the client more CPU than sending it (140k page faults per 512 MiB).
PRODUCER_BUFFER_KIB = 32 * 1024


@dataclass(frozen=True, slots=True)
class Workload:
    """Records of one size, and the client settings they are moved with."""

    label: str
    record_size: int
    records: int
    producer: Mapping[str, object] = field(default_factory=dict)
    consumer: Mapping[str, object] = field(default_factory=dict)
    large: bool = False


def small_workloads(records: int) -> list[Workload]:
    producer = {"linger.ms": 5, "batch.size": MIB}
    return [Workload(f"{size} B", size, records, producer) for size in (100, 1024)]


def large_workload(total_bytes: int) -> Workload:
    return Workload(
        "16 KiB, ~1 MiB batches",
        LARGE_RECORD,
        total_bytes // LARGE_RECORD,
        {"linger.ms": 100, "batch.size": MIB, "message.max.bytes": MESSAGE_MAX_BYTES},
        {"max.partition.fetch.bytes": 8 * MIB},
        large=True,
    )


@dataclass(frozen=True, slots=True)
class Result:
    broker: str
    workload: Workload
    produce_s: float
    consume_s: float
    request_bytes: float  # mean Produce request size in the warm-up, as librdkafka counts it

    @property
    def produce_mb_s(self) -> float:
        return self.workload.records * self.workload.record_size / 1e6 / self.produce_s

    @property
    def consume_mb_s(self) -> float:
        return self.workload.records * self.workload.record_size / 1e6 / self.consume_s

    def row(self) -> str:
        records = self.workload.records
        return (
            f"| {self.broker} | {self.workload.label} | {records:,} "
            f"| {self.produce_mb_s:,.1f} | {records / self.produce_s:,.0f} "
            f"| {self.consume_mb_s:,.1f} | {records / self.consume_s:,.0f} "
            f"| {self.request_bytes / 1024:,.0f} KiB |"
        )

    def against(self, limits: list[Limit]) -> str:
        """The large-batch figures as shares of the machine's Python receive-and-write and sendfile."""
        by_name = {limit.name: limit.mb_per_s for limit in limits}
        write, sustained = by_name[RECEIVE_AND_WRITE], by_name[RECEIVE_AND_WRITE_SUSTAINED]
        sendfile = by_name[SENDFILE]
        return (
            f"{self.broker}, {self.workload.label}: produce {self.produce_mb_s:,.0f} MB/s = "
            f"{self.produce_mb_s / write:.0%} of the Python receive-and-write limit ({write:,.0f} MB/s), "
            f"{self.produce_mb_s / sustained:.0%} of its sustained figure ({sustained:,.0f} MB/s); "
            f"consume {self.consume_mb_s:,.0f} MB/s = {self.consume_mb_s / sendfile:.0%} of the "
            f"os.sendfile limit ({sendfile:,.0f} MB/s)"
        )


BROKER_SETTINGS = {"message.max.bytes": MESSAGE_MAX_BYTES}  # odradek's and Kafka's (Tansu takes none)


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


def mean_request_bytes(stats: str) -> float:
    """Bytes sent per Produce request, over the brokers a librdkafka statistics document lists."""
    brokers = json.loads(stats)["brokers"].values()
    requests = sum(broker["req"].get("Produce", 0) for broker in brokers)
    sent = sum(broker["txbytes"] for broker in brokers if broker["req"].get("Produce", 0))
    return sent / requests if requests else 0.0


def produce(
    bootstrap: str, topic: str, workload: Workload, records: int, stats: list[str] | None = None
) -> float:
    """Seconds to produce `records` values; with `stats`, also collects librdkafka statistics and
    waits (untimed) for one emitted after the flush, so the last one covers every request."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": PRODUCER_BUFFER_KIB,
        **workload.producer,
        **QUIET,
    }
    if stats is not None:
        config.update({"statistics.interval.ms": 1000, "stats_cb": stats.append})
    producer = Producer(config)
    failures: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(err)

    value = bytes(workload.record_size)
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
    elapsed = time.perf_counter() - start
    if stats is not None:
        emitted, deadline = len(stats), time.monotonic() + 5
        while len(stats) == emitted and time.monotonic() < deadline:
            producer.poll(0.1)
    return elapsed


def consume(bootstrap: str, topic: str, workload: Workload, records: int) -> float:
    """Seconds to read `records` values back, checking each one's size. librdkafka's default fetch
    sizes unless the workload sets them, but a 10 ms instead of 1 s fetch backoff when its local queue
    is full: that pause is a client artifact."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            **workload.consumer,
            **QUIET,
        }
    )
    size = workload.record_size
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + TIMEOUT_S
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {seen} of {records} records in {TIMEOUT_S}s")
            for message in consumer.consume(min(10_000, records - seen), timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                value = message.value()
                if value is None or len(value) != size:
                    raise RuntimeError(f"offset {message.offset()} holds {value and len(value)} bytes")
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def produce_then_consume(bootstrap: str, workload: Workload) -> tuple[float, float]:
    topic = create_topic(bootstrap)
    os.sync()  # start from drained writeback, as each receive-and-write limit run does
    produced = produce(bootstrap, topic, workload, workload.records)
    return produced, consume(bootstrap, topic, workload, workload.records)


def measure_workload(name: str, bootstrap: str, workload: Workload, runs_per_figure: int = RUNS) -> Result:
    warm, warm_records = create_topic(bootstrap), max(workload.records // 10, 1000)
    stats: list[str] = []
    produce(bootstrap, warm, workload, warm_records, stats)
    consume(bootstrap, warm, workload, warm_records)
    runs = [produce_then_consume(bootstrap, workload) for _ in range(runs_per_figure)]
    produce_s = statistics.median(p for p, _ in runs)
    consume_s = statistics.median(c for _, c in runs)
    return Result(name, workload, produce_s, consume_s, mean_request_bytes(stats[-1]) if stats else 0.0)


def measure(name: str, workloads: list[Workload]) -> list[Result | str]:
    rows: list[Result | str] = []
    reason = missing(name)
    if reason is not None:
        return [f"| {name} | not run: {reason} | | | | | | |"]
    try:
        with single_broker(name, BROKER_SETTINGS) as broker:
            for workload in workloads:
                rows.append(measure_workload(name, broker.bootstrap, workload))
    except Exception as exc:  # a failing broker is a result too; the run reports it and goes on
        rows.append(
            f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | | | | | |"
        )
    return rows


def machine_description() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "unknown CPU",
    )
    ram_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {ram_kib / 2**20:.1f} GiB RAM, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="small records per size (default 200k)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20k small records, 64 MiB large")
    parser.add_argument(
        "--brokers", default="odradek,tansu", help="comma-separated: odradek,kafka-3.9,kafka-4,tansu"
    )
    parser.add_argument("--workloads", default="small,large", help="comma-separated: small,large")
    args = parser.parse_args()
    chosen = {name.strip() for name in args.workloads.split(",")}
    workloads = small_workloads(20_000 if args.quick else args.records) if "small" in chosen else []
    if "large" in chosen:
        workloads.append(large_workload((64 if args.quick else 512) * MIB))

    print(machine_description(), flush=True)
    limits = measure_all(quick=args.quick)
    print(format_limits(limits), flush=True)
    print()
    print(
        "| broker | record | records | produce MB/s | produce rec/s | consume MB/s | consume rec/s "
        "| mean Produce request |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    results: list[Result] = []
    for name in args.brokers.split(","):
        for row in measure(name.strip(), workloads):
            print(row if isinstance(row, str) else row.row(), flush=True)
            results += [row] if isinstance(row, Result) else []
    print()
    for result in results:
        if result.workload.large:
            print(result.against(limits))


if __name__ == "__main__":
    main()
