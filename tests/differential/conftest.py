"""Fixtures of the differential protocol suite (issue 34): one pair of brokers for the whole session,
Apache Kafka 3.9 in ZooKeeper mode (on a ZooKeeper of its own) and a single odradek broker, set up
alike so that their answers to the same bytes can be compared.

Both brokers are broker id 1, listen on PLAINTEXT and on SASL_PLAINTEXT (PLAIN, users admin and
alice), run Kafka's ACL authorizer with User:ANONYMOUS (every PLAINTEXT connection) and User:admin as
super users, so the ACL APIs answer and alice, who holds no ACL, is denied; and they share the small
test settings (5 partitions for __consumer_offsets and __transaction_state, no initial rebalance
delay). Both internal topics are created before the first case (a FindCoordinator retried on each),
so no case sees COORDINATOR_NOT_AVAILABLE while they load.

The whole package is skipped in one line where Java or Kafka 3.9's jars are missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.zookeeper import ZooKeeperServer, zookeeper_classpath
from tests.differential.engine import ADMIN, ADMIN_PASSWORD, ALICE, ALICE_PASSWORD, Pair, Side, warm_up

VERSION = kafka_reference.ZOOKEEPER_VERSION
BROKER_ID = 1
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _skip_reason() -> str | None:
    reason = kafka_reference.missing(VERSION)
    if reason is None and zookeeper_classpath() is None:
        reason = "the differential suite needs a ZooKeeper server for Kafka 3.9 (Debian's zookeeper package)"
    return reason


def _shared_settings(plain_port: int, sasl_port: int) -> dict[str, object]:
    jaas = (
        f'{PLAIN_MODULE} required username="{ADMIN}" password="{ADMIN_PASSWORD}" '
        f'user_{ADMIN}="{ADMIN_PASSWORD}" user_{ALICE}="{ALICE_PASSWORD}";'
    )
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:ANONYMOUS;User:{ADMIN}",
        "offsets.topic.num.partitions": 5,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.num.partitions": 5,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "num.partitions": 1,  # KafkaBroker writes it to server.properties: a static config on both
    }


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    root: Path = tmp_path_factory.mktemp("differential")
    kafka_ports = (free_port(), free_port())
    odradek_ports = (free_port(), free_port())
    with ZooKeeperServer(root / "zk") as zookeeper:
        kafka = kafka_reference.KafkaBroker(
            root / "kafka",
            VERSION,
            broker_id=BROKER_ID,
            port=kafka_ports[0],
            zookeeper_connect=zookeeper.connect_string + "/differential",
            overrides=_shared_settings(*kafka_ports),
        )
        odradek = BrokerProcess(
            root / "odradek" / "data",
            port=odradek_ports[0],
            broker_id=BROKER_ID,
            output_path=root / "odradek.out",
            overrides=_shared_settings(*odradek_ports),
        )
        kafka.spawn()  # the JVM starts while odradek does
        try:
            odradek.start()
            kafka.wait_ready(120.0)
            made = Pair(
                Side("kafka", f"127.0.0.1:{kafka_ports[0]}", f"127.0.0.1:{kafka_ports[1]}"),
                Side("odradek", odradek.bootstrap, f"127.0.0.1:{odradek_ports[1]}"),
            )
            warm_up(made)
            yield made
        finally:
            odradek.stop()
            kafka.stop()
