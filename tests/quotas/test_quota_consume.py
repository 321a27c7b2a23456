"""Consumer quotas on one broker process: a confluent-kafka consumer held to consumer_byte_rate (its
fetches capped at the quota's window and answered empty while it is over), and a Spark batch read of
the odradek source whose fetches are throttled and which still reads every record."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import BrokerProcess
from tests.quotas.helpers import MEASURED_S, PAYLOAD, QUOTA_WINDOW, WARM_UP_S, Acks, MiB, configs, within
from tests.spark.conftest import spark  # noqa: F401 - the session fixture

RECORDS = 4000  # 40 MB: more than the consumer may read in the run


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("quota-consume")
    with BrokerProcess(root / "data", output_path=root / "broker.out", overrides=QUOTA_WINDOW) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic("backlog", 1, 1)])["backlog"].result(30)
        producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 5})
        for _ in range(RECORDS):
            producer.produce("backlog", PAYLOAD)
            producer.poll(0)
        assert producer.flush(60) == 0
        yield process


def consumer_quota(bootstrap: str, client_id: str, rate: int) -> None:
    configs(bootstrap, "--alter", "--add-config", f"consumer_byte_rate={rate}",
            "--entity-type", "clients", "--entity-name", client_id)  # fmt: skip


def test_a_consumer_is_held_to_its_quota(broker):
    consumer_quota(broker.bootstrap, "reader", MiB)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "reader",
            "group.id": "quota-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["backlog"])
    received = Acks()
    started = time.monotonic()
    until = started + WARM_UP_S + MEASURED_S
    try:
        while time.monotonic() < until:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.add(len(message.value()))
    finally:
        consumer.close()
    rate = received.rate(started + WARM_UP_S, until)
    assert received.count < RECORDS  # the backlog outlasted the run: the quota, not the data, set the pace
    assert within(rate, MiB), rate / MiB
    log = broker.output_path.read_text()
    assert "apiKey=FETCH" in log and "clientId=reader" in log


def test_a_spark_batch_read_is_throttled_and_reads_everything(broker, spark):  # noqa: F811
    consumer_quota(broker.bootstrap, "spark-reader", 4 * MiB)
    rows = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("kafka.client.id", "spark-reader")
        .option("subscribe", "backlog")
        .load()
        .count()
    )
    assert rows == RECORDS
    throttled = [
        line
        for line in broker.output_path.read_text().splitlines()
        if "kafka.request.logger" in line and "clientId=spark-reader" in line
    ]
    assert throttled and all("apiKey=FETCH" in line for line in throttled)
