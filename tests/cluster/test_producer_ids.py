"""Producer ids across a ZooKeeper-mode cluster: three `odradek serve` processes each claim their own
block of `/latest_producer_id_block`, so InitProducerId never answers two brokers' producers with
the same id, and the znode holds Kafka's JSON."""

from __future__ import annotations

import asyncio

import pytest

from odradek.controller.zk import znodes
from odradek.network_client import NodeConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.testing.broker import BrokerProcess

pytestmark = pytest.mark.slow


def init_producer_ids(process: BrokerProcess, count: int) -> list[int]:
    """`count` InitProducerId v4 requests (idempotent producers) sent to `process` itself."""

    async def send() -> list[int]:
        connection = NodeConnection(process.broker_id, process.host, process.port, client_id="cluster-test")
        await connection.connect()
        try:
            ids = []
            for _ in range(count):
                request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
                response = await connection.send(ApiKey.INIT_PRODUCER_ID, 4, request)
                assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
                ids.append(response.producer_id)
            return ids
        finally:
            await connection.close()

    return asyncio.run(send())


def test_each_broker_claims_its_own_block_in_zookeeper(cluster):
    handed_out = {broker_id: init_producer_ids(process, 2) for broker_id, process in cluster.brokers.items()}
    assert handed_out == {1: [0, 1], 2: [1000, 1001], 3: [2000, 2001]}
    raw = cluster.zk.get(znodes.PRODUCER_ID_BLOCK_PATH)[0]
    assert raw == b'{"version":1,"broker":3,"block_start":"2000","block_end":"2999"}'
    again = init_producer_ids(cluster.brokers[1], 1)
    assert again == [2]  # broker 1 still has the rest of its block
