"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16) on a three-broker
ZooKeeper cluster: the group's members heartbeat to the group coordinator, fetch and acknowledge on
each partition's leader, and the leaders keep the share-partitions' state through the share
coordinators of `__share_group_state` (replicated three ways, min.isr 2), reached over the
inter-broker listener.

A group of five consumers over twelve partitions whose leaders are spread over the three brokers
receives every record exactly once (delivery count 1) in a run without faults. Then the leader of
some partitions is killed (SIGKILL) while a group acknowledging explicitly consumes: the partitions'
new leaders read the share-partitions' state back from `__share_group_state`, so no record whose
acknowledgement the broker confirmed is delivered again, every record is received, and the group
goes on consuming on the new leaders. poll raising (librdkafka raises a fetch's partition error,
e.g. COORDINATOR_NOT_AVAILABLE while a share coordinator moves) is noted and polled again, as an
application would; each test first runs a share group once (`warm_up`) so `__share_group_state`
exists and is replicated before its own group starts.

Waits are poll loops with generous deadlines, never timing assertions; the `start_cluster`
fixture kills the brokers whatever the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.coordinator.share_coordinator import SHARE_STATE_TOPIC
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic
from tests.compat.helpers import QUIET
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3
CLUSTER = {
    "group.share.record.lock.duration.ms": 15000,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.min.heartbeat.interval.ms": 500,
    "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "replica.fetch.backoff.ms": 200,
}
DEADLINE_S = 90.0


def earliest(admin: AdminClient, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (a GROUP config resource)."""
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(cluster: LocalCluster, topic: str, numbers: range, partitions: int) -> dict[bytes, int]:
    """Numbered records, acks=all, record i to partition i % partitions: value -> partition."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    written = {}
    for i in numbers:
        value = b"record-%06d" % i
        producer.produce(topic, value=value, partition=i % partitions, on_delivery=on_delivery)
        producer.poll(0)
        written[value] = i % partitions
    assert producer.flush(60) == 0
    assert errors == []
    return written


def share_consumer(cluster: LocalCluster, group: str, topic: str, **extra: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, **QUIET, **extra})
    consumer.subscribe([topic])
    return consumer


def leaders(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    return {p: int((cluster.state(topic, p) or {}).get("leader", -1)) for p in range(partitions)}


def state_topic_replicated(cluster: LocalCluster) -> bool:
    isrs = [(cluster.state(SHARE_STATE_TOPIC, p) or {}).get("isr", ()) for p in range(STATE_PARTITIONS)]
    return all(len(isr) == 3 for isr in isrs)


def warm_up(cluster: LocalCluster) -> None:
    """A share group's first fetch on the cluster, so `__share_group_state` exists, its three
    partitions fully replicated and their share coordinators loaded, before a test's group starts
    (until then a share-partition's leader answers a fetch COORDINATOR_NOT_AVAILABLE, which
    librdkafka raises from poll)."""
    create_replicated_topic(cluster, "warm-up")
    earliest(AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET}), "warm-up-group")
    produce(cluster, "warm-up", range(1), 1)
    consumer = share_consumer(cluster, "warm-up-group", "warm-up")
    got: list[object] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not got and time.monotonic() < deadline:
            try:
                got = [m for m in consumer.poll(0.5) if m.error() is None]
            except KafkaException:
                pass
    finally:
        consumer.close()
    assert len(got) == 1
    eventually(lambda: state_topic_replicated(cluster), 30, f"{SHARE_STATE_TOPIC}'s ISR of three")


def test_five_consumers_over_twelve_replicated_partitions_receive_every_record_once(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    topic, group, partitions = "spread", "spread-group", 12
    warm_up(cluster)
    create_replicated_topic(cluster, topic, partitions)
    assert set(leaders(cluster, topic, partitions).values()) == set(cluster.brokers)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    earliest(admin, group)
    expected = produce(cluster, topic, range(600), partitions)
    consumers = [share_consumer(cluster, group, topic) for _ in range(5)]
    counts: dict[bytes, list[int]] = {}
    by_consumer = [0] * len(consumers)
    errors: list[str] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not expected.keys() <= counts.keys() and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                try:
                    messages = consumer.poll(0.2)
                except KafkaException as e:
                    errors.append(str(e))
                    continue
                for message in messages:
                    if message.error() is not None:
                        continue
                    assert message.partition() == expected[message.value()]
                    counts.setdefault(message.value(), []).append(message.delivery_count())
                    by_consumer[index] += 1
    finally:
        for consumer in consumers:
            consumer.close()
    assert expected.keys() - counts.keys() == set()
    assert counts.keys() == expected.keys()
    # no faults: each record acquired once, by one member, on its first delivery
    assert {value: seen for value, seen in counts.items() if seen != [1]} == {}, errors
    assert sum(1 for n in by_consumer if n) >= 2  # the partitions were spread over the members


class Ledger:
    """What a group acknowledging explicitly received: every delivery of each record (the phase,
    before or after the kill, the partition, the delivery count, the member, and the outcome of its
    acknowledgement: "ok" when commit_sync reported the partition's acknowledgements confirmed)."""

    def __init__(self) -> None:
        self.deliveries: dict[bytes, list[Delivery]] = {}
        self.phase = "before"
        self.errors: list[str] = []  # what poll raised (a leader or coordinator moving): polled again

    def consume(self, member: int, consumer: ShareConsumer, timeout_s: float) -> int:
        """One poll: record and acknowledge each record, then commit; how many records came."""
        pending: dict[tuple[str, int], list[Delivery]] = {}
        got = 0
        try:
            messages = consumer.poll(timeout_s)
        except KafkaException as e:
            self.errors.append(f"{self.phase}: {e}")
            return 0
        for message in messages:
            if message.error() is not None:
                continue
            got += 1
            delivery = Delivery(self.phase, message.partition(), message.delivery_count(), member)
            self.deliveries.setdefault(message.value(), []).append(delivery)
            consumer.acknowledge(message)
            pending.setdefault((message.topic(), message.partition()), []).append(delivery)
        if pending:
            failed = "no result"
            try:
                results = consumer.commit_sync(30)
            except KafkaException as e:
                results, failed = {}, str(e)
            for (topic, partition), deliveries in pending.items():
                outcome = failed
                for tp, error in results.items():
                    if (tp.topic, tp.partition) == (topic, partition):
                        outcome = "ok" if error is None else str(error)
                for delivery in deliveries:
                    delivery.ack = outcome
        return got

    def confirmed(self, phase: str | None = None) -> set[bytes]:
        """The records an acknowledgement of was confirmed (in `phase`, when given)."""
        return {
            v
            for v, seen in self.deliveries.items()
            if any(d.ack == "ok" and phase in (None, d.phase) for d in seen)
        }

    def again_after_confirmed(self, values: set[bytes]) -> dict[bytes, list[Delivery]]:
        """Those of `values` delivered again after an acknowledgement of theirs was confirmed."""
        again = {}
        for v in values:
            seen = self.deliveries[v]
            first_ok = next(i for i, d in enumerate(seen) if d.ack == "ok")
            if len(seen) > first_ok + 1:
                again[v] = seen
        return again

    def delivered_after_kill(self) -> set[bytes]:
        return {v for v, seen in self.deliveries.items() if any(d.phase == "after" for d in seen)}


@dataclass(slots=True)
class Delivery:
    phase: str
    partition: int
    count: int | None
    member: int
    ack: str = "pending"


def test_a_partition_leaders_death_while_the_group_acknowledges(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    topic, group, partitions = "failover", "failover-group", 6
    warm_up(cluster)
    create_replicated_topic(cluster, topic, partitions)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    earliest(admin, group)
    first = produce(cluster, topic, range(300), partitions)
    consumers = [
        share_consumer(cluster, group, topic, **{"share.acknowledgement.mode": "explicit"}) for _ in range(3)
    ]
    ledger = Ledger()

    def consume_until(done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not done():
            assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what} ({ledger.errors})"
            for member, consumer in enumerate(consumers):
                ledger.consume(member, consumer, 0.2)

    try:
        # every record of the first batch received and its acknowledgement confirmed by its leader
        consume_until(lambda: first.keys() <= ledger.confirmed(), "the first batch acknowledged")
        second = produce(cluster, topic, range(300, 600), partitions)
        consume_until(lambda: bool(second.keys() & ledger.deliveries.keys()), "some of the second batch")

        controller = cluster.controller()
        before = leaders(cluster, topic, partitions)
        victim = next(b for b in sorted(set(before.values())) if b != controller)
        moved = {p for p, leader in before.items() if leader == victim}
        cluster.brokers[victim].kill()
        ledger.phase = "after"
        eventually(
            lambda: all(leaders(cluster, topic, partitions)[p] not in (-1, victim) for p in moved),
            CLUSTER_SESSION_TIMEOUT_MS / 1000 + 30,
            f"new leaders of partitions {sorted(moved)}",
        )
        consume_until(lambda: second.keys() <= ledger.deliveries.keys(), "the second batch after the kill")
        third = produce(cluster, topic, range(600, 900), partitions)
        consume_until(
            lambda: third.keys() <= ledger.confirmed(), "the third batch acknowledged on the new leaders"
        )
    finally:
        for consumer in consumers:
            consumer.close()

    written = {**first, **second, **third}
    assert written.keys() - ledger.deliveries.keys() == set()
    # an acknowledgement its leader confirmed before the kill survives it: never delivered again
    before_kill = ledger.confirmed("before")
    assert first.keys() <= before_kill
    assert ledger.again_after_confirmed(before_kill) == {}, ledger.errors
    # the moved partitions served the rest of their records from their new leaders
    after_kill = ledger.delivered_after_kill()
    assert {v for v in third if written[v] in moved} <= after_kill
    assert all(leaders(cluster, topic, partitions)[p] != victim for p in moved)
    assert {d.partition for v in after_kill for d in ledger.deliveries[v] if d.phase == "after"} >= moved
