"""aiokafka against a real broker: producer acks and codecs, assign + seek_to_beginning, admin.

Apache Kafka's behaviour is the oracle: records read back byte for byte at dense offsets, compressed
batches are stored as produced, created topics appear in metadata and deleted ones disappear.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.compat import helpers, wire
from tests.compat.helpers import Sample

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


async def produce(bootstrap: str, topic: str, samples: list[Sample], **config: object) -> list[int | None]:
    """Acknowledged offsets in send order (None under acks=0, where aiokafka returns no metadata)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **config})
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic, s.value, s.key, partition=0, timestamp_ms=s.timestamp, headers=list(s.headers)
            )
            for s in samples
        ]
        return [getattr(await f, "offset", None) for f in futures]
    finally:
        await producer.stop()


async def consume(bootstrap: str, topic: str, count: int, **config: object) -> list:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **config
    )
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        records: list = []
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while len(records) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records += batch
        return records
    finally:
        await consumer.stop()


def as_samples(records: list) -> list[Sample]:
    return [Sample(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_round_trip_per_acks(broker, unique_topic: str, acks: object) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    samples = helpers.sample_records()

    offsets = asyncio.run(produce(broker.bootstrap, unique_topic, samples, acks=acks))
    records = asyncio.run(consume(broker.bootstrap, unique_topic, len(samples)))

    if acks != 0:  # with acks=0 the producer never learns an offset
        assert offsets == list(range(len(samples)))
    assert [r.offset for r in records] == list(range(len(samples)))
    helpers.assert_same_records(samples, as_samples(records))


@pytest.mark.parametrize("codec", sorted(CODEC_IDS))
def test_compressed_batches_round_trip_and_stay_compressed(broker, unique_topic: str, codec: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    samples = helpers.sample_records(60)

    asyncio.run(
        produce(broker.bootstrap, unique_topic, samples, acks=1, compression_type=codec, linger_ms=50)
    )
    records = asyncio.run(consume(broker.bootstrap, unique_topic, len(samples)))

    helpers.assert_same_records(samples, as_samples(records))
    with wire.Connection(broker.bootstrap) as conn:
        stored = wire.batch_headers(conn.fetch(unique_topic, 0, 0).records)
    assert stored and {b.compression for b in stored} == {CODEC_IDS[codec]}


def test_one_mebibyte_message(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, config={"max.message.bytes": str(2 << 20)})
    big = Sample(None, bytes(reversed(range(256))) * 4096, (), int(time.time() * 1000))

    offsets = asyncio.run(
        produce(broker.bootstrap, unique_topic, [big], acks="all", max_request_size=3 << 20)
    )
    records = asyncio.run(
        consume(broker.bootstrap, unique_topic, 1, max_partition_fetch_bytes=3 << 20, fetch_max_bytes=4 << 20)
    )

    assert offsets == [0]
    helpers.assert_same_records([big], as_samples(records))


async def admin_create_list_delete(bootstrap: str, topic: str) -> tuple[list[str], list[str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        created = await admin.create_topics(
            [NewTopic(topic, num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "60000"})]
        )
        assert [(t[0], t[1]) for t in created.topic_errors] == [(topic, 0)]
        after_create = await admin.list_topics()
        deleted = await admin.delete_topics([topic])
        assert [(t[0], t[1]) for t in deleted.topic_error_codes] == [(topic, 0)]
        after_delete = await admin.list_topics()
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while topic in after_delete and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            after_delete = await admin.list_topics()
        return after_create, after_delete
    finally:
        await admin.close()


def test_admin_create_and_delete_topics(broker, unique_topic: str) -> None:
    after_create, after_delete = asyncio.run(admin_create_list_delete(broker.bootstrap, unique_topic))

    assert unique_topic in after_create
    assert unique_topic not in after_delete
