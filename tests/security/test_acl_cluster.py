"""ACLs on a real three-broker cluster on a real ZooKeeper.

- A secured cluster as Kafka runs one: an authorizer on, nothing allowed without an ACL, the
  brokers' own principal in super.users (until SASL / TLS it is User:ANONYMOUS on PLAINTEXT, as every
  client's): the inter-broker path (controller requests, replica fetches, AlterPartition, markers)
  works, an RF=3 topic replicates, and an ACL created through one broker is in Kafka's znodes and
  reaches every broker through the change notifications.
- An open cluster (allow.everyone.if.no.acl.found) where an ACL added through broker 1 alone is
  enforced at once by the leaders on brokers 2 and 3; and, with CLUSTER_ACTION allowed only from
  the brokers' host (127.0.0.1), a forged StopReplica from another address (127.0.0.2) is refused
  with CLUSTER_AUTHORIZATION_FAILED and a WARNING naming the peer and the principal, deleting
  nothing, while replication goes on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from odradek.controller.channel import ControllerIdentity, stop_replica_request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import DescribeAclsRequest
from odradek.testing.cluster import LocalCluster, eventually
from tests.cli.tooling import ok
from tests.cluster.test_replication import TIMEOUT_S, create_replicated_topic, produce_all, producer
from tests.compat.helpers import consume
from tests.server.raw_client import RawClient

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ANONYMOUS = "User:ANONYMOUS"
FORGER_HOST = "127.0.0.2"


class RawClientFrom(RawClient):
    """A raw client whose connection comes from `source` (another loopback address)."""

    def __init__(self, bootstrap: str, source: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10.0, source_address=(source, 0))
        self._next_correlation_id = 1


def acls(bootstrap: str, *args: str) -> str:
    return ok("acls", "--bootstrap-server", bootstrap, *args)


def described_on(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    """The (principal, operation) of the topic's literal ACLs as this one broker answers DescribeAcls."""
    request = DescribeAclsRequest(
        resource_type_filter=ResourceType.TOPIC.value,
        resource_name_filter=topic,
        pattern_type_filter=ResourcePatternType.LITERAL.value,
        operation=AclOperation.ANY.value,
        permission_type=AclPermissionType.ANY.value,
    )
    with RawClient(bootstrap) as client:
        response = client.call(ApiKey.DESCRIBE_ACLS, 3, request)
    assert response.error_code == ErrorCode.NONE
    return sorted((a.principal, a.operation) for r in response.resources for a in r.acls)


def produce_errors(cluster: LocalCluster, topic: str, partition: int) -> list[int]:
    client = producer(cluster)
    errors: list[int] = []
    client.produce(
        topic, b"v", partition=partition, on_delivery=lambda err, _m: errors.append(err.code() if err else 0)
    )
    assert client.flush(TIMEOUT_S) == 0
    return errors


def test_a_secured_cluster_replicates_and_every_broker_hears_of_an_acl(
    start_cluster: Callable[..., LocalCluster],
):
    cluster = start_cluster(**{"authorizer.class.name": AUTHORIZER, "super.users": ANONYMOUS})
    create_replicated_topic(cluster, "secured")
    assert produce_all(cluster, "secured", [b"a", b"b", b"c"]) == []
    assert len(consume(cluster.bootstrap, "secured", 3)) == 3
    first = cluster.brokers[1].bootstrap
    acls(first, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "secured")
    for process in cluster.brokers.values():
        eventually(
            lambda p=process: (
                described_on(p.bootstrap, "secured") == [("User:alice", AclOperation.READ.value)]
            ),
            10,
            f"the ACL on broker at {process.bootstrap}",
        )
    stored = cluster.read("/kafka-acl/Topic/secured")
    assert stored == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert cluster.zk is not None and cluster.zk.get_children("/kafka-acl-changes")
    acls(first, "--remove", "--force", "--topic", "secured")
    for process in cluster.brokers.values():
        eventually(lambda p=process: described_on(p.bootstrap, "secured") == [], 10, "the removal everywhere")


def test_an_acl_added_through_one_broker_is_enforced_by_all_and_forged_controller_requests_are_refused(
    start_cluster: Callable[..., LocalCluster],
):
    cluster = start_cluster(
        **{
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true",
            "replica.fetch.backoff.ms": 200,
        }
    )
    create_replicated_topic(cluster, "guarded", partitions=3)
    create_replicated_topic(cluster, "kept")
    assert produce_all(cluster, "kept", [b"k1", b"k2"]) == []
    leaders = {(cluster.state("guarded", p) or {}).get("leader") for p in range(3)}
    first = cluster.brokers[1].bootstrap
    # the brokers (127.0.0.1) keep every cluster operation; the topic is closed to writes
    acls(
        first,
        "--add",
        "--allow-principal",
        ANONYMOUS,
        "--allow-host",
        "127.0.0.1",
        "--operation",
        "All",
        "--cluster",
    )
    acls(first, "--add", "--deny-principal", ANONYMOUS, "--operation", "Write", "--topic", "guarded")
    for partition in range(3):
        eventually(
            lambda p=partition: (
                produce_errors(cluster, "guarded", p) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
            ),
            10,
            f"the DENY on the leader of guarded-{partition}",
        )
    assert len(leaders) > 1  # the partitions are led by different brokers
    assert produce_all(cluster, "kept", [b"k3"]) == []  # replication (CLUSTER_ACTION) goes on
    for broker_id, process in cluster.brokers.items():
        sender = ControllerIdentity(cluster.controller() or 1, cluster.controller_epoch(), -1)
        request = stop_replica_request(sender, {"kept": {0: -2}}, delete=True)
        with RawClientFrom(process.bootstrap, FORGER_HOST) as client:
            response = client.call(ApiKey.STOP_REPLICA, 3, request)
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, broker_id
        log = process.output_path.read_text(errors="replace")
        assert f"STOP_REPLICA from {FORGER_HOST}" in log and ANONYMOUS in log
    assert len(consume(cluster.bootstrap, "kept", 3)) == 3
