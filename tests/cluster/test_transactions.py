"""Transactions across a three-broker ZooKeeper-mode cluster: the coordinator of a transactional id
writes its markers to the partitions other brokers lead through their WriteTxnMarkers, so a
confluent-kafka transaction over every partition commits or aborts on all of them; with
`__transaction_state` replicated, a SIGKILL of the coordinator moves it to another broker, which
loads the ids and completes or aborts each transaction whole."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from odradek.network_client import NodeConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest
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


def transaction_coordinator(cluster, transactional_id: str, via: int = 1) -> int:
    """The broker id FindCoordinator names for `transactional_id` (asked of broker `via`)."""

    async def ask() -> int:
        process = cluster.brokers[via]
        connection = NodeConnection(via, process.host, process.port, client_id="cluster-test")
        await connection.connect()
        try:
            request = FindCoordinatorRequest(key=transactional_id, key_type=1)
            response = await connection.send(ApiKey.FIND_COORDINATOR, 3, request)
            assert response.error_code == ErrorCode.NONE
            return response.node_id
        finally:
            await connection.close()

    return asyncio.run(ask())


def test_transactions_survive_a_kill_of_their_coordinator(start_cluster, unique_topic: str) -> None:
    cluster = start_cluster(**{"transaction.state.log.replication.factor": 3})
    admin = helpers.admin(cluster.bootstrap)
    created = admin.create_topics([NewTopic(unique_topic, num_partitions=PARTITIONS, replication_factor=3)])
    created[unique_topic].result(helpers.TIMEOUT_S)
    helpers.wait_for_leaders(cluster.bootstrap, unique_topic, PARTITIONS)
    transactional_id = f"{unique_topic}-txn"
    producer = txn_producer(cluster.bootstrap, transactional_id, **{"transaction.timeout.ms": 10_000})
    coordinator = transaction_coordinator(cluster, transactional_id)
    killer = threading.Timer(0.5, cluster.brokers[coordinator].kill)
    killer.start()
    committed = 0
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            produce_txn(producer, unique_topic, values(f"t{committed}"), commit=True)
            committed += 1
    except KafkaException:
        pass
    killer.join()
    survivor = next(broker_id for broker_id in cluster.brokers if broker_id != coordinator)
    assert transaction_coordinator(cluster, transactional_id, survivor) != coordinator
    seen = confluent_read(cluster.bootstrap, unique_topic, committed * 6, settle_s=2.0)
    by_txn: dict[str, int] = {}
    for value in seen:
        txn = value.decode().split("-")[0]
        by_txn[txn] = by_txn.get(txn, 0) + 1
    assert all(count == 6 for count in by_txn.values()), by_txn
    assert len(by_txn) >= committed > 0
