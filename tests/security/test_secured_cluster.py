"""The attack of the security issue against a secured cluster: three brokers on ZooKeeper whose only
listener is SASL_PLAINTEXT (SCRAM-SHA-512 between brokers, PLAIN for clients) with Kafka's ACL
authorizer and the brokers' principal User:admin as the only super user.

The forged StopReplica v3 (the real controller's id and epoch, broker epoch -1, the partition of an
RF=3 topic with leader epoch -2 and delete_partition true) is sent to every broker twice: from a
socket that never authenticated (closed unanswered by the SASL gate) and from a client that logged in
as alice, who may write the topic but holds no CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED, and a
WARNING naming the peer and User:alice). Nothing is deleted (every acknowledged record is read back),
and the controller is unharmed (a topic created afterwards is served). The ACLs are made with
`odradek acls --command-config`, the way an operator of a secured cluster makes them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.controller.channel import ControllerIdentity, stop_replica_request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cli.tooling import ok
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    CLUSTER_LISTENER,
    PLAIN_MODULE,
    confluent_config,
    jaas,
    plain_login,
    sasl_cluster,
)
from tests.server.raw_client import RawClient

RECORDS = [b"record-%d" % i for i in range(100)]


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[LocalCluster]:
    with sasl_cluster(
        zookeeper.connect_string,
        tmp_path / "cluster",
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN}",
        },
    ) as made:
        yield made


def admin_command_config(directory: Path) -> str:
    path = directory / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={jaas(PLAIN_MODULE, username=ADMIN, password=ADMIN_PASSWORD)}\n"
    )
    return str(path)


def forged_stop_replica(cluster: LocalCluster, topic: str) -> object:
    """The attack's request, as the real controller would sign it: its id and its epoch."""
    controller_id = cluster.controller()
    epoch = cluster.controller_epoch()
    sender = ControllerIdentity(controller_id, epoch, -1)
    return stop_replica_request(sender, {topic: {0: -2}}, delete=True)


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    config = confluent_config(bootstrap, "PLAIN", ADMIN, ADMIN_PASSWORD)
    consumer = confluent_kafka.Consumer({**config, "group.id": f"check-{uuid.uuid4().hex[:6]}"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append(message.value())
    finally:
        consumer.close()
    return received


def test_forged_stop_replica_is_refused_by_a_secured_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = f"precious-{uuid.uuid4().hex[:8]}"
    command_config = admin_command_config(tmp_path)
    ok("topics", "--bootstrap-server", cluster.bootstrap, "--command-config", command_config,
       "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "3",
       "--config", "min.insync.replicas=2")  # fmt: skip
    ok("acls", "--bootstrap-server", cluster.bootstrap, "--command-config", command_config,
       "--add", "--allow-principal", f"User:{ALICE}", "--producer", "--topic", topic)  # fmt: skip
    eventually(lambda: len((cluster.state(topic, 0) or {}).get("isr", [])) == 3, 30, "every replica in sync")
    alice = confluent_config(cluster.bootstrap, "PLAIN", ALICE, ALICE_PASSWORD)
    producer = confluent_kafka.Producer({**alice, "acks": "all"})
    for record in RECORDS:
        producer.produce(topic, record)
    assert producer.flush(30) == 0

    request = forged_stop_replica(cluster, topic)
    for process in cluster.brokers.values():
        with RawClient(process.bootstrap) as anonymous:
            with pytest.raises((ConnectionError, OSError)):  # the SASL gate closes it unanswered
                anonymous.call(ApiKey.STOP_REPLICA, 3, request)
        with RawClient(process.bootstrap) as logged_in:
            assert plain_login(logged_in, ALICE, ALICE_PASSWORD).error_code == ErrorCode.NONE
            response = logged_in.call(ApiKey.STOP_REPLICA, 3, request)
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        log = process.output_path.read_text(errors="replace")
        refusal = f"Refused inter-broker request STOP_REPLICA from 127.0.0.1 on listener {CLUSTER_LISTENER}"
        assert f"WARNING {refusal}: principal User:{ALICE} lacks CLUSTER_ACTION" in log

    assert read_all(cluster.bootstrap, topic, len(RECORDS)) == RECORDS
    assert len(cluster.state(topic, 0)["isr"]) == 3
    admin = AdminClient(confluent_config(cluster.bootstrap, "PLAIN", ADMIN, ADMIN_PASSWORD))
    after = f"after-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(after, 1, 3)])[after].result(30)  # the controller still rules
    eventually(lambda: len((cluster.state(after, 0) or {}).get("isr", [])) == 3, 30, "the new topic served")
