"""`odradek producer-perf-test`: kafka-producer-perf-test.sh, with its flags and its output.

    odradek producer-perf-test --topic T --num-records N (--record-size B | --payload-file F
        [--payload-delimiter D]) --throughput RECORDS_PER_S|-1 [--bootstrap-server H:P]
        [--producer-props k=v k=v ...] [--producer.config FILE]

Sends N records (no key; a value of B random capital letters made once, or a value picked at random
among the payload file's), at most --throughput records a second (-1: as fast as it can), and prints, as
Kafka 3.9's ProducerPerformance does, every 5 seconds the window's line
`W records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.` and at the end
`N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th,
P95 ms 95th, P99 ms 99th, P999 ms 99.9th.` (latency: from send to acknowledgement, in ms). A record
the cluster refuses is reported once per error kind on stderr and the exit status is 1.
Not supported: --transactional-id and --transaction-duration-ms, --print-metrics, --payload-monotonic.

The producer is librdkafka's (odradek.cli.librdkafka) with its own defaults; --producer-props and
--producer.config set any of its properties (acks, linger.ms, batch.size, compression.type, ... have
the Java client's names there too).
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer

from odradek.cli.common import ToolError, guarded
from odradek.cli.librdkafka import client_config, librdkafka_errors, pair_option
from odradek.client import bootstrap_option

COMMAND = "producer-perf-test"
HELP = "measure producer throughput and latency (kafka-producer-perf-test)"

REPORTING_INTERVAL_MS = 5000
MAX_SAMPLES = 500_000
MIB = 1024 * 1024
FLUSH_TIMEOUT_S = 300.0
QUEUE_FULL_WAIT_S = 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--num-records", type=int, required=True, help="how many records to send")
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="value size in bytes")
    payload.add_argument("--payload-file", help="values, one per --payload-delimiter")
    parser.add_argument("--payload-delimiter", default="\\n", help="between values of --payload-file")
    parser.add_argument(
        "--throughput", type=float, required=True, help="records a second at most; -1: no limit"
    )
    parser.add_argument("--bootstrap-server", type=bootstrap_option, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--producer-props", nargs="+", default=[], type=pair_option, metavar="K=V")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer settings")


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        payloads = _payloads(args)
        with librdkafka_errors():
            config = client_config(
                COMMAND, args.bootstrap_server, args.producer_config, args.producer_props, {}
            )
            producer = Producer(config)
            return _send_all(producer, args.topic, args.num_records, payloads, args.throughput)

    return guarded(COMMAND, body)


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        if args.record_size < 0:
            raise ToolError("Error: --record-size must not be negative")
        return [bytes(random.choices(string.ascii_uppercase.encode(), k=args.record_size))]
    try:
        text = open(args.payload_file, "rb").read()
    except OSError as exc:
        raise ToolError(f"Error: cannot read {args.payload_file}: {exc.strerror}") from None
    delimiter = args.payload_delimiter.replace("\\n", "\n").replace("\\t", "\t").encode()
    payloads = [p for p in text.split(delimiter) if p]
    if not payloads:
        raise ToolError(f"Error: File is empty: {args.payload_file}")
    print(f"Reading payloads from: {args.payload_file}")
    print(f"Number of messages read: {len(payloads)}")
    return payloads


@dataclass
class Stats:
    """Kafka's ProducerPerformance.Stats: totals, the current window and sampled latencies."""

    samples_every: int
    start_ms: float = field(default_factory=lambda: time.time() * 1000)
    count: int = 0
    bytes: int = 0
    total_latency: int = 0
    max_latency: int = 0
    latencies: list[int] = field(default_factory=list)
    window_start_ms: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_latency: int = 0
    window_max: int = 0

    def __post_init__(self) -> None:
        self.window_start_ms = self.start_ms

    def record(self, sequence: int, latency: int, size: int, now_ms: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.window_count += 1
        self.window_bytes += size
        self.window_latency += latency
        self.window_max = max(self.window_max, latency)
        if sequence % self.samples_every == 0:
            self.latencies.append(latency)
        if now_ms - self.window_start_ms >= REPORTING_INTERVAL_MS:
            self._print_window(now_ms)
            self.window_start_ms, self.window_count, self.window_bytes = now_ms, 0, 0
            self.window_latency = self.window_max = 0

    def _print_window(self, now_ms: float) -> None:
        elapsed = max(now_ms - self.window_start_ms, 1e-9)
        print(
            f"{self.window_count} records sent, {1000 * self.window_count / elapsed:.1f} records/sec "
            f"({1000 * self.window_bytes / elapsed / MIB:.2f} MB/sec), "
            f"{self.window_latency / self.window_count:.1f} ms avg latency, "
            f"{float(self.window_max):.1f} ms max latency.",
            flush=True,
        )

    def print_total(self) -> None:
        elapsed = max(time.time() * 1000 - self.start_ms, 1e-9)
        p50, p95, p99, p999 = _percentiles(sorted(self.latencies), (0.5, 0.95, 0.99, 0.999))
        print(
            f"{self.count} records sent, {1000 * self.count / elapsed:f} records/sec "
            f"({1000 * self.bytes / elapsed / MIB:.2f} MB/sec), "
            f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, "
            f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.",
            flush=True,
        )


def _percentiles(latencies: list[int], fractions: tuple[float, ...]) -> list[int]:
    return [latencies[int(f * len(latencies))] if latencies else 0 for f in fractions]


def _send_all(producer: Producer, topic: str, count: int, payloads: list[bytes], throughput: float) -> int:
    stats = Stats(samples_every=max(count // min(count, MAX_SAMPLES), 1) if count else 1)
    failures: dict[str, int] = {}
    pace = _throttle(throughput)
    started = time.monotonic()
    for sequence in range(count):
        value = payloads[0] if len(payloads) == 1 else random.choice(payloads)
        _send(producer, topic, value, _callback(stats, failures, sequence, len(value)))
        pace(sequence + 1, time.monotonic() - started)
    unsent = producer.flush(FLUSH_TIMEOUT_S)
    stats.print_total()
    for reason, times in failures.items():
        print(f"Error: {times} records were not sent: {reason}", file=sys.stderr)
    if unsent:
        print(f"Error: {unsent} records were still unsent after {FLUSH_TIMEOUT_S:g} s", file=sys.stderr)
    return 1 if failures or unsent else 0


def _send(producer: Producer, topic: str, value: bytes, callback: Callable[..., None]) -> None:
    """produce(), waiting while librdkafka's queue is full, as Java's send() blocks."""
    while True:
        try:
            producer.produce(topic, value=value, on_delivery=callback)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(QUEUE_FULL_WAIT_S)


def _callback(stats: Stats, failures: dict[str, int], sequence: int, size: int) -> Callable[..., None]:
    sent_ms = time.time() * 1000

    def delivered(error: KafkaError | None, _message: object) -> None:
        now_ms = time.time() * 1000
        if error is not None:
            failures[error.str()] = failures.get(error.str(), 0) + 1
            return
        stats.record(sequence, int(now_ms - sent_ms), size, now_ms)

    return delivered


def _throttle(throughput: float) -> Callable[[int, float], None]:
    """Sleep so that `sent` records after `elapsed_s` seconds stay at or below `throughput` a second."""
    if throughput <= 0:
        return lambda _sent, _elapsed: None

    def pace(sent: int, elapsed_s: float) -> None:
        ahead = sent / throughput - elapsed_s
        if ahead > 0:
            time.sleep(ahead)

    return pace
