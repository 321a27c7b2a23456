"""Real clients reading a partition that holds transactions: confluent-kafka (librdkafka) and
kafka-python consumers with isolation.level read_committed skip the records of an aborted
transaction (from the Fetch answer's aborted_transactions) and stop at the last stable offset;
read_uncommitted consumers read everything.

The transactions are written into the stopped broker's log with the storage API, as a coordinator's
partition leader would store them, so that aborted, committed and open transactions sit at exact
offsets; the broker is started again on it. Transactions written by real producers through the
transaction coordinator are in test_transactions.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.clock import Clock
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.compat import helpers

COMMITTED = [b"plain-0", b"plain-1", b"committed", b"after"]
EVERYTHING = [b"plain-0", b"plain-1", b"aborted-0", b"aborted-1", b"committed", b"after", b"open"]


def txn_batch(producer_id: int, sequence: int, *values: bytes) -> bytes:
    records = [SimpleRecord(value, b"k", timestamp=int(time.time() * 1000)) for value in values]
    return build_batch(
        records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
    )


def write_transactions(partition_dir: Path) -> None:
    """Offsets 2-3 aborted (producer 7), 4 committed (producer 8), 5 ABORT, 6 COMMIT, 7 plain,
    8 an open transaction (producer 9): the last stable offset is 8."""
    log = Log(partition_dir, LogConfig(), Clock(), clean_shutdown=True)
    epoch = log.leader_epoch_cache.latest_epoch
    log.append_as_leader(txn_batch(7, 0, b"aborted-0", b"aborted-1"), epoch)
    log.append_as_leader(txn_batch(8, 0, b"committed"), epoch)
    log.append_marker(7, 0, coordinator_epoch=0, commit=False, leader_epoch=epoch)
    log.append_marker(8, 0, coordinator_epoch=0, commit=True, leader_epoch=epoch)
    log.append_as_leader(
        build_batch([SimpleRecord(b"after", b"k", timestamp=int(time.time() * 1000))]), epoch
    )
    log.append_as_leader(txn_batch(9, 0, b"open"), epoch)
    log.close()


def confluent_values(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-compat-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            **helpers.QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(count, timeout=1.0) if m.error() is None]
        time.sleep(0.5)  # anything past `count` would show up now
        values += [m.value() for m in consumer.consume(10, timeout=0.5) if m.error() is None]
        return values
    finally:
        consumer.close()


def kafka_python_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, consumer_timeout_ms=2000)
    try:
        consumer.assign([KafkaTopicPartition(topic, 0)])
        consumer.seek(KafkaTopicPartition(topic, 0), 0)
        return [message.value for message in consumer]
    finally:
        consumer.close()


@pytest.fixture
def transactional_topic(make_broker, unique_topic: str) -> tuple[str, str]:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    assert helpers.produce(broker.bootstrap, unique_topic, [b"plain-0", b"plain-1"]) == [0, 1]
    assert broker.stop() == 0, broker.output_tail()
    write_transactions(broker.data_dir / f"{unique_topic}-0")
    broker.start()
    return broker.bootstrap, unique_topic


def test_confluent_read_committed_skips_aborted_records_and_stops_at_the_lso(
    transactional_topic: tuple[str, str],
) -> None:
    bootstrap, topic = transactional_topic
    assert confluent_values(bootstrap, topic, "read_committed", len(COMMITTED)) == COMMITTED
    assert confluent_values(bootstrap, topic, "read_uncommitted", len(EVERYTHING)) == EVERYTHING


def test_kafka_python_read_committed_skips_aborted_records_and_stops_at_the_lso(
    transactional_topic: tuple[str, str],
) -> None:
    bootstrap, topic = transactional_topic
    assert kafka_python_values(bootstrap, topic, "read_committed") == COMMITTED
    assert kafka_python_values(bootstrap, topic, "read_uncommitted") == EVERYTHING
