"""Transactions across a three-broker ZooKeeper-mode cluster: the coordinator of a transactional id
writes its markers to the partitions other brokers lead through their WriteTxnMarkers, so a
confluent-kafka transaction over every partition commits or aborts on all of them."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from tests.compat import helpers
from tests.compat.test_transactions import PARTITIONS, confluent_read, produce_txn, txn_producer, values

pytestmark = pytest.mark.slow


def test_a_transaction_spans_partitions_led_by_every_broker(cluster, unique_topic: str) -> None:
    admin = helpers.admin(cluster.bootstrap)
    created = admin.create_topics([NewTopic(unique_topic, num_partitions=PARTITIONS, replication_factor=3)])
    created[unique_topic].result(helpers.TIMEOUT_S)
    helpers.wait_for_leaders(cluster.bootstrap, unique_topic, PARTITIONS)
    leaders = {p.leader for p in admin.list_topics(unique_topic).topics[unique_topic].partitions.values()}
    assert len(leaders) == PARTITIONS  # one partition led by each broker
    producer = txn_producer(cluster.bootstrap, f"{unique_topic}-txn")
    produce_txn(producer, unique_topic, values("committed"), commit=True)
    produce_txn(producer, unique_topic, values("aborted"), commit=False)
    produce_txn(producer, unique_topic, values("again"), commit=True)
    expected = sorted(values("committed") + values("again"))
    assert confluent_read(cluster.bootstrap, unique_topic, len(expected)) == expected
