"""Replication cost on a local three-broker cluster (real ZooKeeper, three `odradek serve` processes).

Measures, in one run on this machine:
1. throughput: 1 KiB records produced with confluent-kafka (acks=all, linger.ms 5) as fast as the
   cluster takes them, to a topic of replication factor 1 and to one of replication factor 3
   (min.insync.replicas 2); MB/s of acknowledged records;
2. latency at a fixed rate (default 10 MB/s): p50 / p99 / max from produce() to the delivery report,
   RF=1 against RF=3;
3. broker CPU per GB: user+system seconds from /proc/<pid>/stat of the RF=3 partition's leader and of
   a follower over the throughput run, divided by the bytes acknowledged;
4. failover: kill -9 of the RF=3 partition's leader during a steady produce, time until the first
   record produced after the kill is acknowledged (zookeeper.session.timeout.ms is the bound).

Run `python bench/replication.py [--records N] [--rate MBPS] [--session-timeout-ms MS]` from the
repository root. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing.cluster import LocalCluster, eventually  # noqa: E402

RECORD = 1024
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def create(cluster: LocalCluster, name: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    admin.create_topics([NewTopic(name, 1, replication, config=config)])[name].result(30)
    eventually(lambda: len((cluster.state(name, 0) or {}).get("isr", ())) == replication, 30, f"{name} ISR")


def producer(cluster: LocalCluster) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": True,
            "queue.buffering.max.kbytes": 32768,
            "log_level": 3,
        }
    )


def throughput(cluster: LocalCluster, topic: str, records: int) -> float:
    """MB/s of acknowledged 1 KiB records produced as fast as the cluster takes them."""
    client = producer(cluster)
    value = b"x" * RECORD
    started = time.monotonic()
    for _ in range(records):
        while True:
            try:
                client.produce(topic, value=value, partition=0)
                break
            except BufferError:
                client.poll(0.005)
        client.poll(0)
    client.flush(120)
    return records * RECORD / (time.monotonic() - started) / 1e6


def latencies(cluster: LocalCluster, topic: str, rate_mbps: float, seconds: float) -> list[float]:
    """Milliseconds from produce() to the delivery report, at a fixed rate."""
    client = producer(cluster)
    value = b"y" * RECORD
    client.produce(topic, value=value, partition=0)  # connections and metadata before the clock
    client.flush(30)
    found: list[float] = []
    interval = RECORD / (rate_mbps * 1e6)
    started = time.monotonic()
    count = int(seconds / interval)
    for i in range(count):
        due = started + i * interval
        while time.monotonic() < due:
            client.poll(0)
        sent = time.monotonic()
        client.produce(
            topic,
            value=value,
            partition=0,
            on_delivery=lambda err, _m, s=sent: found.append(
                (time.monotonic() - s) * 1000 if err is None else float("inf")
            ),
        )
    client.flush(60)
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def failover(cluster: LocalCluster, topic: str) -> float:
    """Seconds from kill -9 of the leader to the first acknowledgement of a record sent after it."""
    client = producer(cluster)
    leader = cluster.state(topic, 0)["leader"]
    acked_after: list[float] = []
    killed = threading.Event()
    kill_time = [0.0]

    def on_delivery(err: object, _msg: object) -> None:
        if err is None and killed.is_set():
            acked_after.append(time.monotonic())

    for _ in range(200):
        client.produce(topic, value=b"before", partition=0, on_delivery=on_delivery)
    client.flush(30)
    cluster.brokers[leader].kill()
    kill_time[0] = time.monotonic()
    killed.set()
    deadline = kill_time[0] + 60
    while not acked_after and time.monotonic() < deadline:
        client.produce(topic, value=b"after", partition=0, on_delivery=on_delivery)
        client.poll(0.01)
    client.flush(30)
    return acked_after[0] - kill_time[0] if acked_after else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=10.0, help="MB/s for the latency run")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cpus; records {args.records} x {RECORD} B; latency at {args.rate} MB/s")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(tmp, 3, session_timeout_ms=args.session_timeout_ms)
        try:
            cluster.start()
            cluster.wait_for_controller()
            create(cluster, "rf1", 1)
            create(cluster, "rf3", 3)
            rf3 = cluster.state("rf3", 0)
            leader, follower = rf3["leader"], next(b for b in rf3["isr"] if b != rf3["leader"])
            pids = {b: cluster.brokers[b].pid for b in (leader, follower)}
            print(f"RF=1 acks=all throughput: {throughput(cluster, 'rf1', args.records):8.1f} MB/s")
            cpu_before = {b: cpu_seconds(pid) for b, pid in pids.items() if pid}
            mbps = throughput(cluster, "rf3", args.records)
            gigabytes = args.records * RECORD / 1e9
            cpu = {b: (cpu_seconds(pid) - cpu_before[b]) / gigabytes for b, pid in pids.items() if pid}
            print(f"RF=3 acks=all throughput: {mbps:8.1f} MB/s")
            print(f"broker CPU per GB (RF=3): leader {cpu[leader]:.2f} s, follower {cpu[follower]:.2f} s")
            for name in ("rf1", "rf3"):
                found = latencies(cluster, name, args.rate, args.latency_seconds)
                print(
                    f"{name} latency at {args.rate} MB/s: p50 {statistics.median(found):.2f} ms, "
                    f"p99 {percentile(found, 0.99):.2f} ms, max {max(found):.2f} ms ({len(found)} records)"
                )
            print(
                f"failover after kill -9 of the leader: {failover(cluster, 'rf3'):.2f} s "
                f"(zookeeper.session.timeout.ms {args.session_timeout_ms})"
            )
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
