"""The control plane cannot be hijacked from an unauthenticated socket, on a real three-broker cluster
on a real ZooKeeper.

The attack: a plain socket that never authenticated sends each broker StopReplica v3 as controller
0 (no such broker) with controller epochs above the real one, broker epoch -1, and the partition of
an RF=3 topic with leader epoch -2 (the delete sentinel) and delete_partition true. Each broker must
check the newer epoch against ZooKeeper (server/control_plane.py), refuse it with
STALE_CONTROLLER_EPOCH, keep its replica byte for byte, log a WARNING naming the peer and the
principal, and keep its known controller epoch, so the real controller is still obeyed afterwards
(a new topic is created and served) and a controller failover still moves leadership.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.controller.channel import ControllerIdentity, stop_replica_request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import (
    TIMEOUT_S,
    create_replicated_topic,
    produce_all,
    producer,
    segment_bytes,
)
from tests.compat.helpers import consume
from tests.server.raw_client import RawClient

TOPIC = "precious"
RECORDS = [b"record-%d" % i for i in range(100)]
FORGED_CONTROLLER = 0  # no broker of the cluster (ids 1..3)
FORGED_ATTEMPTS = 4
EPOCH_DURING_DELETE = -2


@pytest.fixture
def cluster(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster(**{"replica.fetch.backoff.ms": 200})


def forge_stop_replica(bootstrap: str, controller_epoch: int) -> tuple[int, list[int]]:
    """The attack's StopReplica v3 from a fresh socket: the top error and the partition errors."""
    sender = ControllerIdentity(FORGED_CONTROLLER, controller_epoch, -1)
    request = stop_replica_request(sender, {TOPIC: {0: EPOCH_DURING_DELETE}}, delete=True)
    with RawClient(bootstrap) as client:
        response = client.call(ApiKey.STOP_REPLICA, 3, request)
    return response.error_code, [e.error_code for e in response.partition_errors]


def produce_one(cluster: LocalCluster, topic: str, partition: int, value: bytes) -> list[object]:
    """Produce `value` to `partition` with acks=all; the delivery errors."""
    client = producer(cluster)
    errors: list[object] = []
    client.produce(topic, value=value, partition=partition, on_delivery=lambda err, _: errors.append(err))
    assert client.flush(TIMEOUT_S) == 0
    return [err for err in errors if err is not None]


def replica_bytes(cluster: LocalCluster) -> dict[int, bytes]:
    return {broker_id: segment_bytes(cluster, broker_id, TOPIC) for broker_id in cluster.brokers}


def identical_replicas(cluster: LocalCluster) -> dict[int, bytes] | None:
    copies = replica_bytes(cluster)
    return copies if len(set(copies.values())) == 1 else None


def output(cluster: LocalCluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].output_path.read_text(errors="replace")


def refusals_of_the_real_controller(cluster: LocalCluster) -> list[str]:
    """STALE_CONTROLLER_EPOCH lines of the running brokers that are not about the forged requests."""
    return [
        line
        for broker_id, process in cluster.brokers.items()
        if process.is_running()
        for line in output(cluster, broker_id).splitlines()
        if "STALE_CONTROLLER_EPOCH" in line and f"claiming controller {FORGED_CONTROLLER} " not in line
    ]


def test_forged_stop_replica_with_a_newer_epoch_deletes_nothing_and_fences_no_one(cluster: LocalCluster):
    create_replicated_topic(cluster, TOPIC)
    assert produce_all(cluster, TOPIC, RECORDS) == []
    eventually(lambda: len((cluster.state(TOPIC, 0) or {}).get("isr", ())) == 3, 15, "ISR of 3")
    replicas = eventually(lambda: identical_replicas(cluster), 15, "three identical replicas")
    epoch = cluster.controller_epoch()

    for process in cluster.brokers.values():
        for forged_epoch in range(epoch + 1, epoch + 1 + FORGED_ATTEMPTS):
            stale = ErrorCode.STALE_CONTROLLER_EPOCH
            assert forge_stop_replica(process.bootstrap, forged_epoch) == (stale, [stale])

    for broker_id in cluster.brokers:
        assert segment_bytes(cluster, broker_id, TOPIC) == replicas[broker_id], f"broker {broker_id}"
        warnings = [line for line in output(cluster, broker_id).splitlines() if "Refused StopReplica" in line]
        assert len(warnings) == FORGED_ATTEMPTS, output(cluster, broker_id)[-4000:]
        assert all("WARNING" in line for line in warnings)
        assert all("from 127.0.0.1 on listener PLAINTEXT as User:ANONYMOUS" in line for line in warnings)
    assert [m.value() for m in consume(cluster.bootstrap, TOPIC, len(RECORDS))] == RECORDS

    # The real controller is still obeyed: a new topic gets leaders and takes records.
    create_replicated_topic(cluster, "after", partitions=3)
    for partition in range(3):
        assert produce_one(cluster, "after", partition, b"after-%d" % partition) == []
    assert refusals_of_the_real_controller(cluster) == []

    # A failover still works: the new controller's first requests (a newer epoch, in ZooKeeper) are taken.
    old = cluster.controller()
    assert old is not None and cluster.controller_epoch() == epoch
    cluster.brokers[old].kill()
    new = eventually(lambda: (c := cluster.controller()) not in (None, old) and c, 30, "a new controller")
    assert cluster.controller_epoch() > epoch
    for partition in range(3):
        eventually(
            lambda p=partition: (cluster.state("after", p) or {}).get("leader") not in (None, -1, old),
            30,
            f"after-{partition} led by a live broker",
        )
        assert produce_one(cluster, "after", partition, b"failover-%d" % partition) == []
    assert refusals_of_the_real_controller(cluster) == [], f"new controller {new}"
    assert [m.value() for m in consume(cluster.bootstrap, TOPIC, len(RECORDS))] == RECORDS
