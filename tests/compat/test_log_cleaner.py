"""The log cleaner against a real `odradek serve` and confluent-kafka (librdkafka).

- A compacted topic with small segments and many updates of a few keys: once the cleaner ran, a
  consumer reading from the beginning sees one record per key below the active segment, each key's
  latest value, offsets that only increase, and a fetch from a compacted-away offset starts at the
  next record.
- `__consumer_offsets` (one partition, small segments) after hundreds of commits of one group holds
  far fewer records once cleaned, and a restarted broker's coordinator replays it to the last commit.
- A compacted topic written by a transactional producer that commits and aborts in turn: once
  cleaned, its old transaction markers are gone from the segments (their transactions' data went
  first, then delete.retention.ms passed) and a read_committed consumer sees exactly the latest
  committed value of each key below the active segment, and no aborted value.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.protocol.records.batch import iter_batches
from odradek.testing.broker import BrokerProcess
from tests.compat.conftest import BrokerFactory
from tests.compat.helpers import QUIET, TIMEOUT_S, create_topic

KEYS = 5
ROUNDS = 80
CLEANER = {"log.cleaner.backoff.ms": 100}


def produce_updates(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """ROUNDS updates of each of KEYS keys, one flushed batch per round; the last value per key."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
    latest: dict[bytes, bytes] = {}
    for round_ in range(ROUNDS):
        for index in range(KEYS):
            key, value = b"key-%d" % index, b"value-%d-%d-" % (index, round_) * 4
            producer.produce(topic, key=key, value=value, partition=0)
            latest[key] = value
        assert producer.flush(TIMEOUT_S) == 0
    return latest


def read_from(bootstrap: str, topic: str, start: int = 0) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record of partition 0 from `start` up to its high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **QUIET}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, start)])
        records: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while (not records or records[-1][0] < high - 1) and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                records.append((message.offset(), message.key(), message.value()))  # type: ignore[arg-type]
        return records
    finally:
        consumer.close()


def active_base_offset(broker: BrokerProcess, topic: str) -> int:
    return int(max((broker.data_dir / f"{topic}-0").glob("*.log")).stem)


def wait_until_cleaned(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes, bytes]]:
    """Read the partition until the part below the active segment holds each key once."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        records = read_from(broker.bootstrap, topic)
        active = active_base_offset(broker, topic)
        cleaned = [key for offset, key, _ in records if offset < active]
        if len(cleaned) == len(set(cleaned)) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_compacted_topic_keeps_the_latest_value_per_key(
    make_broker: BrokerFactory, unique_topic: str
) -> None:
    broker = make_broker(CLEANER)
    config = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.1"}
    create_topic(broker.bootstrap, unique_topic, config=config)
    latest = produce_updates(broker.bootstrap, unique_topic)

    records = wait_until_cleaned(broker, unique_topic)
    active = active_base_offset(broker, unique_topic)
    cleaned = [key for offset, key, _ in records if offset < active]
    assert active > KEYS * 10
    assert len(cleaned) == len(set(cleaned)) <= KEYS
    assert len(records) < KEYS * ROUNDS
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert offsets[-1] == KEYS * ROUNDS - 1
    assert {key: value for _, key, value in records} == latest

    gap = next(offset for offset in range(offsets[-1]) if offset not in offsets)
    assert read_from(broker.bootstrap, unique_topic, gap)[0][0] == min(o for o in offsets if o > gap)


def test_compacted_consumer_offsets_replay_after_restart(
    make_broker: BrokerFactory, unique_topic: str
) -> None:
    broker = make_broker({**CLEANER, "offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 3000})
    create_topic(broker.bootstrap, unique_topic)
    commits = 400
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "cleaned", "enable.auto.commit": False, **QUIET}
    )
    try:
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[TopicPartition(unique_topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()

    records = wait_until_cleaned(broker, "__consumer_offsets")
    assert len(records) < commits / 4
    assert broker.stop() == 0, broker.output_tail()
    broker.start()

    reader = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "cleaned", "enable.auto.commit": False, **QUIET}
    )
    try:
        committed = reader.committed([TopicPartition(unique_topic, 0)], timeout=TIMEOUT_S)
    finally:
        reader.close()
    assert committed[0].offset == commits
    assert len(read_from(broker.bootstrap, "__consumer_offsets")) < commits / 4


def markers_below_the_active_segment(broker: BrokerProcess, topic: str) -> int:
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))[:-1]
    return sum(header.is_control for segment in segments for _, header in iter_batches(segment.read_bytes()))


def read_committed(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **QUIET,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, 0)])
        records: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.position([TopicPartition(topic, 0)])[0].offset < high and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                records.append((message.offset(), message.key(), message.value()))  # type: ignore[arg-type]
        return records
    finally:
        consumer.close()


def test_transaction_markers_are_cleaned_and_read_committed_sees_the_committed_records(
    make_broker: BrokerFactory, unique_topic: str
) -> None:
    broker = make_broker(CLEANER)
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "2000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "300",
    }
    create_topic(broker.bootstrap, unique_topic, config=config)
    transactional = {"transactional.id": f"{unique_topic}-txn", "linger.ms": 0}
    producer = Producer({"bootstrap.servers": broker.bootstrap, **transactional, **QUIET})
    producer.init_transactions(TIMEOUT_S)
    transactions = 60
    committed: dict[bytes, bytes] = {}
    every_committed: set[bytes] = set()

    def transaction(round_: int) -> None:
        """Every key once; every third transaction aborted."""
        producer.begin_transaction()
        values = {b"key-%d" % index: b"round-%d-key-%d-" % (round_, index) * 4 for index in range(KEYS)}
        for key, value in values.items():
            producer.produce(unique_topic, key=key, value=value, partition=0)
        if round_ % 3 == 2:
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed.update(values)
            every_committed.update(values.values())

    for round_ in range(transactions):
        transaction(round_)
    # A marker goes in the pass after the one that removed its transaction's data (Kafka's rule), and
    # a pass needs new dirty data: the writes go on, as a live topic's would, until the markers go.
    deadline, most = time.monotonic() + TIMEOUT_S, transactions // 4
    while markers_below_the_active_segment(broker, unique_topic) > most:
        assert time.monotonic() < deadline, markers_below_the_active_segment(broker, unique_topic)
        transaction(transactions)
        transactions += 1
        time.sleep(0.2)

    records = read_committed(broker.bootstrap, unique_topic)
    assert records, "nothing read"
    assert all(value in every_committed for _, _, value in records)
    assert {key: value for _, key, value in records} == committed
    active = active_base_offset(broker, unique_topic)
    cleaned = [key for offset, key, _ in records if offset < active]
    assert len(cleaned) == len(set(cleaned))
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
