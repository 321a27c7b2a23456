"""Members of a KIP-848 consumer group joining and leaving while records flow, on a three-broker
ZooKeeper cluster: by its committed offsets the group consumes every record exactly once.

A producer writes numbered records (acks=all) round-robin over six partitions while consumer-protocol
members (confluent-kafka, `group.protocol=consumer`) start and close. Each member processes a batch
and commits it synchronously with explicit offsets; only a batch whose commit was acknowledged
counts (members.py: a failed commit rolls the member back, a replacement takes its place). At the
end the group's committed offsets must equal every partition's end offset and the counted
(partition, offset) pairs must be exactly each partition's committed prefix, each once: a record
skipped by a commit (a gap) or counted by two members (a duplicate, e.g. a partition handed to a new
owner before its previous owner's last commit, or owned twice) fails the test, and so does a value
produced but never counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic
from tests.compat.helpers import QUIET
from tests.consumer_protocol.conftest import FAST_GROUPS
from tests.consumer_protocol.members import Ledger, Member, committed_offsets, consumer_config, end_offsets

pytestmark = pytest.mark.slow

PARTITIONS = 6
RECORDS = 3000
CLUSTER = {
    **FAST_GROUPS,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "replica.fetch.backoff.ms": 200,
}


class NumberedProducer:
    """Writes `count` numbered records (from `first`), acks=all, round-robin over the partitions,
    in a thread."""

    def __init__(self, bootstrap: str, topic: str, count: int, per_second: float, first: int = 0) -> None:
        self.topic = topic
        self.first = first
        self.count = count
        self.per_second = per_second
        self.errors: list[str] = []
        self.acknowledged = 0
        self._client = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def join(self, timeout_s: float = 120) -> None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the producer did not finish"

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def _on_delivery(self, err: object, _msg: object) -> None:
        if err is None:
            self.acknowledged += 1
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        started = time.monotonic()
        for i in range(self.first, self.first + self.count):
            delay = started + (i - self.first) / self.per_second - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self._client.produce(
                self.topic, value=b"record-%06d" % i, partition=i % PARTITIONS, on_delivery=self._on_delivery
            )
            self._client.poll(0)
        self._client.flush(60)


def test_members_join_and_leave_under_load_and_every_record_is_consumed_once(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    topic, group = "churned", "churning-group"
    create_replicated_topic(cluster, topic, PARTITIONS)
    ledger = Ledger()
    members: list[Member] = []
    replaced = 0

    def member() -> Member:
        made = Member(
            f"m{len(members)}", consumer_config(cluster.bootstrap, group, "consumer"), [topic], ledger
        )
        members.append(made)
        return made.start()

    def keep(count: int) -> None:
        """Replace the members that rolled back, so `count` run."""
        nonlocal replaced
        running = [m for m in members if m.running and not m.rolled_back]
        for _ in range(count - len(running)):
            replaced += 1
            member()

    producer = NumberedProducer(cluster.bootstrap, topic, RECORDS, per_second=250).start()
    try:
        first, second = member(), member()
        # the membership changes while records flow: join, leave (close), join, leave, join
        schedule: list[Callable[[], object]] = [member, first.stop, member, second.stop, member]
        for step in schedule:
            time.sleep(2.0)
            step()
            keep(3 if step is member else 2)
        producer.join()
        assert producer.errors == []
        assert producer.acknowledged == RECORDS
        ends = end_offsets(cluster.bootstrap, topic, PARTITIONS)
        assert sum(ends.values()) == RECORDS

        def drained() -> bool:
            keep(2)
            return committed_offsets(cluster.bootstrap, group, topic, PARTITIONS) == ends

        eventually(drained, 90, "the group's committed offsets at the end of every partition", 1.0)
    finally:
        for m in members:
            m.stop()
    assert [m.error for m in members if m.error is not None] == []
    committed = committed_offsets(cluster.bootstrap, group, topic, PARTITIONS)
    assert ledger.problems(topic, committed, ends) == []
    assert ledger.values.keys() == {(topic, b"record-%06d" % i) for i in range(RECORDS)}
    assert max(ledger.values.values()) == 1
    # the churn really handed partitions over: more than two members committed batches
    assert sum(1 for m in members if m.batches) >= 3, [(m.name, m.batches) for m in members]
