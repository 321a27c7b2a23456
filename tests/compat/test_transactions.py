"""Real transactional producers against odradek's transaction coordinator.

confluent-kafka (librdkafka), kafka-python and aiokafka producers commit and abort transactions over
several partitions; read_committed consumers of the three clients see the committed records only,
never aborted or still open ones. Also: consume-transform-produce with send_offsets_to_transaction
(offsets visible on commit only), zombie fencing, a producer killed mid-transaction aborted by the
coordinator's timeout, and a broker killed (SIGKILL) during commits: after the restart every
transaction is visible whole or not at all.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import UnknownTopicOrPartitionError

from tests.compat import helpers

PARTITIONS = 3
FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 300}


def txn_producer(bootstrap: str, transactional_id: str, **conf: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **helpers.QUIET, **conf}
    )
    producer.init_transactions(helpers.TIMEOUT_S)
    return producer


def produce_txn(producer: Producer, topic: str, values: list[bytes], commit: bool) -> None:
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    if commit:
        producer.commit_transaction(helpers.TIMEOUT_S)
    else:
        producer.flush(helpers.TIMEOUT_S)
        producer.abort_transaction(helpers.TIMEOUT_S)


def confluent_read(bootstrap: str, topic: str, count: int, settle_s: float = 1.0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-compat-unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **helpers.QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[bytes] = []
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(count, timeout=0.5) if m.error() is None]
        settle = time.monotonic() + settle_s  # anything past `count` would show up now
        while time.monotonic() < settle:
            values += [m.value() for m in consumer.consume(10, timeout=0.2) if m.error() is None]
        return sorted(values)
    finally:
        consumer.close()


def kafka_python_read(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", consumer_timeout_ms=3000
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        return sorted(message.value for message in consumer)
    finally:
        consumer.close()


def aiokafka_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    async def read() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(PARTITIONS)])
            values: list[bytes] = []
            deadline = time.monotonic() + helpers.TIMEOUT_S
            while len(values) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                values += [m.value for messages in batches.values() for m in messages]
            batches = await consumer.getmany(timeout_ms=1000)
            values += [m.value for messages in batches.values() for m in messages]
            return sorted(values)
        finally:
            await consumer.stop()

    return asyncio.run(read())


def values(prefix: str, count: int = 6) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_commit_and_abort_seen_by_read_committed_consumers(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    producer = txn_producer(broker.bootstrap, f"{unique_topic}-txn")
    produce_txn(producer, unique_topic, values("committed"), commit=True)
    produce_txn(producer, unique_topic, values("aborted"), commit=False)
    produce_txn(producer, unique_topic, values("again"), commit=True)
    expected = sorted(values("committed") + values("again"))
    assert confluent_read(broker.bootstrap, unique_topic, len(expected)) == expected
    assert kafka_python_read(broker.bootstrap, unique_topic) == expected
    assert aiokafka_read(broker.bootstrap, unique_topic, len(expected)) == expected


def test_open_transaction_is_invisible_until_committed(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    producer = txn_producer(broker.bootstrap, f"{unique_topic}-txn")
    producer.begin_transaction()
    for i, value in enumerate(values("open")):
        producer.produce(unique_topic, value, partition=i % PARTITIONS)
    producer.flush(helpers.TIMEOUT_S)
    assert confluent_read(broker.bootstrap, unique_topic, 1, settle_s=0.5) == []
    producer.commit_transaction(helpers.TIMEOUT_S)
    assert confluent_read(broker.bootstrap, unique_topic, 6) == sorted(values("open"))


def test_describe_producers_shows_an_open_transaction_and_an_idempotent_producer(
    broker, unique_topic: str
) -> None:
    """DescribeProducers through kafka-python's admin client: the transactional producer's open
    transaction starts at its first offset and ends with the commit; the idempotent producer has
    none; a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION."""
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, values("plain", 2), **{"enable.idempotence": True})
    producer = txn_producer(broker.bootstrap, f"{unique_topic}-txn")
    producer.begin_transaction()
    producer.produce(unique_topic, b"open", partition=0)
    producer.flush(helpers.TIMEOUT_S)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        tp = KafkaTopicPartition(unique_topic, 0)
        during = admin.describe_producers([tp])[tp].active_producers
        producer.commit_transaction(helpers.TIMEOUT_S)
        after = admin.describe_producers([tp])[tp].active_producers
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([KafkaTopicPartition(unique_topic, 7)])
    finally:
        admin.close()
    assert sorted((p.last_sequence, p.current_transaction_start_offset) for p in during) == [(0, 2), (1, -1)]
    assert [p.current_transaction_start_offset for p in after] == [-1, -1]
    assert all(p.producer_id >= 0 and p.last_timestamp > 0 for p in during)


def test_kafka_python_and_aiokafka_transactional_producers(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{unique_topic}-kp")
    producer.init_transactions()
    for committed in (True, False):
        producer.begin_transaction()
        for i, value in enumerate(values(f"kp-{committed}")):
            producer.send(unique_topic, value, partition=i % PARTITIONS)
        producer.commit_transaction() if committed else producer.abort_transaction()
    producer.close()

    async def aio() -> None:
        aio_producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"{unique_topic}-aio"
        )
        await aio_producer.start()
        try:
            for committed in (True, False):
                await aio_producer.begin_transaction()
                for i, value in enumerate(values(f"aio-{committed}")):
                    await aio_producer.send_and_wait(unique_topic, value, partition=i % PARTITIONS)
                if committed:
                    await aio_producer.commit_transaction()
                else:
                    await aio_producer.abort_transaction()
        finally:
            await aio_producer.stop()

    asyncio.run(aio())
    expected = sorted(values("kp-True") + values("aio-True"))
    assert confluent_read(broker.bootstrap, unique_topic, len(expected)) == expected


def test_consume_transform_produce_commits_offsets_with_the_transaction(broker, unique_topic: str) -> None:
    source, sink, group = f"{unique_topic}-in", f"{unique_topic}-out", f"{unique_topic}-group"
    helpers.create_topic(broker.bootstrap, source, 1)
    helpers.create_topic(broker.bootstrap, sink, PARTITIONS)
    helpers.produce(broker.bootstrap, source, values("in", 10))
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **helpers.QUIET,
        }
    )
    producer = txn_producer(broker.bootstrap, f"{unique_topic}-txn")
    try:
        consumer.subscribe([source])
        consumed = _consume(consumer, 10)
        for committed, chunk in ((True, consumed[:5]), (False, consumed[5:])):
            producer.begin_transaction()
            for message in chunk:
                producer.produce(
                    sink, message.value().replace(b"in", b"out"), partition=message.offset() % PARTITIONS
                )
            offsets = [TopicPartition(source, 0, chunk[-1].offset() + 1)]
            producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), helpers.TIMEOUT_S
            )
            producer.commit_transaction(helpers.TIMEOUT_S) if committed else producer.abort_transaction(
                helpers.TIMEOUT_S
            )
        committed_offsets = consumer.committed([TopicPartition(source, 0)], timeout=helpers.TIMEOUT_S)
    finally:
        consumer.close()
    assert committed_offsets[0].offset == 5
    assert confluent_read(broker.bootstrap, sink, 5) == sorted(
        v.replace(b"in", b"out") for v in values("in", 5)
    )


def _consume(consumer: Consumer, count: int) -> list:
    messages: list = []
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while len(messages) < count and time.monotonic() < deadline:
        messages += [m for m in consumer.consume(count - len(messages), timeout=1.0) if m.error() is None]
    assert len(messages) == count
    return messages


def test_a_second_producer_with_the_same_id_fences_the_first(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    transactional_id = f"{unique_topic}-txn"
    zombie = txn_producer(broker.bootstrap, transactional_id)
    zombie.begin_transaction()
    for i, value in enumerate(values("zombie")):
        zombie.produce(unique_topic, value, partition=i % PARTITIONS)
    zombie.flush(helpers.TIMEOUT_S)
    successor = txn_producer(broker.bootstrap, transactional_id)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(helpers.TIMEOUT_S)
    assert raised.value.args[0].fatal()
    produce_txn(successor, unique_topic, values("successor"), commit=True)
    assert confluent_read(broker.bootstrap, unique_topic, 6) == sorted(values("successor"))


ABANDONING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3],
                     "transaction.timeout.ms": 2000, "log_level": 3})
producer.init_transactions(30)
producer.begin_transaction()
for i in range(6):
    producer.produce(sys.argv[2], b"abandoned-%d" % i, partition=i % 3)
producer.flush(30)
print("flushed", flush=True)
time.sleep(60)
"""


def test_a_producer_killed_mid_transaction_is_aborted_by_the_timeout(make_broker, unique_topic: str) -> None:
    broker = make_broker(FAST_TIMEOUTS)
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    transactional_id = f"{unique_topic}-txn"
    process = subprocess.Popen(
        [sys.executable, "-c", ABANDONING_PRODUCER, broker.bootstrap, unique_topic, transactional_id],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    with process.stdout:
        try:
            assert process.stdout.readline().strip() == b"flushed"
        finally:
            process.kill()
            process.wait()
    helpers.produce(broker.bootstrap, unique_topic, [b"plain"], partition=0)
    time.sleep(3)  # past the 2 s timeout and a cleanup run
    assert confluent_read(broker.bootstrap, unique_topic, 1) == [b"plain"]


def test_a_broker_killed_during_commits_completes_or_aborts_each_transaction(
    make_broker, unique_topic: str
) -> None:
    broker = make_broker(FAST_TIMEOUTS)
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    producer = txn_producer(broker.bootstrap, f"{unique_topic}-txn", **{"transaction.timeout.ms": 3000})
    killer = threading.Timer(0.5, broker.kill)
    killer.start()
    batches = 0
    try:
        while batches < 1000:
            produce_txn(producer, unique_topic, values(f"t{batches}", PARTITIONS * 2), commit=True)
            batches += 1
    except KafkaException:
        pass
    killer.join()
    broker.restart()
    time.sleep(4)  # an Ongoing transaction times out; a prepared one is completed on load
    helpers.produce(broker.bootstrap, unique_topic, [b"after"], partition=0)
    seen = confluent_read(broker.bootstrap, unique_topic, 1, settle_s=2.0)
    assert b"after" in seen
    by_txn: dict[str, int] = {}
    for value in seen:
        if value != b"after":
            txn = value.decode().split("-")[0]
            by_txn[txn] = by_txn.get(txn, 0) + 1
    assert all(count == PARTITIONS * 2 for count in by_txn.values()), by_txn
    assert len(by_txn) >= batches
