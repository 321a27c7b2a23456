"""A 3-broker cluster on ZooKeeper whose only listener is SASL_PLAINTEXT: the brokers authenticate to
each other with SCRAM-SHA-512 (the inter-broker credential stored in `/config/users/<user>` before
they start, as `kafka-configs.sh --zookeeper` would) and replicate; clients authenticate with
PLAIN; a SCRAM credential altered through one broker authenticates on every broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.security.sasl import mechanisms
from odradek.security.sasl.scram import ScramMechanism as Scram
from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    authenticate,
    confluent_config,
    handshake,
    sasl_cluster,
)
from tests.server.raw_client import RawClient

RECORDS = 100
REAUTH_MS = 4000  # every session, the brokers' own included, ends this soon after authenticating


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[LocalCluster]:
    with sasl_cluster(
        zookeeper.connect_string, tmp_path / "cluster", **{"connections.max.reauth.ms": REAUTH_MS}
    ) as made:
        yield made


def test_brokers_authenticate_to_each_other_and_replicate(cluster: LocalCluster) -> None:
    config = confluent_config(cluster.bootstrap, "PLAIN", ALICE, ALICE_PASSWORD)
    admin = AdminClient(config)
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    eventually(lambda: len((cluster.state(topic, 0) or {}).get("isr", [])) == 3, 30, "every replica in sync")
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append(message.value())
    finally:
        consumer.close()
    assert received == [str(i).encode() for i in range(RECORDS)]
    time.sleep(REAUTH_MS / 1000 * 1.5)  # every session of the first records has ended
    producer.produce(topic, b"after the sessions ended")
    assert producer.flush(30) == 0  # acks=all with min.insync.replicas=2: a follower still fetches
    assert len(cluster.state(topic, 0)["isr"]) == 3  # the followers fetched over SASL throughout
    for process in cluster.brokers.values():
        log = process.output_path.read_text(errors="replace")
        assert "Failed authentication" not in log
        assert "cannot authenticate to broker" not in log
        assert "SASL session has expired" not in log  # brokers renew their connections in time


def test_scram_credential_altered_through_one_broker_authenticates_on_every_broker(
    cluster: LocalCluster,
) -> None:
    first = next(iter(cluster.brokers.values()))
    admin = AdminClient(confluent_config(first.bootstrap, "PLAIN", ADMIN, ADMIN_PASSWORD))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("frank", info, b"frank-pw")])[
        "frank"
    ].result()
    stored = cluster.read("/config/users/frank")["config"]["SCRAM-SHA-256"]
    assert stored.startswith("salt=") and "stored_key=" in stored and stored.endswith("iterations=4096")

    def authenticates(process: object) -> bool:
        client_side = mechanisms.ScramClient(Scram.SCRAM_SHA_256, "frank", "frank-pw")
        with RawClient(process.bootstrap) as client:  # type: ignore[attr-defined]
            assert handshake(client, "SCRAM-SHA-256").error_code == 0
            first_response = authenticate(client, client_side.first())
            if first_response.error_code != 0:
                return False
            return (
                authenticate(client, client_side.evaluate(first_response.auth_bytes) or b"").error_code == 0
            )

    for process in cluster.brokers.values():
        eventually(
            lambda process=process: authenticates(process), 15, f"frank authenticates on {process.bootstrap}"
        )
