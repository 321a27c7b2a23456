"""Transactions across a three-broker ZooKeeper-mode cluster: the coordinator of a transactional id
writes its markers to the partitions other brokers lead through their WriteTxnMarkers, so a
confluent-kafka transaction over every partition commits or aborts on all of them; with
`__transaction_state` replicated, a SIGKILL of the coordinator moves it to another broker, which
loads the ids and completes or aborts each transaction whole. A partition leader that is not the
id's coordinator verifies a transactional produce with that coordinator (AddPartitionsToTxn v4
verify_only, KIP-890 part 1)."""

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
from odradek.testing.cluster import eventually
from tests.compat import helpers
from tests.compat.test_transactions import PARTITIONS, confluent_read, produce_txn, txn_producer, values
from tests.server.raw_client import RawClient
from tests.server.test_produce import produce
from tests.server.test_txn_apis import add, init, txn_batch

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


def test_a_leader_verifies_a_transactional_produce_with_the_coordinator_on_another_broker(
    cluster, unique_topic: str
) -> None:
    admin = helpers.admin(cluster.bootstrap)
    created = admin.create_topics([NewTopic(unique_topic, num_partitions=PARTITIONS, replication_factor=3)])
    created[unique_topic].result(helpers.TIMEOUT_S)
    helpers.wait_for_leaders(cluster.bootstrap, unique_topic, PARTITIONS)
    described = admin.list_topics(unique_topic).topics[unique_topic].partitions
    leaders = {index: p.leader for index, p in described.items()}
    tid = f"{unique_topic}-verified"
    coordinator = transaction_coordinator(cluster, tid)
    partition, leader = next((index, b) for index, b in sorted(leaders.items()) if b != coordinator)
    to_coordinator = RawClient(cluster.brokers[coordinator].bootstrap)
    to_leader = RawClient(cluster.brokers[leader].bootstrap)
    try:
        started = eventually(lambda: _served(init(to_coordinator, tid)), helpers.TIMEOUT_S, "InitProducerId")
        assert started.error_code == ErrorCode.NONE
        pid, epoch = started.producer_id, started.producer_epoch
        other = next(index for index in leaders if index != partition)
        assert add(to_coordinator, tid, pid, epoch, unique_topic, (other,)) == [ErrorCode.NONE]

        def produce_to_leader(sequence: int, version: int, producer_epoch: int = epoch):
            """Produce until the leader's metadata names the coordinator (NOT_ENOUGH_REPLICAS meanwhile)."""
            deadline = time.monotonic() + helpers.TIMEOUT_S
            while True:
                answer = produce(
                    to_leader,
                    unique_topic,
                    txn_batch(pid, producer_epoch, sequence),
                    transactional_id=tid,
                    partition=partition,
                    version=version,
                )
                if answer.error_code != ErrorCode.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
                    return answer
                time.sleep(0.1)

        # Not added: the leader asks the coordinator, which answers that the partition is not in the
        # transaction; nothing is written.
        refused = produce_to_leader(0, version=10)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_TXN_STATE,
            "Partition was not added to the transaction",
        )
        assert produce_to_leader(0, version=11).error_code == ErrorCode.TRANSACTION_ABORTABLE
        assert produce_to_leader(0, version=10, producer_epoch=epoch - 1).error_code == (
            ErrorCode.INVALID_PRODUCER_EPOCH
        )
        # Added: the same produce is verified and written.
        assert add(to_coordinator, tid, pid, epoch, unique_topic, (partition,)) == [ErrorCode.NONE]
        accepted = produce_to_leader(0, version=10)
        assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)
    finally:
        to_coordinator.close()
        to_leader.close()


def _served(response):
    """`response` unless the coordinator is not serving the id's partition yet (FindCoordinator, asked
    of another broker, names the leader before that leader has loaded it): None, to ask again, as a
    client does on these retriable errors."""
    retriable = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return None if response.error_code in retriable else response
