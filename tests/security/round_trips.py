"""One record written and read back by each client library, with whatever security settings a test
gives it: what the SASL tests over SASL_PLAINTEXT and over SASL_SSL share, and the users each
mechanism is tried with (`credentials`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import confluent_kafka

from tests.security.sasl_brokers import ALICE, ALICE_PASSWORD, SCRAM_PASSWORD, SCRAM_USER

OAUTH_USER = "carol"


def credentials(mechanism: str) -> tuple[str, str]:
    """The user (and password) a test logs in with for `mechanism`: PLAIN's alice, SCRAM's bob (whose
    credentials the tests store first), OAUTHBEARER's carol (any subject an unsecured token names)."""
    if mechanism == "PLAIN":
        return ALICE, ALICE_PASSWORD
    if mechanism == "OAUTHBEARER":
        return OAUTH_USER, ""
    return SCRAM_USER, SCRAM_PASSWORD


def confluent_round_trip(config: dict[str, object], topic: str, value: bytes) -> bytes | None:
    """`value` produced with confluent-kafka, then read back by a group consumer; what it read."""
    producer = confluent_kafka.Producer(config)
    producer.produce(topic, value)
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            polled = consumer.poll(1.0)
            if polled is not None and polled.error() is None:
                return polled.value()
        return None
    finally:
        consumer.close()


def kafka_python_round_trip(bootstrap: str, config: dict[str, Any], topic: str, value: bytes) -> bytes:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    producer.send(topic, value).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20000, **config
    )
    try:
        return next(iter(consumer)).value
    finally:
        consumer.close()


def aiokafka_round_trip(bootstrap: str, config: dict[str, Any], topic: str, value: bytes) -> bytes:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> bytes:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config
        )
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        return record.value

    return asyncio.run(run())
