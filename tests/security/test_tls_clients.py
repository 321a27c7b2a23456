"""TLS listeners against real clients (confluent-kafka, kafka-python, aiokafka): produce and consume
over SSL, mutual TLS with the principal taken from the client certificate through
ssl.principal.mapping.rules, a per-listener ssl.client.auth override, and the refusals: an expired
or untrusted client certificate, none where one is required, a broker certificate the client does
not trust, plaintext bytes on an SSL listener, and a client that completes TLS and then sends
garbage. One broker per module: a PLAINTEXT listener, an SSL listener where a client certificate is
requested, and an MTLS listener (SSL) where listener.name.mtls.ssl.client.auth=required."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.certs import CertificateAuthority, Issued
from odradek.testing.cluster import eventually
from tests.security.tls_broker import DebugBrokerProcess, Pki, client_context, confluent_config, make_pki

RECORD = b"r" * 1024
MAPPING_RULES = "RULE:^O=Acme,OU=Eng,CN=([^,]*)$/$1/L,DEFAULT"


@dataclass
class TlsBroker:
    process: BrokerProcess
    pki: Pki
    ssl_bootstrap: str
    mtls_bootstrap: str
    certs: Path

    def log(self) -> str:
        return self.process.output_path.read_text(errors="replace")

    def wait_for_log(self, text: str) -> None:
        eventually(lambda: text in self.log(), 15, f"the broker logs {text!r}")


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    root = tmp_path_factory.mktemp("tls-broker")
    pki = make_pki(root / "certs")
    process = DebugBrokerProcess(root / "data", output_path=root / "broker.out")
    ssl_port, mtls_port = free_port(), free_port()
    process.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SSL://127.0.0.1:{ssl_port},"
        f"MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        **pki.ssl_settings(client_auth="requested"),
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING_RULES,
    }
    with process:
        yield TlsBroker(process, pki, f"127.0.0.1:{ssl_port}", f"127.0.0.1:{mtls_port}", root / "certs")


def _produce_and_consume_confluent(config: dict[str, object], topic: str, count: int) -> int:
    producer = Producer({**config, "linger.ms": 5})
    for _ in range(count):
        producer.produce(topic, RECORD)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received, deadline = 0, time.monotonic() + 30
    try:
        while received < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                assert message.value() == RECORD
                received += 1
    finally:
        consumer.close()
    return received


def test_confluent_kafka_over_mutual_tls_has_the_principal_of_its_certificate(tls_broker, unique_topic):
    alice = tls_broker.pki.ca.issue("Alice", organizational_unit="Eng", organization="Acme")
    config = confluent_config(tls_broker.mtls_bootstrap, tls_broker.pki.ca.cert_path, alice)
    # 3 MiB through fetch responses of up to 1 MiB: file slices read in several TLS batches
    assert _produce_and_consume_confluent(config, unique_topic, 3000) == 3000
    tls_broker.wait_for_log("principal User:alice")  # RULE: O=Acme,OU=Eng,CN=Alice -> alice (L)


def test_kafka_python_over_ssl_without_a_client_certificate(tls_broker, unique_topic):
    context = client_context(tls_broker.pki.ca.cert_path)
    common = {
        "bootstrap_servers": tls_broker.ssl_bootstrap,
        "security_protocol": "SSL",
        "ssl_context": context,
    }
    producer = KafkaProducer(**common)
    for _ in range(200):
        producer.send(unique_topic, RECORD)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(unique_topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common)
    values = [record.value for record in consumer]
    consumer.close()
    assert values == [RECORD] * 200
    tls_broker.wait_for_log("principal User:ANONYMOUS")  # requested, none sent


def test_aiokafka_over_ssl_with_a_certificate_no_rule_maps(tls_broker, unique_topic):
    bob = tls_broker.pki.ca.issue("bob")

    async def run() -> list[bytes]:
        context = client_context(tls_broker.pki.ca.cert_path, bob)
        common = {
            "bootstrap_servers": tls_broker.ssl_bootstrap,
            "security_protocol": "SSL",
            "ssl_context": context,
        }
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for _ in range(200):
                await producer.send(unique_topic, RECORD)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(unique_topic, auto_offset_reset="earliest", **common)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(values) < 200:
                    batch = await consumer.getmany(timeout_ms=1000)
                    values += [record.value for records in batch.values() for record in records]
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [RECORD] * 200
    tls_broker.wait_for_log("principal User:CN=bob")  # DEFAULT: the distinguished name


def _refused(bootstrap: str, ca: Path, client: Issued | None) -> None:
    admin = AdminClient({**confluent_config(bootstrap, ca, client), "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=4)


@pytest.mark.parametrize("which", ["expired", "untrusted", "missing"])
def test_a_bad_client_certificate_is_refused_where_one_is_required(tls_broker, which):
    if which == "expired":
        client, reason = tls_broker.pki.ca.issue("old", expired=True), "certificate has expired"
    elif which == "untrusted":
        other = CertificateAuthority(tls_broker.certs / "other", name="other CA")
        client, reason = other.issue("mallory"), "self-signed certificate in certificate chain"
    else:
        client, reason = None, "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    _refused(tls_broker.mtls_bootstrap, tls_broker.pki.ca.cert_path, client)
    tls_broker.wait_for_log(f"(SSL handshake failed: {reason})")
    # the broker serves a good client on the same listener afterwards
    good = tls_broker.pki.ca.issue("carol")
    admin = AdminClient(confluent_config(tls_broker.mtls_bootstrap, tls_broker.pki.ca.cert_path, good))
    assert admin.list_topics(timeout=10).brokers


def test_a_client_that_does_not_trust_the_broker_certificate_gets_nowhere(tls_broker):
    other = CertificateAuthority(tls_broker.certs / "stranger", name="stranger CA")
    _refused(tls_broker.ssl_bootstrap, other.cert_path, None)
    tls_broker.wait_for_log("(SSL handshake failed: TLSV1_ALERT_UNKNOWN_CA)")  # the client's alert


def _wrap(bootstrap: str, ca: Path) -> ssl.SSLSocket:
    host, port = bootstrap.split(":")
    raw = socket.create_connection((host, int(port)), timeout=10)
    return client_context(ca).wrap_socket(raw, server_hostname=host)


def _closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


def test_a_client_that_completes_tls_then_sends_garbage_is_closed(tls_broker):
    with _wrap(tls_broker.ssl_bootstrap, tls_broker.pki.ca.cert_path) as sock:
        sock.sendall(struct.pack(">i", -7) + b"\x00garbage\xff" * 10)
        assert _closed_by_broker(sock)
    tls_broker.wait_for_log("request size -7 is outside")
    with _wrap(tls_broker.ssl_bootstrap, tls_broker.pki.ca.cert_path) as sock:
        sock.sendall(struct.pack(">i", 12) + b"\xff\xfe" + b"\x00" * 10)  # no API has key -2
        assert _closed_by_broker(sock)
    admin = AdminClient(confluent_config(tls_broker.ssl_bootstrap, tls_broker.pki.ca.cert_path))
    assert admin.list_topics(timeout=10).brokers


def test_plaintext_kafka_on_an_ssl_listener_is_refused(tls_broker):
    host, port = tls_broker.ssl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhi", 10, 18, 0, 1) + b"\x00\x00")  # ApiVersions v0, in the clear
        assert _closed_by_broker(sock)
    tls_broker.wait_for_log("SSL handshake failed: WRONG_VERSION_NUMBER")
