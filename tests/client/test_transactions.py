"""The client's transactional producer against a real broker process: a committed transaction is
read under read_committed, an aborted one is not, a newer producer of the same transactional id
fences the older one and aborts its open transaction, offsets sent with a transaction are
committed with it (and only then), and a transaction left open is ended from its ids by another client."""

from __future__ import annotations

import time

import pytest

from odradek.client import KafkaClient, TopicPartition
from odradek.client.transactions import (
    ProducerFencedError,
    TransactionalProducer,
    committed_offsets,
    end_transaction,
)
from tests.conftest import topic_name
from tests.spark.helpers import consume_committed


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    return [r.value for r in consume_committed(bootstrap, topic, partitions)]


@pytest.fixture
def txn_id(request: pytest.FixtureRequest) -> str:
    return topic_name(f"txn-{request.node.name}")


def test_committed_records_are_read_and_aborted_ones_are_not(bootstrap, client, make_topic, txn_id) -> None:
    topic = make_topic(2)
    producer = TransactionalProducer(client, txn_id)
    producer.init_transactions()
    producer.begin()
    for i in range(10):
        producer.send(topic, b"kept-%d" % i, partition=i % 2)
    producer.commit()
    producer.begin()
    for i in range(10):
        producer.send(topic, b"dropped-%d" % i, partition=i % 2)
    producer.flush()
    producer.abort()
    producer.begin()
    producer.send(topic, b"last", partition=0)
    producer.commit()

    values = read_committed(bootstrap, topic, 2)
    assert sorted(values) == sorted([b"kept-%d" % i for i in range(10)] + [b"last"])
    # The log holds the aborted records too, and one marker per transaction per partition in it.
    ends = client.list_offsets({TopicPartition(topic, p): -1 for p in range(2)})
    assert ends == {TopicPartition(topic, 0): 5 + 5 + 1 + 3, TopicPartition(topic, 1): 5 + 5 + 2}


def test_an_open_transaction_holds_back_read_committed(bootstrap, client, make_topic, txn_id) -> None:
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    producer = TransactionalProducer(client, txn_id)
    producer.init_transactions()
    producer.begin()
    producer.send(topic, b"pending", partition=0)
    producer.flush()
    with KafkaClient(bootstrap, read_committed=True) as committed:
        assert committed.list_offsets({tp: -1}) == {tp: 0}  # the last stable offset
        assert client.list_offsets({tp: -1}) == {tp: 1}
        producer.commit()
        deadline = time.monotonic() + 20
        while committed.list_offsets({tp: -1})[tp] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert read_committed(bootstrap, topic, 1) == [b"pending"]


def test_a_newer_producer_fences_the_older_and_aborts_its_transaction(
    bootstrap, client, make_topic, txn_id
) -> None:
    topic = make_topic(1)
    zombie = TransactionalProducer(client, txn_id)
    zombie.init_transactions()
    zombie.begin()
    zombie.send(topic, b"zombie", partition=0)
    zombie.flush()

    with KafkaClient(bootstrap) as other:
        successor = TransactionalProducer(other, txn_id)
        successor.init_transactions()
        assert (successor.producer_id, successor.producer_epoch) == (
            zombie.producer_id,
            zombie.producer_epoch + 2,  # one bump aborting the open transaction, one for the new producer
        )
        with pytest.raises(ProducerFencedError, match="fenced"):
            zombie.send(topic, b"late", partition=0)
            zombie.commit()
        with pytest.raises(ProducerFencedError):
            zombie.begin()
        successor.begin()
        successor.send(topic, b"successor", partition=0)
        successor.commit()

    assert read_committed(bootstrap, topic, 1) == [b"successor"]


def test_offsets_are_committed_with_the_transaction_only(bootstrap, client, make_topic, txn_id) -> None:
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    group = f"{txn_id}-group"
    producer = TransactionalProducer(client, txn_id)
    producer.init_transactions()

    producer.begin()
    producer.send(topic, b"a", partition=0)
    producer.send_offsets(group, {tp: (7, "seven")})
    producer.abort()
    assert committed_offsets(client, group) == {}

    producer.begin()
    producer.send(topic, b"b", partition=0)
    producer.send_offsets(group, {tp: (9, "nine")})
    producer.commit()
    found = committed_offsets(client, group)
    assert {t: (c.offset, c.metadata) for t, c in found.items()} == {tp: (9, "nine")}
    assert read_committed(bootstrap, topic, 1) == [b"b"]


def test_a_transaction_with_nothing_in_it_ends_without_the_coordinator(client, txn_id) -> None:
    producer = TransactionalProducer(client, txn_id)
    producer.init_transactions()
    producer.begin()
    producer.commit()
    producer.begin()
    producer.abort()
    with pytest.raises(RuntimeError, match="begin"):
        producer.commit()


def test_a_transaction_left_open_is_ended_elsewhere_from_its_ids(
    bootstrap, client, make_topic, txn_id
) -> None:
    topic = make_topic(1)
    ids = []
    for value in (b"committed", b"aborted"):
        producer = TransactionalProducer(client, f"{txn_id}-{value.decode()}")
        producer.init_transactions()
        producer.begin()
        producer.send(topic, value, partition=0)
        producer.flush()
        ids.append((producer.transactional_id, producer.producer_id, producer.producer_epoch))
    with KafkaClient(bootstrap) as driver:
        end_transaction(driver, *ids[0], commit=True)
        end_transaction(driver, *ids[0], commit=True)  # a retry of a completed commit
        end_transaction(driver, *ids[1], commit=False)
        with pytest.raises(ProducerFencedError):
            end_transaction(driver, ids[0][0], ids[0][1], ids[0][2] - 1, commit=True)
    assert read_committed(bootstrap, topic, 1) == [b"committed"]
