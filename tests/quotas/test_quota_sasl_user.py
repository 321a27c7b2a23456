"""A user quota for SASL-authenticated users, with real confluent-kafka producers on one broker: the
quota group's user is the connection's authenticated principal. With a client-id default of 4 MiB/s
and a quota of 1 MiB/s for user alice, alice's producer (client id `app`) is held to 1 MiB/s (her
user quota overrides the client-id default: the seeds' order puts /config/users/<user> above
/config/clients/<default>), while bob's producer with the same client id is held to the default's
4 MiB/s; nothing acknowledged is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import BrokerProcess, free_port
from tests.quotas.helpers import (
    MEASURED_S,
    QUOTA_WINDOW,
    WARM_UP_S,
    Acks,
    MiB,
    configs,
    produce_confluent,
    run_together,
    within,
)
from tests.security.sasl_brokers import ALICE, ALICE_PASSWORD, PLAIN_MODULE, confluent_config, jaas

BOB, BOB_PASSWORD = "bob", "bob-secret"


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    port, sasl_port = free_port(), free_port()
    overrides = {
        **QUOTA_WINDOW,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(
            PLAIN_MODULE, user_alice=ALICE_PASSWORD, user_bob=BOB_PASSWORD
        ),
    }
    with BrokerProcess(
        tmp_path / "data", port=port, output_path=tmp_path / "broker.out", overrides=overrides
    ) as process:
        process.sasl_bootstrap = f"127.0.0.1:{sasl_port}"  # type: ignore[attr-defined]
        yield process


def test_a_sasl_users_quota_overrides_the_client_id_default(broker: BrokerProcess) -> None:
    bootstrap, sasl_bootstrap = broker.bootstrap, broker.sasl_bootstrap  # type: ignore[attr-defined]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in ("alice-t", "bob-t")]).values():
        future.result(30)
    configs(bootstrap, "--alter", "--add-config", f"producer_byte_rate={4 * MiB}",
            "--entity-type", "clients", "--entity-default")  # fmt: skip
    configs(bootstrap, "--alter", "--add-config", f"producer_byte_rate={MiB}",
            "--entity-type", "users", "--entity-name", ALICE)  # fmt: skip
    security = {
        "alice-t": confluent_config(sasl_bootstrap, "PLAIN", ALICE, ALICE_PASSWORD),
        "bob-t": confluent_config(sasl_bootstrap, "PLAIN", BOB, BOB_PASSWORD),
    }
    acks = {topic: Acks() for topic in security}
    started = time.monotonic()
    until = started + WARM_UP_S + MEASURED_S
    run_together(
        *(
            lambda t=topic: produce_confluent(sasl_bootstrap, t, "app", until, acks[t], security[t])
            for topic in security
        )
    )
    measured = {topic: a.rate(started + WARM_UP_S, until) for topic, a in acks.items()}
    assert within(measured["alice-t"], MiB), measured
    assert within(measured["bob-t"], 4 * MiB), measured
    throttled = [
        line for line in broker.output_path.read_text().splitlines() if "kafka.request.logger" in line
    ]
    assert any("principal:User:alice" in line for line in throttled)
    assert any("principal:User:bob" in line for line in throttled)
    for acked in acks.values():
        assert acked.errors == []
