"""Shared steps of the real-client tests: topic set-up and reading a partition back.

Owns the set-up path every client test relies on (confluent-kafka's AdminClient, librdkafka being the
most widely deployed Kafka client) so that a test about kafka-python or aiokafka fails only for its
own client; and `committed`, a group's committed offsets as the AdminClient lists them. Nothing
here asserts broker behaviour beyond "the set-up step succeeded".

Callers: tests/compat only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0
QUIET = {"log_level": 3}  # librdkafka errors only: its retry warnings would bury a failure report


@dataclass(frozen=True, slots=True)
class ExternalBroker:
    """A broker the suite did not start (ODRADEK_COMPAT_BOOTSTRAP): only its address is known."""

    bootstrap: str


@dataclass(frozen=True, slots=True)
class Sample:
    """One record as a client produces it and must read it back, byte for byte."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def sample_records(count: int = 30) -> list[Sample]:
    """Records covering null keys, null values (tombstones), empty and binary payloads, headers
    (repeated names, empty values) and distinct CreateTime timestamps a little in the past."""
    now_ms = int(time.time() * 1000)
    samples = []
    for i in range(count):
        key: bytes | None = None if i % 7 == 3 and i % 10 != 5 else b"key-%d" % i  # never both null
        value: bytes | None = {0: bytes(range(256)), 1: b"", 5: None}.get(i % 10, b"value-%d-" % i * (i + 1))
        headers = (("trace", bytes([i, 0, 255])), ("empty", b""), ("trace", b"again")) if i % 3 == 0 else ()
        samples.append(Sample(key, value, headers, now_ms - 60_000 + i))
    return samples


def assert_same_records(expected: Sequence[Sample], got: Sequence[Sample]) -> None:
    assert len(got) == len(expected), f"read {len(got)} records, produced {len(expected)}"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"record {index} differs: produced {want}, read {have}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    """Create a topic and wait until metadata shows a leader for every partition."""
    client = admin(bootstrap)  # must outlive the futures it returns
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
        operation_timeout=TIMEOUT_S,
    )
    futures[name].result(TIMEOUT_S)
    wait_for_leaders(bootstrap, name, partitions)


def wait_for_leaders(bootstrap: str, name: str, partitions: int) -> None:
    client = admin(bootstrap)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        topic = client.list_topics(name, timeout=TIMEOUT_S).topics.get(name)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leader for all {partitions} partitions after {TIMEOUT_S}s")


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0, **conf: object) -> list[int]:
    """Produce `values` with keys k0, k1, ... and return the acknowledged offsets in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET, **conf})
    offsets: list[int] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        producer.produce(topic, key=b"k%d" % i, value=value, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S)
    assert remaining == 0 and not errors, f"produce failed: {remaining} undelivered, errors {errors}"
    return offsets


def consume(bootstrap: str, topic: str, count: int, partition: int = 0, start: int = 0) -> list:
    """Read `count` messages of one partition from `start` with assign (no group membership)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-compat-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.message.max.bytes": 4 << 20,
            **QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        messages: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(messages), timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                messages.append(message)
        assert len(messages) == count, f"read {len(messages)} of {count} messages from {topic}-{partition}"
        return messages
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    """The group's committed offsets, asked again while its coordinator loads (a broker just started:
    librdkafka's admin client hands COORDINATOR_LOAD_IN_PROGRESS to the caller instead of retrying)."""
    client = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        future = client.list_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[group]
        try:
            result = future.result(TIMEOUT_S)
            break
        except KafkaException as exc:
            loading = exc.args[0].code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
            if not loading or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return [tp.offset for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)]
