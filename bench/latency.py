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
topic's partitions and their leaders spread over the two). For odradek it also prints the requests
the broker answered per second by API over the run (the difference of
`kafka_network_requestmetrics_requests_total` on each broker's `http.listeners` before and after,
summed over the brokers) and the broker CPU per request in microseconds.

Two shapes of traffic. Unkeyed (the default): records without keys, which librdkafka's sticky
partitioner gathers into one partition's batch at a time, so requests are few and large. `--keyed`:
each record carries a key drawn at random from `--key-space` distinct keys (default 1,000,000) and
librdkafka's own default partitioner (`partitioner` consistent_random: CRC32 of the key modulo the
partition count) chooses its partition, as a user's producer of user or order ids does; records
spread over every partition, batches hold one or two records and, as librdkafka sends one
partition per Produce request, the broker sees one request per record or two.

Run `python bench/latency.py [--partitions 100] [--rates 5,10,20,50,max] [--seconds 10]
[--brokers odradek,tansu,odradek-cluster] [--replication-factor 1] [--keyed]` from the repository
root (the issue 28 shape: `--keyed --brokers odradek --rates 5,10,20 --seconds 10`). With
`--brokers odradek-cluster --replication-factor 2` every partition has a follower on the other
broker, whose Fetch of its partitions is the many-partition pattern again, and acks=all waits for
it. `--acks-only` runs no consumer and reports the latency from send to the producer's delivery
report (acks=all) instead: the cost of replication without a reader. Tansu (bench/peers.py) needs
the `bench` extra. Prints numbers; asserts nothing.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RECORD = 1024
TICKS = os.sysconf("SC_CLK_TCK")
QUIET = {"log_level": 3}


# -- the two client processes ----------------------------------------------------------------


def run_producer(
    bootstrap: str, topic: str, rate: float, seconds: float, out: str | None = None, key_space: int = 0
) -> None:
    """Produce stamped 1 KiB records at `rate` MB/s (0: as fast as possible); print the count.
    With `out`, write each acknowledged record's latency (ns, send to delivery report) there.
    With `key_space`, each record's key is one of that many, at random; librdkafka partitions by it."""
    from confluent_kafka import Producer

    acked = array("q")

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
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - started}), flush=True)
    if out:
        Path(out).write_bytes(acked.tobytes())


def run_consumer(bootstrap: str, topic: str, partitions: int, seconds: float, out: str, ready: str) -> None:
    """Read every partition from its end for `seconds`; write each latency (ns) to `out`."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "latency",
            "fetch.min.bytes": 1,
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    consumer.consume(1, timeout=2.0)  # resolves the end offsets before the producer starts
    Path(ready).touch()
    latencies = array("q")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)  # returns as soon as one record is there (consume(n) waits for n)
        if message is not None and message.error() is None:
            latencies.append(time.time_ns() - int.from_bytes(message.value()[:8], "big"))
    consumer.close()
    Path(out).write_bytes(latencies.tobytes())


# -- the driver ------------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
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


def metrics_url(process: Any) -> str:
    return f"{process.overrides['http.listeners']}/metrics"


# A broker under test: its bootstrap servers, the pids whose CPU is its cost, its /metrics pages.
Broker = tuple[str, list[int], list[str]]


@contextmanager
def odradek() -> Iterator[Broker]:
    from odradek.testing.broker import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="odradek-latency-") as root:
        output = Path(root) / "broker.out"
        process = BrokerProcess(Path(root) / "data", overrides=metrics_listener(), output_path=output)
        process.start()
        try:
            yield process.bootstrap, [process.pid or 0], [metrics_url(process)]
        finally:
            process.stop()


@contextmanager
def odradek_cluster() -> Iterator[Broker]:
    from odradek.testing.cluster import LocalCluster

    class MeteredCluster(LocalCluster):
        """Each broker with a `/metrics` page of its own."""

        def broker(self, broker_id: int, data: str | None = None) -> Any:
            process = super().broker(broker_id, data)
            process.overrides.update(metrics_listener())
            return process

    with tempfile.TemporaryDirectory(prefix="odradek-latency-") as root:
        overrides = {"offsets.topic.replication.factor": 1}
        cluster = MeteredCluster(Path(root), 2, overrides=overrides).start(60)
        try:
            cluster.wait_for_controller(60)
            processes = list(cluster.brokers.values())
            yield cluster.bootstrap, [p.pid or 0 for p in processes], [metrics_url(p) for p in processes]
        finally:
            cluster.stop()


@contextmanager
def tansu() -> Iterator[Broker]:
    from peers import TansuBroker  # bench/peers.py

    with TansuBroker() as broker:
        yield broker.bootstrap, [broker.pid], []


BROKERS: dict[str, Callable[[], AbstractContextManager[Broker]]] = {
    "odradek": odradek,
    "tansu": tansu,
    "odradek-cluster": odradek_cluster,
}


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    topic = NewTopic(name, partitions, replication_factor)
    admin.create_topics([topic], operation_timeout=60)[name].result(60)
    time.sleep(1.0)  # leaders loaded and known to every client


def measure(broker: Broker, topic: str, rate: float, args: argparse.Namespace) -> str:
    bootstrap, pids, metrics_urls = broker
    partitions, seconds, acks_only = args.partitions, args.seconds, args.acks_only
    with tempfile.TemporaryDirectory() as tmp:
        out, ready = f"{tmp}/latencies", f"{tmp}/ready"
        me = [sys.executable, __file__, "--bootstrap", bootstrap, "--topic", topic]
        if args.keyed:
            me = [*me, "--keyed", "--key-space", str(args.key_space)]
        if acks_only:  # no consumer: the producer writes its acknowledgement latencies
            consumer, me = None, [*me, "--out", out]
        else:
            consumer = subprocess.Popen(
                [
                    *me,
                    "--role",
                    "consumer",
                    "--partitions",
                    str(partitions),
                    "--seconds",
                    str(seconds + 4),
                    "--out",
                    out,
                    "--ready",
                    ready,
                ]
            )
            while not Path(ready).exists():
                time.sleep(0.05)
        requests_before = requests_by_api(metrics_urls)
        cpu_before, wall_before = cpu_seconds(pids), time.monotonic()
        produced = subprocess.run(
            [*me, "--role", "producer", "--rate", str(rate), "--seconds", str(seconds)],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.monotonic() - wall_before
        cpu = (cpu_seconds(pids) - cpu_before) / wall
        requests = requests_by_api(metrics_urls)
        if consumer is not None:
            consumer.wait()
        sent = json.loads(produced.stdout.strip().splitlines()[-1])
        found = sorted(array("q", Path(out).read_bytes()))
    if not found:
        return f"rate {rate or 'max'}: nothing received"
    ms = [value / 1e6 for value in found]

    def pct(q: float) -> float:
        return ms[min(len(ms) - 1, int(q * len(ms)))]

    achieved = sent["sent"] * RECORD / sent["seconds"] / 1e6
    return (
        f"target {rate or 'max'!s:>4} MB/s: achieved {achieved:6.1f} MB/s, "
        f"{'acknowledged' if acks_only else 'received'} {len(ms):,}; latency p50 "
        f"{statistics.median(ms):7.2f} p99 {pct(0.99):7.2f} p99.9 {pct(0.999):7.2f} max {ms[-1]:7.2f} ms; "
        f"broker CPU {cpu:.2f} cores{request_rates(requests_before, requests, wall, cpu)}"
    )


def request_rates(before: dict[str, int], after: dict[str, int], wall: float, cpu: float) -> str:
    """The requests per second by API between two counts (the busiest first) and the CPU per request."""
    rates = {name: (count - before.get(name, 0)) / wall for name, count in after.items()}
    busy = sorted(((rate, name) for name, rate in rates.items() if rate > 0), reverse=True)
    if not busy:
        return ""
    total = sum(rate for rate, _ in busy)
    listed = ", ".join(f"{name} {rate:,.0f}" if rate >= 10 else f"{name} {rate:.1f}" for rate, name in busy)
    return f"; requests/s {listed}; {cpu / total * 1e6:,.0f} us CPU per request"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("producer", "consumer"))
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic", default="")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--rates", default="5,10,20,50,max")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--brokers", default="odradek,tansu")
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
    args = parser.parse_args()
    if args.role == "producer":
        key_space = args.key_space if args.keyed else 0
        run_producer(args.bootstrap, args.topic, args.rate, args.seconds, args.out, key_space)
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
            print(f"{name}: not measured ({exc})")
            continue
        try:
            for index, rate in enumerate(rates):
                topic = f"latency-{index}-{int(time.time())}"
                create_topic(running[0], topic, args.partitions, args.replication_factor)
                result = measure(running, topic, rate, args)
                print(f"{name} {result}", flush=True)
        finally:
            broker.__exit__(None, None, None)


if __name__ == "__main__":
    main()
