"""Consumer groups on a cluster: `__consumer_offsets` replicated three ways, the group coordinator
following leadership of its partition. A kill -9 of the coordinator's broker loses no committed
offset: the partition's new leader loads the group and a consumer resumes where the group left off."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.coordinator.partitioning import partition_for
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.conftest import SESSION_TIMEOUT_MS
from tests.cluster.test_replication import create_replicated_topic, produce_all
from tests.compat.helpers import QUIET

pytestmark = pytest.mark.slow

OFFSETS_PARTITIONS = 3
GROUP = "readers"


@pytest.fixture
def grouped(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster(
        **{
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
            "replica.fetch.backoff.ms": 200,
        }
    )


def consumer(bootstrap: str) -> Consumer:
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": GROUP,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        **QUIET,
    }
    return Consumer(settings)


def read(client: Consumer, count: int, timeout_s: float = 60) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        for message in client.consume(count - len(values), timeout=1.0):
            assert message.error() is None, message.error()
            values.append(message.value())
        return len(values) >= count

    eventually(more, timeout_s, f"{count} records")
    return values


def test_committed_offsets_survive_a_kill_9_of_the_coordinator(grouped: LocalCluster) -> None:
    create_replicated_topic(grouped, "events")
    values = [b"event-%03d" % i for i in range(100)]
    assert produce_all(grouped, "events", values) == []
    first = consumer(grouped.bootstrap)
    first.subscribe(["events"])
    assert read(first, 60) == values[:60]
    first.commit(offsets=[TopicPartition("events", 0, 60)], asynchronous=False)
    first.close()

    offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    state = grouped.state("__consumer_offsets", offsets_partition)
    assert len(state["isr"]) == 3  # the commit is on every replica
    coordinator = state["leader"]
    grouped.brokers[coordinator].kill()
    eventually(
        lambda: (
            (grouped.state("__consumer_offsets", offsets_partition) or {}).get("leader")
            not in (None, coordinator)
        ),
        SESSION_TIMEOUT_MS / 1000 + 10,
        "a new leader of the group's offsets partition",
    )

    survivors = ",".join(p.bootstrap for b, p in grouped.brokers.items() if b != coordinator)
    second = consumer(survivors)
    try:
        committed = eventually(
            lambda: [
                tp for tp in second.committed([TopicPartition("events", 0)], timeout=5) if tp.offset >= 0
            ],
            30,
            "the committed offset from the new coordinator",
        )
        assert committed[0].offset == 60
        second.subscribe(["events"])
        assert read(second, 40) == values[60:]
    finally:
        second.close()
