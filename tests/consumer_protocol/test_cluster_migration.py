"""A group upgraded from classic to consumer on a three-broker ZooKeeper cluster, its coordinator
then killed: the new coordinator replays the consumer group with its classic members (their
ClassicMemberMetadata: session timeout and protocols) and both kinds of member go on consuming, with
every record consumed exactly once by the committed offsets (members.py's ledger)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.coordinator.partitioning import partition_for
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.consumer_protocol.members import Crew, Ledger, committed_offsets, consumer_config, end_offsets
from tests.consumer_protocol.test_cluster_churn import CLUSTER, PARTITIONS, NumberedProducer
from tests.consumer_protocol.test_migration import group_type

pytestmark = pytest.mark.slow

TOPIC, GROUP = "migrated", "migrated-group"


def test_an_upgraded_group_with_classic_members_survives_its_coordinator(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    bootstrap = cluster.bootstrap
    create_replicated_topic(cluster, TOPIC, PARTITIONS)
    ledger = Ledger()
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    classic = Crew("classic", consumer_config(bootstrap, GROUP, "classic", **strategy), [TOPIC], ledger)
    modern = Crew("consumer", consumer_config(bootstrap, GROUP, "consumer"), [TOPIC], ledger)
    producer = NumberedProducer(bootstrap, TOPIC, 1800, per_second=150).start()
    try:
        classic.add()
        classic.add()
        eventually(lambda: classic.consuming(2), 60, "the classic members consuming")
        modern.add()
        eventually(lambda: group_type(bootstrap, GROUP) == "consumer", 30, "the group upgraded")
        eventually(lambda: modern.consuming(1) and classic.consuming(2), 60, "all members consuming")

        offsets_partition = partition_for(GROUP, CLUSTER["offsets.topic.num.partitions"])  # type: ignore[arg-type]
        coordinator = cluster.state("__consumer_offsets", offsets_partition)["leader"]  # type: ignore[index]
        cluster.brokers[coordinator].kill()
        eventually(
            lambda: (
                (cluster.state("__consumer_offsets", offsets_partition) or {}).get("leader")
                not in (None, coordinator)
            ),
            CLUSTER_SESSION_TIMEOUT_MS / 1000 + 20,
            "a new leader of the group's offsets partition",
        )
        producer.join()
        assert producer.errors == []
        ends = end_offsets(bootstrap, TOPIC, PARTITIONS)

        def drained() -> bool:
            classic.keep(2)  # a member whose commit failed in the failover rolled back: replaced
            return committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == ends

        eventually(drained, 90, "the group's committed offsets at the end of every partition", 1.0)
        assert group_type(bootstrap, GROUP) == "consumer"
        new_coordinator = cluster.state("__consumer_offsets", offsets_partition)["leader"]  # type: ignore[index]
        # replayed, not rebuilt: the classic members were not fenced and made to join afresh
        log = cluster.brokers[new_coordinator].output_tail(1 << 22)
        assert f"Consumer group {GROUP} created" not in log
    finally:
        classic.stop()
        modern.stop()
    assert classic.errors() == modern.errors() == []
    assert ledger.problems(TOPIC, committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS), ends) == []
    # by offsets: the producer is not idempotent, so a batch retried across the broker's death may
    # be in the log twice (two offsets, both consumed once)
    assert ledger.total(TOPIC) == sum(ends.values()) >= 1800
    assert {value for _, value in ledger.values} == {b"record-%06d" % i for i in range(1800)}
