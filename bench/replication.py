"""Replication cost on a local three-broker cluster: odradek (a real ZooKeeper and three `odradek
serve` processes), Apache Kafka 3.9 (three brokers on a ZooKeeper of their own) or Kafka 4.x (three
combined broker+controller nodes in KRaft), each on loopback.

Measures, in one run on this machine:
1. throughput: 1 KiB records produced with confluent-kafka (acks=all, linger.ms 5, idempotent) as
   fast as the cluster takes them, to a topic of replication factor 1 and to one of replication
   factor 3 (min.insync.replicas 2), after an unmeasured warm-up of a fifth as many records to the
   RF=3 topic; MB/s of acknowledged records;
2. latency at a fixed rate (default 10 MB/s; `--latency-seconds 0` skips it): p50 / p99 / max from
   produce() to the delivery report, RF=1 against RF=3;
3. broker CPU per GB: user+system seconds from /proc/<pid>/stat of the RF=3 partition's leader and of
   a follower over the throughput run, divided by the bytes acknowledged (the JVM's pid for Kafka;
   ZooKeeper's CPU is not counted for either);
4. failover: kill -9 of the RF=3 partition's leader during a steady produce, time until the first
   record produced after the kill is acknowledged. The death is noticed after the same timeout on
   every cluster (`--session-timeout-ms`, 6 s by default): odradek's and Kafka 3.9's
   zookeeper.session.timeout.ms, Kafka 4's broker.session.timeout.ms. In Kafka 4 the killed node
   may also be the active controller, as in odradek the killed broker may be the controller.

Leaders, replicas and ISRs are read from Metadata (librdkafka's AdminClient), the same for all three.
Kafka's JVMs run as its start script runs them (testing/kafka_reference.SERVER_JVM_OPTIONS).

Run `python bench/replication.py [--cluster odradek|kafka-3.9|kafka-4] [--records N] [--rate MBPS]
[--latency-seconds S] [--session-timeout-ms MS]` from the repository root; bench/side_by_side.py
calls `run`. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from peers import KAFKA_VERSIONS, missing  # noqa: E402

from odradek.testing import kafka_reference  # noqa: E402
from odradek.testing.cluster import LocalCluster, eventually  # noqa: E402
from odradek.testing.zookeeper import ZooKeeperServer  # noqa: E402

RECORD = 1024
TICKS = os.sysconf("SC_CLK_TCK")
CLUSTERS = ("odradek", "kafka-3.9", "kafka-4")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass(slots=True)
class Cluster:
    """Three brokers, whichever kind: how clients reach them, each one's pid, and a kill -9."""

    bootstrap: str
    pids: dict[int, int]
    kill: Callable[[int], None]


@contextmanager
def three_brokers(name: str, session_timeout_ms: int) -> Iterator[Cluster]:
    """A started three-broker cluster of `name` (CLUSTERS) in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix=f"replication-{name}-") as tmp, ExitStack() as stack:
        if name == "odradek":
            local = LocalCluster(tmp, 3, session_timeout_ms=session_timeout_ms)
            stack.callback(local.close)
            local.start(60)
            local.wait_for_controller(60)
            pids = {broker_id: process.pid or 0 for broker_id, process in local.brokers.items()}
            yield Cluster(local.bootstrap, pids, lambda broker_id: local.brokers[broker_id].kill())
            return
        version = KAFKA_VERSIONS[name]
        if kafka_reference.is_kraft(version):
            overrides: dict[str, object] = {"broker.session.timeout.ms": session_timeout_ms}
            zookeeper = None
        else:
            overrides = {"zookeeper.session.timeout.ms": session_timeout_ms}
            zookeeper = stack.enter_context(ZooKeeperServer(Path(tmp) / "zookeeper")).connect_string
        kafka = kafka_reference.KafkaCluster(
            Path(tmp) / "kafka",
            version,
            3,
            zookeeper_connect=zookeeper,
            overrides=overrides,
            jvm_options=kafka_reference.SERVER_JVM_OPTIONS,
        )
        stack.enter_context(kafka)
        by_id = {broker.broker_id: broker for broker in kafka.brokers}
        pids = {broker_id: broker.pid or 0 for broker_id, broker in by_id.items()}
        yield Cluster(kafka.bootstrap, pids, lambda broker_id: by_id[broker_id].kill())


def partition(bootstrap: str, topic: str) -> tuple[int, list[int], list[int]] | None:
    """Partition 0 of `topic` as Metadata tells it: leader, replicas, ISR (None when not known)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
    except Exception:  # KafkaException: the cluster is not answering yet
        return None
    if found is None or found.error is not None or 0 not in found.partitions:
        return None
    state = found.partitions[0]
    return (state.leader, list(state.replicas), list(state.isrs)) if state.leader >= 0 else None


def create(cluster: Cluster, name: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    admin.create_topics([NewTopic(name, 1, replication, config=config)])[name].result(30)

    def in_sync() -> bool:
        state = partition(cluster.bootstrap, name)
        return state is not None and len(state[2]) == replication

    eventually(in_sync, 60, f"{name} ISR")


def producer(cluster: Cluster) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": True,
            "queue.buffering.max.kbytes": 32768,
            "log_level": 0,
        }
    )


def throughput(cluster: Cluster, topic: str, records: int) -> float:
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
    if client.flush(120):
        raise RuntimeError(f"{topic}: records still unacknowledged after 120 s")
    return records * RECORD / (time.monotonic() - started) / 1e6


def latencies(cluster: Cluster, topic: str, rate_mbps: float, seconds: float) -> list[float]:
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


def failover(cluster: Cluster, topic: str, leader: int) -> float:
    """Seconds from kill -9 of `leader` to the first acknowledgement of a record sent after it."""
    client = producer(cluster)
    acked_after: list[float] = []
    killed = threading.Event()

    def on_delivery(err: object, _msg: object) -> None:
        if err is None and killed.is_set():
            acked_after.append(time.monotonic())

    for _ in range(200):
        client.produce(topic, value=b"before", partition=0, on_delivery=on_delivery)
    client.flush(30)
    cluster.kill(leader)
    kill_time = time.monotonic()
    killed.set()
    deadline = kill_time + 60
    while not acked_after and time.monotonic() < deadline:
        client.produce(topic, value=b"after", partition=0, on_delivery=on_delivery)
        client.poll(0.01)
    client.flush(30)
    return acked_after[0] - kill_time if acked_after else float("nan")


@dataclass(slots=True)
class ReplicationResult:
    rf1_mb_s: float
    rf3_mb_s: float
    leader_cpu_s_per_gb: float
    follower_cpu_s_per_gb: float
    failover_s: float
    latency_ms: dict[str, list[float]] = field(default_factory=dict)  # topic -> acknowledgement latencies


def run(
    name: str,
    records: int,
    session_timeout_ms: int = 6000,
    rate: float = 10.0,
    latency_seconds: float = 0.0,
    report: Callable[[str], None] = print,
) -> ReplicationResult:
    """Every figure of the module docstring on a fresh three-broker cluster `name`, each line also
    handed to `report` as it is measured."""
    with three_brokers(name, session_timeout_ms) as cluster:
        create(cluster, "rf1", 1)
        create(cluster, "rf3", 3)
        throughput(cluster, "rf3", max(records // 5, 1000))  # warm-up (a JVM's JIT too), not measured
        state = eventually(lambda: partition(cluster.bootstrap, "rf3"), 30, "rf3's leader")
        leader, _, isr = state
        follower = next(b for b in isr if b != leader)
        rf1 = throughput(cluster, "rf1", records)
        report(f"{name}: RF=1 acks=all throughput: {rf1:8.1f} MB/s")
        pids = {b: cluster.pids[b] for b in (leader, follower)}
        cpu_before = {b: cpu_seconds(pid) for b, pid in pids.items()}
        rf3 = throughput(cluster, "rf3", records)
        gigabytes = records * RECORD / 1e9
        cpu = {b: (cpu_seconds(pid) - cpu_before[b]) / gigabytes for b, pid in pids.items()}
        report(f"{name}: RF=3 acks=all throughput: {rf3:8.1f} MB/s")
        per_gb = f"leader {cpu[leader]:.2f} s, follower {cpu[follower]:.2f} s"
        report(f"{name}: broker CPU per GB (RF=3): {per_gb}")
        result = ReplicationResult(rf1, rf3, cpu[leader], cpu[follower], float("nan"))
        for topic in ("rf1", "rf3") if latency_seconds > 0 else ():
            found = result.latency_ms[topic] = latencies(cluster, topic, rate, latency_seconds)
            report(
                f"{name}: {topic} latency at {rate} MB/s: p50 {statistics.median(found):.2f} ms, "
                f"p99 {percentile(found, 0.99):.2f} ms, max {max(found):.2f} ms ({len(found)} records)"
            )
        result.failover_s = failover(cluster, "rf3", leader)
        report(
            f"{name}: failover after kill -9 of the leader: {result.failover_s:.2f} s "
            f"(death noticed after {session_timeout_ms} ms)"
        )
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="odradek", help="comma-separated: " + ",".join(CLUSTERS))
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=10.0, help="MB/s for the latency run")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cpus; records {args.records} x {RECORD} B; latency at {args.rate} MB/s")
    for name in args.cluster.split(","):
        reason = missing(name)
        if reason is not None:
            print(f"{name}: not measured ({reason})")
            continue
        run(name, args.records, args.session_timeout_ms, args.rate, args.latency_seconds)


if __name__ == "__main__":
    main()
