"""Offset lookups from three clients across many segment rolls: offsets_for_times, beginning and end
offsets, and ListOffsets' earliest / latest / max-timestamp specs.

Apache Kafka's behaviour is the oracle: a lookup by timestamp answers the earliest offset whose record
timestamp is >= the target (exact record, not batch base offset), or no offset when every record is
older; the time index must handle a timestamp spike in the middle of the log; earliest is the log
start offset and latest the high watermark.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.compat import helpers, wire

RECORDS = 400
SPIKE_INDEX = 250
STEP_MS = 10


@dataclass(frozen=True, slots=True)
class RolledTopic:
    name: str
    timestamps: tuple[int, ...]

    @property
    def first_ts(self) -> int:
        return self.timestamps[0]

    def expected_offset(self, target: int) -> int | None:
        """Kafka's answer: the earliest offset with timestamp >= target, None when there is none."""
        return next((i for i, ts in enumerate(self.timestamps) if ts >= target), None)

    def targets(self) -> list[int]:
        t0, spike = self.first_ts, self.timestamps[SPIKE_INDEX]
        inside = [t0 + STEP_MS * k + d for k in (0, 1, 37, 120, 249, 251, 399) for d in (0, 1)]
        return [t0 - 1000, *inside, spike - 1, spike, spike + 1]


@pytest.fixture(scope="module")
def rolled_topic(broker) -> RolledTopic:
    """One partition in many small segments; timestamps rise by STEP_MS except one spike."""
    name = f"offsets-lookup-{int(time.time() * 1000)}"
    helpers.create_topic(broker.bootstrap, name, config={"segment.bytes": "2048"})
    t0 = int(time.time() * 1000) - 3_600_000
    timestamps = [t0 + STEP_MS * i for i in range(RECORDS)]
    timestamps[SPIKE_INDEX] = t0 + STEP_MS * RECORDS + 5000
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 7, **helpers.QUIET}
    )
    for i, ts in enumerate(timestamps):
        producer.produce(name, value=b"%04d" % i + b"." * 60, partition=0, timestamp=ts)
    assert producer.flush(helpers.TIMEOUT_S) == 0
    if not isinstance(broker, helpers.ExternalBroker):
        segments = list((broker.data_dir / f"{name}-0").glob("*.log"))
        assert len(segments) >= 5, f"expected many segments, found {len(segments)}"
    return RolledTopic(name, tuple(timestamps))


def test_confluent_offsets_for_times_and_watermarks(broker, rolled_topic: RolledTopic) -> None:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "odradek-compat-unused", **helpers.QUIET}
    )
    try:
        targets = rolled_topic.targets()
        query = [TopicPartition(rolled_topic.name, 0, ts) for ts in targets]
        answers = [consumer.offsets_for_times([tp], timeout=helpers.TIMEOUT_S)[0].offset for tp in query]
        watermarks = consumer.get_watermark_offsets(TopicPartition(rolled_topic.name, 0), helpers.TIMEOUT_S)
    finally:
        consumer.close()

    expected = [rolled_topic.expected_offset(ts) for ts in targets]
    assert answers == [-1 if e is None else e for e in expected]  # librdkafka: -1 = past the end
    assert watermarks == (0, RECORDS)


def test_confluent_admin_list_offsets_specs(broker, rolled_topic: RolledTopic) -> None:
    admin = helpers.admin(broker.bootstrap)
    partition = TopicPartition(rolled_topic.name, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max": OffsetSpec.max_timestamp(),
    }

    answers = {
        name: admin.list_offsets({partition: spec}, request_timeout=helpers.TIMEOUT_S)[partition].result()
        for name, spec in specs.items()
    }

    assert answers["earliest"].offset == 0
    assert answers["latest"].offset == RECORDS
    assert (answers["max"].offset, answers["max"].timestamp) == (
        SPIKE_INDEX,
        rolled_topic.timestamps[SPIKE_INDEX],
    )


def test_kafka_python_offsets_for_times(broker, rolled_topic: RolledTopic) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    partition = KpTopicPartition(rolled_topic.name, 0)
    try:
        targets = rolled_topic.targets()
        answers = [consumer.offsets_for_times({partition: ts})[partition] for ts in targets]
        beginning = consumer.beginning_offsets([partition])[partition]
        end = consumer.end_offsets([partition])[partition]
    finally:
        consumer.close()

    for ts, answer in zip(targets, answers, strict=True):
        expected = rolled_topic.expected_offset(ts)
        if expected is None:
            assert answer is None, f"target {ts}: expected no offset, got {answer}"
        else:
            assert (answer.offset, answer.timestamp) == (expected, rolled_topic.timestamps[expected])
    assert (beginning, end) == (0, RECORDS)


async def aiokafka_lookups(bootstrap: str, topic: str, targets: list[int]) -> tuple[list, int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    partition = AioTopicPartition(topic, 0)
    try:
        answers = [(await consumer.offsets_for_times({partition: ts}))[partition] for ts in targets]
        beginning = (await consumer.beginning_offsets([partition]))[partition]
        end = (await consumer.end_offsets([partition]))[partition]
        return answers, beginning, end
    finally:
        await consumer.stop()


def test_aiokafka_offsets_for_times(broker, rolled_topic: RolledTopic) -> None:
    targets = rolled_topic.targets()

    answers, beginning, end = asyncio.run(aiokafka_lookups(broker.bootstrap, rolled_topic.name, targets))

    got = [None if a is None else a.offset for a in answers]
    assert got == [rolled_topic.expected_offset(ts) for ts in targets]
    assert (beginning, end) == (0, RECORDS)


def test_wire_list_offsets_and_fetch_from_each_segment(broker, rolled_topic: RolledTopic) -> None:
    with wire.Connection(broker.bootstrap) as conn:
        assert conn.list_offsets(rolled_topic.name, 0, -2) == (0, 0)
        assert conn.list_offsets(rolled_topic.name, 0, -1) == (0, RECORDS)
        records = conn.read_all(rolled_topic.name, 0)
        middle = conn.read_all(rolled_topic.name, 0, start=SPIKE_INDEX + 3)

    assert [r.offset for r in records] == list(range(RECORDS))
    assert [r.timestamp for r in records] == list(rolled_topic.timestamps)
    assert [r.value[:4] for r in records] == [b"%04d" % i for i in range(RECORDS)]
    assert [r.offset for r in middle] == list(range(SPIKE_INDEX + 3, RECORDS))
