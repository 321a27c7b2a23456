"""Producer id blocks claimed in ZooKeeper: conditional writes of `/latest_producer_id_block` in Kafka's
JSON, and two brokers' managers on one chroot that never hand out the same id."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TypeVar

import pytest
from kazoo.client import KazooClient

from odradek.controller.producer_ids import ProducerIdManager, ZkProducerIdBlockSource
from odradek.controller.zk import znodes
from odradek.controller.zk.client import KafkaZkClient
from odradek.controller.zk.znodes import ProducerIdBlock, ZooKeeperConnect
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.controller.zk.test_zk_client import SCHEDULER, on_loop

T = TypeVar("T")


async def _client(connect: ZooKeeperConnect) -> KafkaZkClient:
    return await KafkaZkClient.connect(
        connect, session_timeout_ms=6000, connection_timeout_ms=10000, scheduler=SCHEDULER
    )


def _operator(connect: ZooKeeperConnect, action: Callable[[KazooClient], T]) -> T:
    """`action` done on the chroot by a client of its own, as an operator with zkCli.sh would."""
    operator = KazooClient(hosts=connect.hosts + connect.chroot, timeout=5.0)
    operator.start(timeout=10)
    try:
        return action(operator)
    finally:
        operator.stop()
        operator.close()


def _raw(connect: ZooKeeperConnect) -> bytes:
    return _operator(connect, lambda c: c.get(znodes.PRODUCER_ID_BLOCK_PATH)[0])


@on_loop
async def test_a_claim_is_conditional_on_the_version_read(chroot):
    zk = await _client(chroot)
    try:
        assert await zk.latest_producer_id_block() == (None, 0)  # the empty persistent znode
        assert await zk.conditional_update_producer_id_block(ProducerIdBlock(1, 0, 999), 0)
        assert not await zk.conditional_update_producer_id_block(ProducerIdBlock(2, 0, 999), 0)
        assert await zk.latest_producer_id_block() == (ProducerIdBlock(1, 0, 999), 1)
    finally:
        await zk.close()
    assert _raw(chroot) == b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'


@on_loop
async def test_a_missing_znode_is_created_once(chroot):
    first, second = await _client(chroot), await _client(chroot)
    try:
        await asyncio.to_thread(_operator, chroot, lambda c: c.delete(znodes.PRODUCER_ID_BLOCK_PATH))
        assert await first.latest_producer_id_block() == (None, -1)
        assert await first.conditional_update_producer_id_block(ProducerIdBlock(1, 0, 9), -1)
        assert not await second.conditional_update_producer_id_block(ProducerIdBlock(2, 0, 9), -1)
        assert await ProducerIdManager(ZkProducerIdBlockSource(second, 2), 10).generate_producer_id() == 10
    finally:
        await first.close()
        await second.close()


@on_loop
async def test_two_brokers_never_hand_out_the_same_id(chroot):
    first, second = await _client(chroot), await _client(chroot)
    managers = [ProducerIdManager(ZkProducerIdBlockSource(zk, i), 10) for i, zk in ((1, first), (2, second))]
    try:
        taken = await asyncio.gather(*(m.generate_producer_id() for _ in range(100) for m in managers))
        last, _ = await first.latest_producer_id_block()
    finally:
        await first.close()
        await second.close()
    assert sorted(taken) == list(range(200))  # no id twice, and no claimed block lost to a race
    assert last is not None and (last.block_start, last.block_end) == (190, 199)
    assert json.loads(_raw(chroot)) == {
        "version": 1,
        "broker": last.broker_id,
        "block_start": "190",
        "block_end": "199",
    }


@on_loop
async def test_an_unreadable_znode_is_never_guessed_over(chroot):
    zk = await _client(chroot)
    try:
        await asyncio.to_thread(_operator, chroot, lambda c: c.set(znodes.PRODUCER_ID_BLOCK_PATH, b"{"))
        with pytest.raises(KafkaError) as failed:
            await ProducerIdManager(ZkProducerIdBlockSource(zk, 1)).generate_producer_id()
        assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    finally:
        await zk.close()
    assert _raw(chroot) == b"{"
