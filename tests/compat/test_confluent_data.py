"""confluent-kafka (librdkafka) Producer and Consumer on the data path against a real broker.

Apache Kafka's behaviour is the oracle: every acks mode and compression codec stores exactly what was
produced (keys, null values, headers, CreateTime timestamps) and hands it back byte for byte; a
1 MiB record passes when max.message.bytes allows it and is refused with MSG_SIZE_TOO_LARGE when it
does not; watermarks and offsets_for_times answer from ListOffsets; a consumer positioned out of
range resets as auto.offset.reset says; a consumer waiting at the end of the log (fetch long poll)
receives records produced later. Consumers use assign + seek (no group membership).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition

from tests.compat import helpers
from tests.compat.helpers import Sample

TIMEOUT_S = helpers.TIMEOUT_S
MIB = 1 << 20


def produce_samples(
    bootstrap: str, topic: str, samples: list[Sample], partition: int = 0, **conf: object
) -> list:
    """Produce `samples` and return the delivery reports' (error, offset) pairs."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **helpers.QUIET, **conf})
    reports: list = []
    for sample in samples:
        producer.produce(
            topic,
            key=sample.key,
            value=sample.value,
            headers=list(sample.headers),
            timestamp=sample.timestamp,
            partition=partition,
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    return reports


def as_samples(messages: list) -> list[Sample]:
    return [Sample(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) for m in messages]


def consumer(bootstrap: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-compat-unused",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 4 * MIB,
            **helpers.QUIET,
            **conf,
        }
    )


def poll_values(reader: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def poll_values_for(reader: Consumer, seconds: float) -> list[bytes]:
    """Whatever values arrive within `seconds`."""
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = reader.poll(0.1)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_round_trip_every_acks_and_codec(broker, unique_topic: str, acks: str, compression: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    samples = helpers.sample_records(40)
    reports = produce_samples(
        broker.bootstrap, unique_topic, samples, acks=acks, **{"compression.type": compression}
    )
    assert [err for err, _ in reports] == [None] * len(samples)
    if acks != "0":  # acks=0 deliveries carry no offset
        assert [offset for _, offset in reports] == list(range(len(samples)))
    got = helpers.consume(broker.bootstrap, unique_topic, len(samples))
    helpers.assert_same_records(samples, as_samples(got))
    assert [m.offset() for m in got] == list(range(len(samples)))


def test_one_mebibyte_record(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, config={"max.message.bytes": str(2 * MIB)})
    big = Sample(b"big", bytes(range(256)) * (MIB // 256), (("h", b"v"),), int(time.time() * 1000))
    reports = produce_samples(broker.bootstrap, unique_topic, [big], **{"message.max.bytes": 4 * MIB})
    assert reports == [(None, 0)]
    helpers.assert_same_records([big], as_samples(helpers.consume(broker.bootstrap, unique_topic, 1)))


def test_record_over_max_message_bytes_is_refused(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)  # max.message.bytes 1048588
    big = Sample(None, b"x" * MIB, (), int(time.time() * 1000))
    reports = produce_samples(
        broker.bootstrap, unique_topic, [big], **{"message.max.bytes": 4 * MIB, "retries": 0}
    )
    assert [err.code() for err, _ in reports] == [KafkaError.MSG_SIZE_TOO_LARGE]
    low, high = consumer(broker.bootstrap).get_watermark_offsets(TopicPartition(unique_topic, 0), TIMEOUT_S)
    assert (low, high) == (0, 0)


def test_watermarks_and_offsets_for_times(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, partitions=2)
    base = int(time.time() * 1000) - 600_000
    samples = [Sample(b"k", b"v%d" % i, (), base + 1000 * i) for i in range(10)]
    produce_samples(broker.bootstrap, unique_topic, samples, partition=1, **{"batch.num.messages": 3})
    reader = consumer(broker.bootstrap)
    try:
        assert reader.get_watermark_offsets(TopicPartition(unique_topic, 1), TIMEOUT_S) == (0, 10)
        assert reader.get_watermark_offsets(TopicPartition(unique_topic, 0), TIMEOUT_S) == (0, 0)
        queries = [base - 5000, base, base + 1, base + 4500, base + 9000, base + 9001]
        found = [
            reader.offsets_for_times([TopicPartition(unique_topic, 1, t)], TIMEOUT_S)[0] for t in queries
        ]
        assert [tp.offset for tp in found] == [0, 0, 1, 5, 9, OFFSET_END]
        assert all(tp.error is None for tp in found)
    finally:
        reader.close()


def test_out_of_range_position_resets_to_earliest(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    helpers.produce(broker.bootstrap, unique_topic, [b"old-0", b"old-1"])
    reader = consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        reader.assign([TopicPartition(unique_topic, 0, 1000)])  # beyond the log end: OFFSET_OUT_OF_RANGE
        assert poll_values(reader, 2) == [b"old-0", b"old-1"]
    finally:
        reader.close()


def test_out_of_range_position_resets_to_latest(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    helpers.produce(broker.bootstrap, unique_topic, [b"old-0", b"old-1"])
    reader = consumer(broker.bootstrap, **{"auto.offset.reset": "latest"})
    try:
        reader.assign([TopicPartition(unique_topic, 0, 1000)])
        received: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not received and time.monotonic() < deadline:  # the reset may land after a produce
            helpers.produce(broker.bootstrap, unique_topic, [b"new"])
            received = poll_values_for(reader, 1.0)
        assert received and all(value == b"new" for value in received)
    finally:
        reader.close()


def test_consumer_waiting_at_the_end_receives_later_records(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    helpers.produce(broker.bootstrap, unique_topic, [b"before"])
    reader = consumer(broker.bootstrap, **{"fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1})
    try:
        reader.assign([TopicPartition(unique_topic, 0, 1)])  # the log end offset
        assert poll_values_for(reader, 1.0) == []  # its fetches now wait at the end of the log
        helpers.produce(broker.bootstrap, unique_topic, [b"after-0", b"after-1"])
        assert poll_values(reader, 2) == [b"after-0", b"after-1"]
    finally:
        reader.close()


def test_partitions_are_independent(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, partitions=3)
    for partition in range(3):
        values = [b"p%d-%d" % (partition, i) for i in range(partition + 1)]
        assert helpers.produce(broker.bootstrap, unique_topic, values, partition=partition) == list(
            range(len(values))
        )
    for partition in range(3):
        got = helpers.consume(broker.bootstrap, unique_topic, partition + 1, partition=partition)
        assert [m.value() for m in got] == [b"p%d-%d" % (partition, i) for i in range(partition + 1)]
