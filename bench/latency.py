"""End-to-end latency of the OpenMessaging Benchmark workload `1-topic-100-partitions-1kb`.

One topic of N partitions (default 100; `--partitions 1000` for the second point), 1 KiB records
whose first 8 bytes are the producer's `time.time_ns()`; a confluent-kafka producer (acks=all,
linger.ms 1) at a fixed rate, sleeping between sends as OpenMessaging Benchmark's rate limiter
does (a producer that spun on the clock would take a core from the broker and the consumer on a small
machine), and a confluent-kafka consumer assigned every partition at the end
(fetch.min.bytes 1) that records receive time minus stamp. Producer and consumer are separate
processes (this file run with `--role`). For each rate (MB/s, or `max`: as fast as the producer
goes) it prints the achieved rate, p50 / p99 / p99.9 / max latency in ms, and the broker's CPU in
cores (user + system from /proc/<pid>/stat over the run, divided by the wall time; for
`odradek-cluster`, two odradek brokers on one ZooKeeper on this machine, the sum of both, and the
topic's partitions and their leaders spread over the two).

The broker CPU per request, in microseconds, is that CPU over the requests the broker answered in
the same window. Every broker is counted the same way, from the client side, since Kafka's JVM
exposes no /metrics here and Tansu none at all: the requests librdkafka sent (`tx` of every broker
in its statistics, `statistics.interval.ms`), all of the producer's (its process lives inside the
window) and the consumer's between the window's two ends (its statistics carry librdkafka's
CLOCK_MONOTONIC time stamp `ts`, interpolated at the window's ends). The window runs from before
the producer process starts to the moment it has flushed its last record; for a JVM, the share of
that CPU its JIT compiler threads took is printed too (a JVM still compiling is not at its speed
yet). For odradek it also
prints the requests the broker itself counted by API (the difference of
`kafka_network_requestmetrics_requests_total` on each broker's `http.listeners` over the window,
summed over the brokers), which the client count should match within the few requests of
connecting.

Two shapes of traffic. Unkeyed (the default): records without keys, which librdkafka's sticky
partitioner gathers into one partition's batch at a time, so requests are few and large. `--keyed`:
each record carries a key drawn at random from `--key-space` distinct keys (default 1,000,000) and
librdkafka's own default partitioner (`partitioner` consistent_random: CRC32 of the key modulo the
partition count) chooses its partition, as a user's producer of user or order ids does; records
spread over every partition, batches hold one or two records and, as librdkafka sends one
partition per Produce request, the broker sees one request per record or two.

Run `python bench/latency.py [--partitions 100] [--rates 5,10,20,50,max] [--seconds 10]
[--brokers odradek,kafka-3.9,kafka-4,tansu,odradek-cluster] [--replication-factor 1] [--keyed]`
from the repository root (the issue 28 shape: `--keyed --brokers odradek --rates 5,10,20 --seconds 10`). With
`--brokers odradek-cluster --replication-factor 2` every partition has a follower on the other
broker, whose Fetch of its partitions is the many-partition pattern again, and acks=all waits for
it. `--acks-only` runs no consumer and reports the latency from send to the producer's delivery
report (acks=all) instead: the cost of replication without a reader. Tansu (bench/peers.py) needs
the `bench` extra; Kafka (bench/peers.py) Java and the fetched jars, and a broker that cannot run
here is named in one line. bench/side_by_side.py runs `measure` on brokers it started. Prints
numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from array import array
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RECORD = 1024
TICKS = os.sysconf("SC_CLK_TCK")
QUIET = {"log_level": 3}
PRODUCER_STATS_MS = 1000  # one statistics document a second; the last one, after the flush, counts
CONSUMER_STATS_MS = 200  # samples to interpolate the consumer's count at the window's ends
DRAIN_S = 30.0  # how long the consumer goes on past its time while records still arrive


def requests_sent(stats: str) -> tuple[float, int]:
    """librdkafka's CLOCK_MONOTONIC time stamp (s) of a statistics document and the requests the
    client had sent by then, over every broker connection (bootstrap ones included)."""
    document = json.loads(stats)
    return document["ts"] / 1e6, sum(broker["tx"] for broker in document["brokers"].values())


# -- the two client processes ----------------------------------------------------------------


def run_producer(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    out: str | None = None,
    key_space: int = 0,
    flushed: str | None = None,
) -> None:
    """Produce stamped 1 KiB records at `rate` MB/s (0: as fast as possible); print the count and the
    requests librdkafka sent. With `out`, write each acknowledged record's latency (ns, send to
    delivery report) there. With `key_space`, each record's key is one of that many, at random;
    librdkafka partitions by it. With `flushed`, touch that file once the last record is acknowledged,
    before waiting for the statistics that count every request."""
    from confluent_kafka import Producer

    acked = array("q")
    stats: list[str] = []  # the newest statistics document

    def keep_newest(document: str) -> None:
        stats[:] = [document]

    def on_delivery(error: object, message: Any) -> None:
        if error is None:
            acked.append(time.time_ns() - int.from_bytes(message.value()[:8], "big"))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 1,
            **QUIET,
            "queue.buffering.max.kbytes": 65536,
            "statistics.interval.ms": PRODUCER_STATS_MS,
            "stats_cb": keep_newest,
        }
    )
    filler = b"x" * (RECORD - 8)
    interval = RECORD / (rate * 1e6) if rate > 0 else 0.0
    started = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - started < seconds:
        due = int((now - started) / interval) + 1 if interval else sent + 100
        while sent < due:  # every record whose time has come, each stamped as it is sent
            try:
                key = b"key-%d" % random.randrange(key_space) if key_space else None
                value = time.time_ns().to_bytes(8, "big") + filler
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery if out else None)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        if interval:  # sleep to the next record's time, as OpenMessaging Benchmark's rate limiter does
            time.sleep(max(0.0, started + sent * interval - time.monotonic()))
    producer.flush(30)
    elapsed = time.monotonic() - started
    if flushed:
        Path(flushed).touch()
    emitted_after = time.monotonic()  # the next document counts every request of the run
    while (not stats or requests_sent(stats[0])[0] < emitted_after) and time.monotonic() < emitted_after + 5:
        producer.poll(0.05)
    requests = requests_sent(stats[0])[1] if stats else 0
    print(json.dumps({"sent": sent, "seconds": elapsed, "requests": requests}), flush=True)
    if out:
        Path(out).write_bytes(acked.tobytes())


def run_consumer(bootstrap: str, topic: str, partitions: int, seconds: float, out: str, ready: str) -> None:
    """Read every partition from its end for `seconds`, and on while records still arrive (until
    none came for a second, DRAIN_S at the most), so that a broker running late is measured on every
    record rather than on the early ones; write each latency (ns) to `out`, and the (time, requests
    sent) of the statistics librdkafka emitted meanwhile to `out`.stats."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    stats: list[str] = []  # kept as text: parsing them is left until the measured window is over
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "latency",
            "fetch.min.bytes": 1,
            "enable.auto.commit": False,
            "statistics.interval.ms": CONSUMER_STATS_MS,
            "stats_cb": stats.append,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    consumer.consume(1, timeout=2.0)  # resolves the end offsets before the producer starts
    Path(ready).touch()
    latencies = array("q")
    deadline = time.monotonic() + seconds
    hard_deadline, last_record = deadline + DRAIN_S, 0.0
    while (now := time.monotonic()) < deadline or (now < hard_deadline and now - last_record < 1.0):
        message = consumer.poll(0.1)  # returns as soon as one record is there (consume(n) waits for n)
        if message is not None and message.error() is None:
            latencies.append(time.time_ns() - int.from_bytes(message.value()[:8], "big"))
            last_record = time.monotonic()
    consumer.close()
    Path(out).write_bytes(latencies.tobytes())
    samples = [requests_sent(document) for document in stats]
    Path(out + ".stats").write_text(json.dumps(samples))


def requests_between(samples: list[tuple[float, int]], start: float, end: float) -> float:
    """The requests a client sent between two CLOCK_MONOTONIC times, from its (time, count so far)
    samples, each end interpolated between the samples around it (held at the nearest outside them)."""

    def at(moment: float) -> float:
        before = [sample for sample in samples if sample[0] <= moment]
        after = [sample for sample in samples if sample[0] > moment]
        if not before or not after:
            return float((before or after)[-1 if before else 0][1])
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0)

    return at(end) - at(start) if samples else 0.0


# -- the driver ------------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def compiler_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds so far of the JVM's JIT compiler threads (named `C1 CompilerThre`, `C2 ...`) among
    the threads of `pids`; 0 for a broker that has none."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                if "CompilerThre" not in (task / "comm").read_text():
                    continue
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended
                continue
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def requests_by_api(metrics_urls: list[str]) -> dict[str, int]:
    """Kafka's API name -> requests answered so far, summed over the brokers' `/metrics` pages."""
    pattern = re.compile(r"^kafka_network_requestmetrics_requests_total\{([^}]*)\} (\S+)$", re.MULTILINE)
    counts: dict[str, int] = {}
    for url in metrics_urls:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for labels, value in pattern.findall(text):
            name = re.search(r'request="([^"]*)"', labels)
            if name is not None:
                counts[name.group(1)] = counts.get(name.group(1), 0) + int(float(value))
    return counts


def metrics_listener() -> dict[str, str]:
    """The override that serves a broker's `/metrics` on a free loopback port."""
    from odradek.testing.broker import free_port

    return {"http.listeners": f"http://127.0.0.1:{free_port()}"}


# A broker under test: its bootstrap servers, the pids whose CPU is its cost, its /metrics pages.
Broker = tuple[str, list[int], list[str]]


@contextmanager
def single(name: str) -> Iterator[Broker]:
    """One broker of bench/peers.py by name; odradek's with its `/metrics` page."""
    from peers import single_broker  # bench/peers.py

    overrides = metrics_listener() if name == "odradek" else None
    with single_broker(name, overrides) as broker:
        yield (
            broker.bootstrap,
            [broker.pid or 0],
            [f"{overrides['http.listeners']}/metrics"] if overrides else [],
        )


@contextmanager
def odradek_cluster() -> Iterator[Broker]:
    from odradek.testing.cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="odradek-latency-") as root:
        overrides = {"offsets.topic.replication.factor": 1}
        cluster = LocalCluster(Path(root), 2, overrides=overrides, metrics=True).start(60)
        try:
            cluster.wait_for_controller(60)
            ids = list(cluster.brokers)
            pids = [cluster.brokers[broker_id].pid or 0 for broker_id in ids]
            yield cluster.bootstrap, pids, [cluster.metrics_url(broker_id) for broker_id in ids]
        finally:
            cluster.stop()


BROKERS: dict[str, Callable[[], AbstractContextManager[Broker]]] = {
    "odradek": lambda: single("odradek"),
    "kafka-3.9": lambda: single("kafka-3.9"),
    "kafka-4": lambda: single("kafka-4"),
    "tansu": lambda: single("tansu"),
    "odradek-cluster": odradek_cluster,
}


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    topic = NewTopic(name, partitions, replication_factor)
    admin.create_topics([topic], operation_timeout=60)[name].result(60)
    time.sleep(1.0)  # leaders loaded and known to every client


@dataclass(frozen=True, slots=True)
class LatencyResult:
    """One rate's run against one broker (latencies in ms, ascending)."""

    rate: float  # the target, MB/s; 0 for as fast as the producer goes
    achieved_mb_s: float
    latencies_ms: list[float]
    acks_only: bool
    sent: int
    wall_s: float  # the measured window
    cpu_s: float  # the broker's user + system CPU over it
    client_requests: float  # the requests producer and consumer sent in it (librdkafka's count)
    compiler_cpu_s: float  # of `cpu_s`, what a JVM's JIT compiler threads took
    broker_requests: dict[str, int] = field(default_factory=dict)  # by API, from odradek's /metrics

    def percentile(self, q: float) -> float:
        return self.latencies_ms[min(len(self.latencies_ms) - 1, int(q * len(self.latencies_ms)))]

    @property
    def cores(self) -> float:
        return self.cpu_s / self.wall_s

    @property
    def compiler_share(self) -> float:
        return self.compiler_cpu_s / self.cpu_s if self.cpu_s else 0.0

    def compiler_note(self) -> str:
        return f" ({self.compiler_share:.0%} of it in JIT compiler threads)" if self.compiler_cpu_s else ""

    @property
    def cpu_per_request_us(self) -> float:
        return self.cpu_s / self.client_requests * 1e6 if self.client_requests else float("nan")

    def line(self) -> str:
        ms = self.latencies_ms
        return (
            f"target {self.rate or 'max'!s:>4} MB/s: achieved {self.achieved_mb_s:6.1f} MB/s, "
            f"{'acknowledged' if self.acks_only else 'received'} {len(ms):,} of {self.sent:,}; latency p50 "
            f"{statistics.median(ms):7.2f} p99 {self.percentile(0.99):7.2f} "
            f"p99.9 {self.percentile(0.999):7.2f} max {ms[-1]:7.2f} ms; broker CPU {self.cores:.2f} cores; "
            f"client requests/s {self.client_requests / self.wall_s:,.0f}, "
            f"{self.cpu_per_request_us:,.0f} us CPU per request{self.compiler_note()}"
            f"{request_rates(self.broker_requests, self.wall_s, self.cpu_s)}"
        )


def measure(broker: Broker, topic: str, rate: float, args: argparse.Namespace) -> LatencyResult | str:
    """One run at `rate` (0: as fast as it goes): the result, or one line saying nothing arrived."""
    bootstrap, pids, metrics_urls = broker
    partitions, seconds, acks_only = args.partitions, args.seconds, args.acks_only
    with tempfile.TemporaryDirectory() as tmp:
        out, ready, flushed = f"{tmp}/latencies", f"{tmp}/ready", f"{tmp}/flushed"
        me = [sys.executable, __file__, "--bootstrap", bootstrap, "--topic", topic]
        if args.keyed:
            me = [*me, "--keyed", "--key-space", str(args.key_space)]
        if acks_only:  # no consumer: the producer writes its acknowledgement latencies
            consumer, me = None, [*me, "--out", out]
        else:
            consumer = subprocess.Popen(
                [*me, "--role", "consumer", "--partitions", str(partitions), "--seconds", str(seconds + 4)]
                + ["--out", out, "--ready", ready]
            )
            while not Path(ready).exists():
                time.sleep(0.05)
        requests_before = requests_by_api(metrics_urls)
        compiler_before = compiler_cpu_seconds(pids)
        cpu_before, window_start = cpu_seconds(pids), time.monotonic()
        producer = subprocess.Popen(
            [*me, "--role", "producer", "--rate", str(rate), "--seconds", str(seconds), "--flushed", flushed],
            stdout=subprocess.PIPE,
            text=True,
        )
        while not Path(flushed).exists() and producer.poll() is None:
            time.sleep(0.01)
        window_end = time.monotonic()
        cpu = cpu_seconds(pids) - cpu_before
        compiler = compiler_cpu_seconds(pids) - compiler_before
        requests_after = requests_by_api(metrics_urls)
        produced, _ = producer.communicate()
        if producer.returncode != 0:
            raise RuntimeError(f"the producer exited with {producer.returncode}")
        sent = json.loads(produced.strip().splitlines()[-1])
        client_requests = float(sent["requests"])
        if consumer is not None:
            consumer.wait()
            samples = json.loads(Path(out + ".stats").read_text())
            client_requests += requests_between(samples, window_start, window_end)
        found = sorted(array("q", Path(out).read_bytes()))
    if not found:
        return f"rate {rate or 'max'}: nothing received"
    return LatencyResult(
        rate=rate,
        achieved_mb_s=sent["sent"] * RECORD / sent["seconds"] / 1e6,
        latencies_ms=[value / 1e6 for value in found],
        acks_only=acks_only,
        sent=sent["sent"],
        wall_s=window_end - window_start,
        cpu_s=cpu,
        client_requests=client_requests,
        compiler_cpu_s=compiler,
        broker_requests={
            name: count - requests_before.get(name, 0) for name, count in requests_after.items()
        },
    )


def request_rates(requests: dict[str, int], wall: float, cpu: float) -> str:
    """The requests per second by API a broker counted itself (the busiest first), and the CPU per
    request by that count."""
    busy = sorted(((count / wall, name) for name, count in requests.items() if count > 0), reverse=True)
    if not busy:
        return ""
    total = sum(rate for rate, _ in busy)
    listed = ", ".join(f"{name} {rate:,.0f}" if rate >= 10 else f"{name} {rate:.1f}" for rate, name in busy)
    return (
        f"; by the broker's /metrics: requests/s {listed}, {cpu / wall / total * 1e6:,.0f} us CPU per request"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("producer", "consumer"))
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic", default="")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--rates", default="5,10,20,50,max")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--brokers",
        default="odradek,tansu",
        help="comma-separated: odradek,kafka-3.9,kafka-4,tansu,odradek-cluster",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=1,
        help="the topic's (2 with odradek-cluster: each broker follows half)",
    )
    parser.add_argument(
        "--acks-only",
        action="store_true",
        help="no consumer: the latency is from send to the producer's delivery report (acks=all)",
    )
    parser.add_argument("--keyed", action="store_true", help="records keyed, partitioned by librdkafka")
    parser.add_argument("--key-space", type=int, default=1_000_000, help="distinct keys with --keyed")
    parser.add_argument("--out")
    parser.add_argument("--ready")
    parser.add_argument("--flushed")
    args = parser.parse_args()
    if args.role == "producer":
        key_space = args.key_space if args.keyed else 0
        run_producer(args.bootstrap, args.topic, args.rate, args.seconds, args.out, key_space, args.flushed)
        return
    if args.role == "consumer":
        run_consumer(args.bootstrap, args.topic, args.partitions, args.seconds, args.out, args.ready)
        return
    rates = [0.0 if r == "max" else float(r) for r in args.rates.split(",")]
    seconds = f"{args.seconds:.0f} s per rate"
    print(
        f"machine: {os.cpu_count()} cpus; {args.partitions} partitions, replication factor "
        f"{args.replication_factor}, 1 KiB records, {seconds}, "
        f"{f'keyed over {args.key_space:,} keys' if args.keyed else 'unkeyed'}"
    )
    for name in args.brokers.split(","):
        try:
            broker = BROKERS[name]()
            running = broker.__enter__()
        except Exception as exc:  # a peer that is not installed is reported, not fatal
            print(f"{name}: not measured ({(str(exc) or type(exc).__name__).splitlines()[0]})")
            continue
        try:
            for index, rate in enumerate(rates):
                topic = f"latency-{index}-{int(time.time())}"
                create_topic(running[0], topic, args.partitions, args.replication_factor)
                result = measure(running, topic, rate, args)
                print(f"{name} {result.line() if isinstance(result, LatencyResult) else result}", flush=True)
        finally:
            broker.__exit__(None, None, None)


if __name__ == "__main__":
    main()
