"""The coordinator of a KIP-848 consumer group killed (SIGKILL) in the middle of a rebalance, on a
three-broker ZooKeeper cluster.

Member A owns every partition and has committed all it read; it stops polling, so when member B
joins, A's revocation stays pending (librdkafka revokes only from the application's poll) and B
waits for partitions A has not released. The broker leading the group's `__consumer_offsets`
partition is then killed. The new leader replays the group, A polls again and finishes its
revocation on the new coordinator, B gets its partitions: every partition is owned by exactly one
member, consumption goes on, and by the committed offsets every record is consumed exactly once
(members.py's ledger: a commit lost in the failover would hand a partition over below a commit A
had acknowledged, and B would count those records a second time).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient

from odradek.coordinator.partitioning import partition_for
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import create_replicated_topic
from tests.compat.helpers import QUIET
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.consumer_protocol.members import Ledger, Member, committed_offsets, consumer_config, end_offsets
from tests.consumer_protocol.test_cluster_churn import CLUSTER, PARTITIONS, NumberedProducer

pytestmark = pytest.mark.slow

TOPIC, GROUP = "failover-orders", "failover-group"


def describe(admin: AdminClient) -> list[tuple[set[int], set[int]]]:
    """(assignment, target assignment) of each member, by partition number."""
    found = admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)
    described = []
    for m in found.members:
        assigned = {tp.partition for tp in m.assignment.topic_partitions}
        target = (
            {tp.partition for tp in m.target_assignment.topic_partitions} if m.target_assignment else set()
        )
        described.append((assigned, target))
    return described


def probe(admin: AdminClient) -> list[tuple[set[int], set[int]]] | None:
    try:
        return describe(admin)
    except Exception:  # noqa: BLE001 - the coordinator moving: ask again
        return None


def test_the_group_heals_when_its_coordinator_is_killed_during_a_revocation(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**CLUSTER)
    create_replicated_topic(cluster, TOPIC, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    ledger = Ledger()
    config = consumer_config(cluster.bootstrap, GROUP, "consumer")
    members: list[Member] = []
    first = NumberedProducer(cluster.bootstrap, TOPIC, 300, per_second=1000).start()
    try:
        a = Member("a", config, [TOPIC], ledger).start()
        members.append(a)
        first.join()
        ends = end_offsets(cluster.bootstrap, TOPIC, PARTITIONS)
        eventually(
            lambda: committed_offsets(cluster.bootstrap, GROUP, TOPIC, PARTITIONS) == ends, 60, "A's commits"
        )
        a.paused.set()
        time.sleep(0.5)  # A's last batch committed; it polls no more
        b = Member("b", config, [TOPIC], ledger).start()
        members.append(b)

        def revocation_pending() -> bool:
            # the described assignment leaves out the partitions pending revocation: A's target
            # and assignment shrunk to half, B's target holds the other half, its assignment none
            described = probe(admin) or []
            held = sum(len(assigned) for assigned, _ in described)
            return len(described) == 2 and held < PARTITIONS and any(t and not a for a, t in described)

        eventually(revocation_pending, 60, "A's revocation pending", 0.5)
        assert not b.assignment  # B waits for the partitions A has not released

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
        batches_before = a.batches
        a.paused.clear()

        def owned_once() -> bool:
            described = probe(admin)
            if described is None or len(described) != 2:
                return False
            owned = [p for assigned, _ in described for p in assigned]
            settled = all(assigned == target for assigned, target in described)
            return settled and sorted(owned) == list(range(PARTITIONS)) and all(a for a, _ in described)

        eventually(owned_once, 90, "every partition owned by exactly one member", 0.5)
        second = NumberedProducer(cluster.bootstrap, TOPIC, 300, per_second=1000, first=300).start()
        second.join()
        assert first.errors == second.errors == []
        ends = end_offsets(cluster.bootstrap, TOPIC, PARTITIONS)
        assert sum(ends.values()) == 600
        eventually(
            lambda: committed_offsets(cluster.bootstrap, GROUP, TOPIC, PARTITIONS) == ends,
            90,
            "the group's committed offsets at the end of every partition",
            1.0,
        )
        assert a.batches > batches_before and b.batches > 0  # both members consumed after the failover
    finally:
        for m in members:
            m.stop()
    assert [m.error for m in members if m.error is not None] == []
    assert [m.name for m in members if m.rolled_back] == []
    committed = committed_offsets(cluster.bootstrap, GROUP, TOPIC, PARTITIONS)
    assert ledger.problems(TOPIC, committed, ends) == []
    assert ledger.values.keys() == {(TOPIC, b"record-%06d" % i) for i in range(600)}
    assert max(ledger.values.values()) == 1
