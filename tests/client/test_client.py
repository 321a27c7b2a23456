"""The blocking client against a real broker process: metadata, produce, fetch, offsets, admin."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer as CkProducer

from odradek.client import KafkaClient, TopicPartition, read_range
from odradek.client.connection import BrokerConnection
from odradek.client.producer import Producer, partition_for_key
from odradek.client.transactions import TransactionalProducer
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.compression import CompressionType
from tests.conftest import topic_name

EARLIEST, LATEST = -2, -1


def test_connection_negotiates_versions(client: KafkaClient) -> None:
    cluster = client.metadata([])
    assert cluster.brokers
    connection = next(iter(client._by_address.values()))
    assert connection.versions[0] >= 3 and connection.versions[1] >= 4


def test_create_produce_fetch_list_offsets(client: KafkaClient, make_topic) -> None:
    topic = make_topic(2)
    assert [p.partition for p in client.metadata([topic]).partitions_of(topic)] == [0, 1]
    producer = Producer(client, compression=CompressionType.LZ4)
    for i in range(100):
        producer.send(topic, b"v%d" % i, partition=i % 2, timestamp_ms=1_000_000 + i, headers=[("h", None)])
    last = producer.flush()
    assert last == {TopicPartition(topic, 0): 49, TopicPartition(topic, 1): 49}
    tp = TopicPartition(topic, 1)
    assert client.list_offsets({tp: EARLIEST}) == {tp: 0}
    assert client.list_offsets({tp: LATEST}) == {tp: 50}
    assert client.list_offsets({tp: 1_000_051}) == {tp: 25}
    assert client.list_offsets({tp: 9_000_000}) == {tp: -1}
    chunks = list(read_range(client, tp, 10, 20, on_data_loss=pytest.fail))
    values = [v for c in chunks for v in c.values]
    assert values == [b"v%d" % i for i in range(21, 41, 2)]
    assert chunks[0].headers[0] == (("h", None),)


def test_read_range_reports_records_removed_by_retention(client: KafkaClient, make_topic) -> None:
    topic = make_topic(1, configs={"segment.bytes": "1024", "retention.bytes": "1"})
    tp = TopicPartition(topic, 0)
    producer = Producer(client)
    for i in range(12):
        producer.send(topic, b"%03d" % i + b"." * 300, partition=0)
        producer.flush()
    log_start = _wait_for_log_start(client, tp)
    losses: list[str] = []
    offsets = [o for c in read_range(client, tp, 0, 12, on_data_loss=losses.append) for o in c.offsets]
    assert offsets == list(range(log_start, 12))
    assert losses == [f"offsets [0, {log_start}) of {tp} were deleted (log start offset is {log_start})"]
    with pytest.raises(RuntimeError, match="beyond its high watermark"):
        list(read_range(client, tp, 50, 60, on_data_loss=_raise))


def _wait_for_log_start(client: KafkaClient, tp: TopicPartition) -> int:
    """The log start offset once retention moved it past 0 and left it there."""
    deadline = time.monotonic() + 30
    seen = [0]
    while len(seen) < 3 or seen[-1] == 0 or seen[-1] != seen[-3]:
        assert time.monotonic() < deadline, "retention never advanced the log start offset"
        time.sleep(0.2)
        seen.append(client.list_offsets({tp: EARLIEST})[tp])
    return seen[-1]


def _raise(message: str) -> None:
    raise RuntimeError(message)


def test_keyed_records_land_where_librdkafkas_murmur2_partitioner_puts_them(
    bootstrap: str, client: KafkaClient, make_topic
) -> None:
    topic = make_topic(5)
    producer = CkProducer({"bootstrap.servers": bootstrap, "partitioner": "murmur2"})
    placed: dict[bytes, int] = {}
    keys = [b"user-%d" % i for i in range(40)]
    for key in keys:
        producer.produce(
            topic, b"x", key=key, on_delivery=lambda err, msg: placed.__setitem__(msg.key(), msg.partition())
        )
    assert producer.flush(30) == 0
    assert placed == {key: partition_for_key(key, 5) for key in keys}


def test_admin_errors_and_unknown_partitions(client: KafkaClient, make_topic) -> None:
    topic = make_topic(1)
    with pytest.raises(KafkaError) as exists:
        client.create_topics({topic: 1})
    assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    client.create_partitions({topic: 3})
    assert client.partition_count(topic) == 3
    client.delete_topics([topic])
    assert client.metadata([topic]).partitions_of(topic) == ()
    result = client.fetch(TopicPartition(topic, 0), 0)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _recording_requests(monkeypatch) -> list[tuple[int, object]]:
    """Record every request the client sends."""
    sent: list[tuple[int, object]] = []
    original = BrokerConnection.request

    def request(self, api_key: int, message, **kwargs):
        sent.append((api_key, message))
        return original(self, api_key, message, **kwargs)

    monkeypatch.setattr(BrokerConnection, "request", request)
    return sent


def _isolation_levels(sent: list[tuple[int, object]]) -> set[tuple[int, int]]:
    return {
        (api_key, message.isolation_level)
        for api_key, message in sent
        if api_key in (ApiKey.FETCH, ApiKey.LIST_OFFSETS)
    }


def test_read_committed_reads_to_the_last_stable_offset(bootstrap: str, make_topic, monkeypatch) -> None:
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    sent = _recording_requests(monkeypatch)
    with KafkaClient(bootstrap, timeout_s=10) as plain:
        producer = Producer(plain)
        for i in range(5):
            producer.send(topic, b"v%d" % i, partition=0)
        producer.flush()
        assert plain.list_offsets({tp: LATEST}) == {tp: 5}
    assert _isolation_levels(sent) == {(ApiKey.LIST_OFFSETS, 0)}
    sent.clear()
    with KafkaClient(bootstrap, timeout_s=10, read_committed=True) as committed:
        assert committed.list_offsets({tp: LATEST}) == {tp: 5}
        chunks = list(read_range(committed, tp, 0, 5, on_data_loss=pytest.fail))
    assert [v for c in chunks for v in c.values] == [b"v%d" % i for i in range(5)]
    assert _isolation_levels(sent) == {(ApiKey.LIST_OFFSETS, 1), (ApiKey.FETCH, 1)}


def test_read_committed_leaves_aborted_transactions_out(bootstrap: str, make_topic) -> None:
    """Interleaved on one partition: a committed transaction, an aborted one of another producer
    whose records straddle the range's start, a plain record and a second committed transaction."""
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    with KafkaClient(bootstrap, timeout_s=10) as plain:
        kept = TransactionalProducer(plain, topic_name("kept"))
        dropped = TransactionalProducer(plain, topic_name("dropped"))
        kept.init_transactions()
        dropped.init_transactions()
        dropped.begin()
        dropped.send(topic, b"aborted-0", partition=0)
        dropped.flush()
        kept.begin()
        kept.send(topic, b"committed-0", partition=0)
        kept.flush()
        dropped.send(topic, b"aborted-1", partition=0)
        dropped.flush()
        kept.commit()
        dropped.abort()
        producer = Producer(plain)
        producer.send(topic, b"plain", partition=0)
        producer.flush()
        kept.begin()
        kept.send(topic, b"committed-1", partition=0)
        kept.commit()
        end = plain.list_offsets({tp: LATEST})[tp]
        everything = [v for c in read_range(plain, tp, 0, end, on_data_loss=pytest.fail) for v in c.values]
    assert everything == [b"aborted-0", b"committed-0", b"aborted-1", b"plain", b"committed-1"]
    with KafkaClient(bootstrap, timeout_s=10, read_committed=True) as committed:
        assert committed.list_offsets({tp: LATEST}) == {tp: end}
        for start in (0, 1, 2):  # from before, inside and after the aborted transaction's first record
            chunks = read_range(committed, tp, start, end, on_data_loss=pytest.fail)
            values = [v for c in chunks for v in c.values]
            assert values == [
                v for v in (b"committed-0", b"plain", b"committed-1") if v in everything[start:]
            ]


def test_max_request_bytes_bounds_each_produce_request(client: KafkaClient, make_topic, monkeypatch) -> None:
    topic = make_topic(3)
    sent = _recording_requests(monkeypatch)
    producer = Producer(client, max_request_bytes=3000)
    for i in range(30):
        producer.send(topic, b"%04d" % i + b"x" * 996, partition=i % 3)
    producer.flush()
    sizes = [
        sum(len(p.records) for t in message.topic_data for p in t.partition_data)
        for api_key, message in sent
        if api_key == ApiKey.PRODUCE
    ]
    assert len(sizes) >= 15 and max(sizes) <= 3000, sizes
    for partition in range(3):
        tp = TopicPartition(topic, partition)
        chunks = list(read_range(client, tp, 0, 10, on_data_loss=pytest.fail))
        assert [v[:4] for c in chunks for v in c.values] == [b"%04d" % i for i in range(partition, 30, 3)]
    with pytest.raises(KafkaError, match=r"MESSAGE_TOO_LARGE: .* more than max.request.size \(3000 bytes\)"):
        producer.send(topic, b"x" * 3000, partition=0)


def test_read_range_reads_every_fetch_into_one_reused_buffer(client: KafkaClient, make_topic) -> None:
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    producer = Producer(client, batch_bytes=1000)
    for i in range(300):
        producer.send(topic, b"%03d" % i * 30, partition=0)
    producer.flush()
    chunks = list(read_range(client, tp, 0, 300, on_data_loss=pytest.fail, max_bytes=2000))
    assert len(chunks) > 10
    assert [v for c in chunks for v in c.values] == [b"%03d" % i * 30 for i in range(300)]
    connection = next(iter(client._by_address.values()))
    spare = connection._spare
    assert len(spare) > 0
    again = client.fetch(tp, 0, max_bytes=2000, reuse_buffer=True)
    assert connection._spare is spare and again.records.obj is spare
    assert client.fetch(tp, 0, max_bytes=2000).records.obj is not spare


def test_fetch_waits_for_min_bytes_up_to_max_wait(client: KafkaClient, make_topic, monkeypatch) -> None:
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    producer = Producer(client)
    producer.send(topic, b"small", partition=0)
    producer.flush()
    sent = _recording_requests(monkeypatch)
    started = time.monotonic()
    chunks = list(read_range(client, tp, 0, 1, on_data_loss=pytest.fail, min_bytes=1 << 20, max_wait_ms=800))
    assert time.monotonic() - started >= 0.8, "the broker held the fetch for max_wait_ms"
    assert [v for c in chunks for v in c.values] == [b"small"]
    fetches = [message for api_key, message in sent if api_key == ApiKey.FETCH]
    assert {(f.min_bytes, f.max_wait_ms) for f in fetches} == {(1 << 20, 800)}
