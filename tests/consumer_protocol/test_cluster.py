"""A KIP-848 consumer group on a three-broker ZooKeeper cluster: the group lives on the shard of its
`__consumer_offsets` partition (replicated three ways); when that partition's leader is killed, the
new leader replays the group's records and the member goes on with its member id, epoch and
assignment, never rejoining."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Consumer

from odradek.coordinator.partitioning import partition_for
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic, produce_all
from tests.compat.helpers import QUIET
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.consumer_protocol.conftest import FAST_GROUPS

pytestmark = pytest.mark.slow

OFFSETS_PARTITIONS = 3
GROUP = "kip848-readers"


def read(client: Consumer, count: int, timeout_s: float = 60) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        message = client.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            values.append(message.value() or b"")
        return len(values) >= count

    eventually(more, timeout_s, f"{count} records")
    return values


def test_the_member_keeps_its_epoch_and_assignment_when_the_coordinator_is_killed(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(
        **{
            **FAST_GROUPS,
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
            "replica.fetch.backoff.ms": 200,
        }
    )
    create_replicated_topic(cluster, "events")
    values = [b"event-%03d" % i for i in range(40)]
    assert produce_all(cluster, "events", values[:20]) == []
    member = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    try:
        member.subscribe(["events"])
        assert read(member, 20) == values[:20]
        member_id = member.memberid()
        offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
        state = cluster.state("__consumer_offsets", offsets_partition)
        assert state is not None and len(state["isr"]) == 3  # the group's records are on every replica
        coordinator = state["leader"]
        cluster.brokers[coordinator].kill()
        eventually(
            lambda: (
                (cluster.state("__consumer_offsets", offsets_partition) or {}).get("leader")
                not in (None, coordinator)
            ),
            CLUSTER_SESSION_TIMEOUT_MS / 1000 + 15,
            "a new leader of the group's offsets partition",
        )
        new_coordinator = cluster.state("__consumer_offsets", offsets_partition)["leader"]  # type: ignore[index]
        assert produce_all(cluster, "events", values[20:]) == []
        assert read(member, 20) == values[20:]
        assert member.memberid() == member_id
        # the group was replayed, not created anew by a member fenced and rejoining
        log = cluster.brokers[new_coordinator].output_tail(1 << 22)
        assert f"Consumer group {GROUP} created" not in log
        assert f"Consumer group {GROUP} moved to epoch" not in log
    finally:
        member.close()
