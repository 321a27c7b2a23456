"""SASL over TLS: a SASL_SSL listener (certificates made at test time, no client certificate asked
for) with every mechanism, through confluent-kafka, kafka-python and aiokafka; the principal is the
SASL user's; a wrong password and a request before authenticating are refused as on
SASL_PLAINTEXT."""

from __future__ import annotations

import asyncio
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

from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
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


def _credentials(mechanism: str) -> tuple[str, str]:
    if mechanism == "PLAIN":
        return ALICE, ALICE_PASSWORD
    if mechanism == "OAUTHBEARER":
        return "carol", ""
    return SCRAM_USER, SCRAM_PASSWORD


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    config = broker.confluent(mechanism, *_credentials(mechanism))
    topic = f"sasl-ssl-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(config)
    producer.produce(topic, b"over tls")
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(1.0)
            if polled is not None and polled.error() is None:
                message = polled
        assert message is not None and message.value() == b"over tls"
    finally:
        consumer.close()
    user = _credentials(mechanism)[0]
    assert f"authenticated with {mechanism} as User:{user}" in broker.process.output_path.read_text()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    config = broker.kafka_python(mechanism, *_credentials(mechanism))
    topic = f"sasl-ssl-kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **config)
    producer.send(topic, b"over tls").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **config,
    )
    try:
        assert next(iter(consumer)).value == b"over tls"
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_over_sasl_ssl(broker: Broker, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    user, password = _credentials(mechanism)
    config = broker.kafka_python(mechanism, user, password)
    if mechanism == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = aiokafka_token_provider(user)
    topic = f"sasl-ssl-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> bytes:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"over tls")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **config
        )
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        return record.value

    assert asyncio.run(run()) == b"over tls"


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
