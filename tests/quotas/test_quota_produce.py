"""Producer quotas on one broker process, with real clients: confluent-kafka producers held to
1 MiB/s and 4 MiB/s by their client-id quotas while a third without one runs free (it is never
throttled), kafka-python (which does not honour throttle_time_ms itself) held by the broker's mute,
nothing acknowledged lost, Kafka's request log line for the throttled requests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from odradek.testing.broker import BrokerProcess
from tests.quotas.helpers import (
    MEASURED_S,
    PAYLOAD,
    QUOTA_WINDOW,
    WARM_UP_S,
    Acks,
    MiB,
    configs,
    produce_confluent,
    run_together,
    within,
)


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path / "data", output_path=tmp_path / "broker.out", broker_id=1, overrides=QUOTA_WINDOW
    ) as process:
        yield process


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{topic}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def client_quota(bootstrap: str, client_id: str, rate: int) -> None:
    out = configs(
        bootstrap, "--alter", "--add-config", f"producer_byte_rate={rate}",
        "--entity-type", "clients", "--entity-name", client_id,
    )  # fmt: skip
    assert out == f"Completed updating config for client {client_id}.\n"


def test_two_confluent_producers_are_held_to_their_quotas_while_a_third_runs_free(broker):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "slow", "fast", "free")
    client_quota(bootstrap, "slow", MiB)
    client_quota(bootstrap, "fast", 4 * MiB)
    acks = {name: Acks() for name in ("slow", "fast", "free")}
    started = time.monotonic()
    until = started + WARM_UP_S + MEASURED_S
    run_together(*(lambda n=name: produce_confluent(bootstrap, n, n, until, acks[n]) for name in acks))

    measured = {n: a.rate(started + WARM_UP_S, until) for n, a in acks.items()}
    assert within(measured["slow"], MiB), measured
    assert within(measured["fast"], 4 * MiB), measured
    throttled = [
        line for line in broker.output_path.read_text().splitlines() if "kafka.request.logger" in line
    ]
    assert any("clientId=slow" in line and "apiKey=PRODUCE" in line for line in throttled)
    assert any("clientId=fast" in line for line in throttled)
    assert not any("clientId=free" in line for line in throttled)  # no quota: never throttled
    for name, acked in acks.items():  # nothing acknowledged lost, nothing failed
        assert acked.errors == []
        assert high_watermark(bootstrap, name) == acked.count


def test_kafka_python_is_held_by_the_brokers_mute(broker):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "kp")
    client_quota(bootstrap, "kp", MiB)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, client_id="kp", linger_ms=5, batch_size=200_000, acks="all"
    )
    acks = Acks()
    started = time.monotonic()
    until = started + WARM_UP_S + MEASURED_S
    futures = []
    while time.monotonic() < until:
        future = producer.send("kp", PAYLOAD)
        future.add_callback(lambda _metadata: acks.add(len(PAYLOAD)))
        future.add_errback(lambda exc: acks.errors.append(repr(exc)))
        futures.append(future)
        if len(futures) > 2000:
            futures.pop(0).get(timeout=60)
    producer.flush(60)
    producer.close()
    rate = acks.rate(started + WARM_UP_S, until)
    assert within(rate, MiB), rate / MiB
    assert acks.errors == []
    assert high_watermark(bootstrap, "kp") == acks.count
