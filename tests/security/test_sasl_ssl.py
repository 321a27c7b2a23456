"""SASL over TLS: a SASL_SSL listener (certificates made at test time, no client certificate asked
for) with every mechanism, through confluent-kafka, kafka-python and aiokafka; the principal is the
SASL user's; a wrong password and a request before authenticating are refused as on
SASL_PLAINTEXT."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security.round_trips import (
    aiokafka_round_trip,
    confluent_round_trip,
    credentials,
    kafka_python_round_trip,
)
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    MECHANISMS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    aiokafka_token_provider,
)
from tests.security.secured_broker import Broker, sasl_ssl_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with sasl_ssl_broker(tmp_path_factory.mktemp("sasl-ssl")) as made:
        admin = AdminClient(made.confluent("PLAIN", ADMIN, ADMIN_PASSWORD))
        for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            info = ScramCredentialInfo(mechanism, 4096)
            upsert = UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())
            admin.alter_user_scram_credentials([upsert])[SCRAM_USER].result()
        yield made


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    user, password = credentials(mechanism)
    topic = f"sasl-ssl-{uuid.uuid4().hex[:8]}"
    assert (
        confluent_round_trip(broker.confluent(mechanism, user, password), topic, b"over tls") == b"over tls"
    )
    assert f"authenticated with {mechanism} as User:{user}" in broker.process.output_path.read_text()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    config = broker.kafka_python(mechanism, *credentials(mechanism))
    topic = f"sasl-ssl-kp-{uuid.uuid4().hex[:8]}"
    assert kafka_python_round_trip(broker.bootstrap, config, topic, b"over tls") == b"over tls"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    user, password = credentials(mechanism)
    config = broker.kafka_python(mechanism, user, password)
    if mechanism == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = aiokafka_token_provider(user)
    topic = f"sasl-ssl-aio-{uuid.uuid4().hex[:8]}"
    assert aiokafka_round_trip(broker.bootstrap, config, topic, b"over tls") == b"over tls"


def test_wrong_password_over_sasl_ssl_is_refused_with_the_message(broker: Broker) -> None:
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer(
        {**broker.confluent("PLAIN", ALICE, "wrong"), "error_cb": errors.append}
    )
    producer.produce("never", b"x")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in errors[0].str()


def test_produce_before_authenticating_over_sasl_ssl_is_closed(broker: Broker) -> None:
    import socket
    import ssl

    from odradek.protocol.api_keys import ApiKey
    from odradek.protocol.messages.produce import ProduceRequest
    from tests.server.raw_client import request_frame

    context = ssl.create_default_context(cafile=str(broker.pki.ca.cert_path))
    with socket.create_connection(("127.0.0.1", broker.process.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(
                request_frame(ApiKey.PRODUCE, 9, ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]), 1)
            )
            assert tls.recv(1) == b""
    assert "unexpected PRODUCE request during SASL handshake" in broker.process.output_path.read_text()
