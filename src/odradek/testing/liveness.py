"""What a healed ZooKeeper-mode cluster looks like, checked from outside: the liveness half of the
fault harness (testing/chaos.py checks safety: nothing acknowledged lost).

Owns:
- `liveness_findings(cluster, topic, partitions)`: what is not healed now, one line each (none:
  healed), from ZooKeeper (the registered brokers, /controller, each partition's state), every
  broker's /metrics (a cluster made with `metrics`) and every broker's Metadata:
  - every broker of the cluster is registered and the controller is one of them;
  - the controller's channel reaches every live broker (`odradek_controller_unreached_brokers` 0
    on it), only it says it is the active controller, and no broker has gone unheard by the
    current controller past the bound (`odradek_broker_controller_silent` 0 everywhere);
  - every broker's Metadata names ZooKeeper's controller and live brokers, and each partition's
    leader and ISR as ZooKeeper has them;
  - every partition's ISR in ZooKeeper is its whole replica set, led by a live broker;
- `wait_live(...)`: those checks polled until none is left or a deadline passes;
- `produce_to_every_partition(...)`: one acks=all record to each partition, each value's
  (partition, offset) or failure;
- `broker_tails(cluster)`: the last lines of every broker's output, for the report of a failure.

Callers: testing/chaos.py (after each cycle's heal and after the run), tests/cluster. Not used by
the broker itself.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterable

from confluent_kafka import KafkaError, Message, Producer

from odradek.testing.cluster import LocalCluster, metadata_view, partition_view

QUIET = {"log_level": 3}
SCRAPE_TIMEOUT_S = 2.0


def liveness_findings(cluster: LocalCluster, topic: str, partitions: int) -> list[str]:
    """What is not healed now (see the module docstring); empty when the cluster is healed."""
    live, controller = cluster.live_broker_ids(), cluster.controller()
    if live != sorted(cluster.brokers) or controller not in live:
        return [
            f"registered {live}, controller {controller}: expected {sorted(cluster.brokers)} and one of them"
        ]
    states = {p: cluster.state(topic, p) or {} for p in range(partitions)}
    expected = {p: (s.get("leader", -1), tuple(sorted(s.get("isr", ())))) for p, s in states.items()}
    replicas = {p: sorted(cluster.replicas(topic, p)) for p in range(partitions)}
    findings = [
        f"{topic}-{p}: ISR {list(isr)} led by {leader}, replicas {replicas[p]}"
        for p, (leader, isr) in expected.items()
        if leader not in live or list(isr) != replicas[p]
    ]
    for broker_id in live:
        findings += _broker_findings(cluster, broker_id, controller, live, topic, expected)
    return findings


def _broker_findings(
    cluster: LocalCluster,
    broker_id: int,
    controller: int,
    live: list[int],
    topic: str,
    partitions: dict[int, tuple[int, tuple[int, ...]]],
) -> list[str]:
    process = cluster.brokers[broker_id]
    findings = []
    if cluster.metrics:
        gauges = scrape(cluster.metrics_url(broker_id))
        wanted = {
            "odradek_controller_unreached_brokers": 0.0,
            "kafka_controller_kafkacontroller_activecontrollercount": float(broker_id == controller),
            "odradek_broker_controller_silent": 0.0,
        }
        findings += [
            f"broker {broker_id}: {name} {gauges.get(name)}, expected {value:g}"
            for name, value in wanted.items()
            if gauges.get(name) != value
        ]
    view = metadata_view(process)
    if view != (controller, live):
        findings.append(
            f"broker {broker_id}: Metadata names (controller, brokers) {view}, ZooKeeper {controller, live}"
        )
    found = partition_view(process, topic)
    if found != partitions:
        findings.append(f"broker {broker_id}: Metadata has {topic} as {found}, ZooKeeper {partitions}")
    return findings


def scrape(url: str) -> dict[str, float]:
    """The unlabelled samples of a Prometheus text page, by name; empty when unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as page:
            text = page.read().decode()
    except OSError:
        return {}
    samples = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            samples[name] = float(value)
    return samples


def wait_live(cluster: LocalCluster, topic: str, partitions: int, deadline: float) -> list[str]:
    """`liveness_findings` polled until none is left (returns []) or `deadline` (time.monotonic())
    passes (returns the last ones)."""
    while True:
        findings = liveness_findings(cluster, topic, partitions)
        if not findings or time.monotonic() > deadline:
            return findings
        time.sleep(0.5)


def produce_to_every_partition(
    bootstrap: str, topic: str, values: Iterable[bytes], timeout_s: float = 20.0
) -> dict[bytes, tuple[int, int] | str]:
    """The i-th value to partition i with acks=all: each value's (partition, offset), or why it
    failed."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout_s * 1000), **QUIET}
    )
    answers: dict[bytes, tuple[int, int] | str] = {}

    def delivered(error: KafkaError | None, message: Message) -> None:
        value = message.value()
        assert value is not None
        answers[value] = str(error) if error is not None else (message.partition(), message.offset())

    for partition, value in enumerate(values):
        producer.produce(topic, value, partition=partition, on_delivery=delivered)
    producer.flush(timeout_s + 5)
    return answers


def broker_tails(cluster: LocalCluster, lines: int = 15) -> str:
    """The last `lines` lines of every broker's output."""
    return "\n".join(
        f"--- broker {broker_id} ({process.output_path}):\n"
        + "\n".join(process.output_tail(16_384).splitlines()[-lines:])
        for broker_id, process in sorted(cluster.brokers.items())
    )
