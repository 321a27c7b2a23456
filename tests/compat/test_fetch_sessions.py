"""Fetch sessions (KIP-227) against a real broker: hand-packed Fetch v7 frames and kafka-python.

- Raw Fetch v7 (packed here from Kafka's protocol guide, sharing no code with odradek): a full fetch
  with session epoch 0 creates a session; incremental fetches answer only the partitions with new
  records or moved offsets, and forget what `forgotten_topics_data` names; a wrong epoch is
  INVALID_FETCH_SESSION_EPOCH, an unknown session FETCH_SESSION_ID_NOT_FOUND; epoch -1 closes.
- kafka-python 3.x, which uses fetch sessions: a consumer of several partitions gets every record
  exactly once while records keep arriving on some partitions, and its own log shows the session
  being created and continued by incremental responses (never refused or reset).
- max.incremental.fetch.session.cache.slots=0: no session is created; kafka-python reads on with
  full fetches. (librdkafka and aiokafka never ask for sessions: epoch -1.)
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.compat import helpers, wire

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCHER_LOG = "kafka.consumer.fetcher"


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _array(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def fetch_v7_body(
    topic: str, offsets: dict[int, int], session_id: int, epoch: int, forget: tuple[int, ...] = ()
) -> bytes:
    """Fetch v7: consumer, no wait, 1 MiB per partition; `offsets` maps partition -> fetch offset."""
    partitions = [struct.pack(">iqqi", p, offset, -1, 1 << 20) for p, offset in offsets.items()]
    topics = [_string(topic) + _array(partitions)] if partitions else []
    forgotten = [_string(topic) + _array([struct.pack(">i", p) for p in forget])] if forget else []
    head = struct.pack(">iiiibii", -1, 0, 0, 1 << 30, 0, session_id, epoch)
    return head + _array(topics) + _array(forgotten)


@dataclass(frozen=True, slots=True)
class FetchV7:
    error_code: int
    session_id: int
    partitions: dict[int, tuple[int, int, list[bytes | None]]]  # partition -> (error, HW, values)


def parse_fetch_v7(body: bytes) -> FetchV7:
    r = wire.Reader(body)
    r.int32()  # throttle_time_ms
    error_code, session_id = r.int16(), r.int32()
    partitions = {}
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            index, error, high_watermark = r.int32(), r.int16(), r.int64()
            r.int64(), r.int64()  # last_stable_offset, log_start_offset
            for _ in range(max(r.array_len(), 0)):
                r.int64(), r.int64()
            records = wire.parse_record_batches(r.bytes() or b"")
            partitions[index] = (error, high_watermark, [record.value for record in records])
    return FetchV7(error_code, session_id, partitions)


def fetch_v7(conn: wire.Connection, topic: str, offsets: dict[int, int], session_id: int, epoch: int, **kw):
    return parse_fetch_v7(
        conn.call(wire.API_FETCH, 7, fetch_v7_body(topic, offsets, session_id, epoch, **kw))
    )


def put(conn: wire.Connection, topic: str, partition: int, *values: bytes) -> None:
    result = conn.produce(topic, partition, wire.record_batch([(None, v) for v in values]))
    assert result.error_code == 0


def test_raw_incremental_fetches_carry_only_what_changed(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, partitions=3)
    with wire.Connection(broker.bootstrap) as conn:
        put(conn, unique_topic, 0, b"a0")
        full = fetch_v7(conn, unique_topic, {0: 0, 1: 0, 2: 0}, session_id=0, epoch=0)
        assert full.error_code == 0 and full.session_id > 0
        assert full.partitions == {0: (0, 1, [b"a0"]), 1: (0, 0, []), 2: (0, 0, [])}
        session = full.session_id

        assert fetch_v7(conn, unique_topic, {0: 1}, session, 1).partitions == {}
        put(conn, unique_topic, 1, b"b0", b"b1")
        assert fetch_v7(conn, unique_topic, {}, session, 2).partitions == {1: (0, 2, [b"b0", b"b1"])}
        assert fetch_v7(conn, unique_topic, {1: 2}, session, 3, forget=(2,)).partitions == {}
        put(conn, unique_topic, 2, b"c0")  # partition 2 left the session: not answered
        put(conn, unique_topic, 0, b"a1")
        assert fetch_v7(conn, unique_topic, {}, session, 4).partitions == {0: (0, 2, [b"a1"])}

        replayed = fetch_v7(conn, unique_topic, {}, session, 4)
        assert (replayed.error_code, replayed.session_id, replayed.partitions) == (
            INVALID_FETCH_SESSION_EPOCH,
            0,
            {},
        )
        closed = fetch_v7(conn, unique_topic, {2: 0}, session, -1)
        assert (closed.session_id, closed.partitions) == (0, {2: (0, 1, [b"c0"])})
        gone = fetch_v7(conn, unique_topic, {}, session, 5)
        assert gone.error_code == FETCH_SESSION_ID_NOT_FOUND


def consume_all(consumer: KafkaConsumer, count: int) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += [(r.partition, r.offset, r.value) for r in records]
    return got


def values(partition: int, first: int, last: int) -> list[bytes]:
    return [b"p%d-%d" % (partition, i) for i in range(first, last)]


def test_kafka_python_consumes_several_partitions_through_a_session(
    broker, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=FETCHER_LOG)
    helpers.create_topic(broker.bootstrap, unique_topic, partitions=3)
    for partition in range(3):
        helpers.produce(broker.bootstrap, unique_topic, values(partition, 0, 10), partition=partition)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(unique_topic, p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        got = consume_all(consumer, 30)
        helpers.produce(broker.bootstrap, unique_topic, values(1, 10, 15), partition=1)
        got += consume_all(consumer, 5)
        helpers.produce(broker.bootstrap, unique_topic, values(2, 10, 12), partition=2)
        got += consume_all(consumer, 2)
    finally:
        consumer.close()

    for partition, count in ((0, 10), (1, 15), (2, 12)):
        mine = [(offset, value) for p, offset, value in got if p == partition]
        assert mine == list(enumerate(values(partition, 0, count)))
    fetcher_log = [r.getMessage() for r in caplog.records if r.name == FETCHER_LOG]
    assert any("created a new incremental fetch session" in line for line in fetcher_log)
    assert any("incremental fetch response for session" in line for line in fetcher_log)
    assert not [line for line in fetcher_log if "unable to process the fetch" in line or "invalid" in line]


def test_no_cache_slots_means_full_fetches(make_broker, unique_topic: str) -> None:
    broker = make_broker({"max.incremental.fetch.session.cache.slots": 0})
    helpers.create_topic(broker.bootstrap, unique_topic)
    helpers.produce(broker.bootstrap, unique_topic, values(0, 0, 3))
    with wire.Connection(broker.bootstrap) as conn:
        response = fetch_v7(conn, unique_topic, {0: 0}, session_id=0, epoch=0)
    assert (response.session_id, response.partitions) == (0, {0: (0, 3, values(0, 0, 3))})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(unique_topic, 0)])
        consumer.seek_to_beginning()
        assert [value for _, _, value in consume_all(consumer, 3)] == values(0, 0, 3)
    finally:
        consumer.close()
