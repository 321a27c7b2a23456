"""KafkaZkClient against a real ZooKeeper server: registration and broker epochs, the controller
election and its fencing, the synced read of the controller's seat and epoch, topic creation,
conditional partition state writes, watches on the loop, and how often a lost connection is dialled
again."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable

import pytest

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.zk import znodes
from odradek.controller.zk.client import BrokerIdInUseError, ControllerMovedError, KafkaZkClient
from odradek.controller.zk.znodes import (
    BrokerRegistration,
    LeaderAndIsrZNode,
    TopicAssignment,
    ZooKeeperConnect,
)
from odradek.scheduler import Scheduler
from odradek.testing.proxy import FaultProxy
from odradek.testing.zookeeper import ZooKeeperServer

SCHEDULER = Scheduler(SYSTEM_CLOCK)  # lanes only (kazoo's start and stop): no timers


def on_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


async def _client(connect: ZooKeeperConnect) -> KafkaZkClient:
    return await KafkaZkClient.connect(
        connect, session_timeout_ms=6000, connection_timeout_ms=10000, scheduler=SCHEDULER
    )


def _registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id, (("PLAINTEXT", "127.0.0.1", 9000 + broker_id),), {"PLAINTEXT": "PLAINTEXT"}
    )


@on_loop
async def test_registration_gives_a_broker_epoch_and_refuses_a_live_duplicate(chroot):
    first, second = await _client(chroot), await _client(chroot)
    try:
        epoch = await first.register_broker(_registration(1))
        with pytest.raises(BrokerIdInUseError):
            await second.register_broker(_registration(1))
        brokers = await second.live_brokers()
        assert list(brokers) == [1] and brokers[1] == (_registration(1), epoch)
        await first.close()
        assert await second.register_broker(_registration(1)) > epoch
    finally:
        await first.close()
        await second.close()


@on_loop
async def test_registration_of_this_session_is_its_own(chroot):
    """A create whose answer was lost (the connection dropped) is retried: the znode this session
    already holds is its registration, not another broker's (KAFKA-7165)."""
    client = await _client(chroot)
    try:
        epoch = await client.register_broker(_registration(1))
        assert await client.register_broker(_registration(1)) == epoch
    finally:
        await client.close()


@on_loop
async def test_registration_waits_for_another_sessions_registration_to_go(chroot):
    first, second = await _client(chroot), await _client(chroot)
    try:
        epoch = await first.register_broker(_registration(1))
        waiting = asyncio.ensure_future(second.register_broker(_registration(1), expiry_wait_s=30))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        await first.close()
        assert await asyncio.wait_for(waiting, 10) > epoch
    finally:
        await first.close()
        await second.close()


@on_loop
async def test_registration_held_past_the_wait_is_refused(chroot):
    first, second = await _client(chroot), await _client(chroot)
    try:
        await first.register_broker(_registration(1))
        started = asyncio.get_running_loop().time()
        with pytest.raises(BrokerIdInUseError):
            await second.register_broker(_registration(1), expiry_wait_s=1)
        assert asyncio.get_running_loop().time() - started >= 1
    finally:
        await first.close()
        await second.close()


@on_loop
async def test_synced_controller_reads_the_seat_and_epoch_another_session_just_wrote(chroot):
    reader, elector = await _client(chroot), await _client(chroot)
    try:
        assert await reader.synced_controller() == (None, None)
        await elector.elect_controller(3, now_ms=1)
        assert await reader.synced_controller() == (3, 1)
        await elector.close()
        await reader.elect_controller(2, now_ms=2)
        assert await reader.synced_controller() == (2, 2)
    finally:
        await reader.close()
        await elector.close()


@on_loop
async def test_election_is_won_once_and_a_deposed_controller_cannot_write(chroot):
    first, second = await _client(chroot), await _client(chroot)
    try:
        seat = await first.elect_controller(1, now_ms=1)
        assert seat.epoch == 1
        with pytest.raises(ControllerMovedError):
            await second.elect_controller(2, now_ms=2)
        assert await second.controller_id() == 1
        await first.close()
        new_seat = await second.elect_controller(2, now_ms=3)
        assert new_seat.epoch == 2
        state = LeaderAndIsrZNode(leader=2, leader_epoch=0, isr=(2,), controller_epoch=2)
        with pytest.raises(ControllerMovedError):
            await second.create_partition_states(seat, {("t", 0): state})
        assert await second.create_partition_states(new_seat, {("t", 0): state}) == {("t", 0): 0}
    finally:
        await first.close()
        await second.close()


@on_loop
async def test_topic_creation_and_conditional_state_updates(chroot):
    client = await _client(chroot)
    try:
        seat = await client.elect_controller(1, now_ms=1)
        topic_id = uuid.uuid4()
        assignment = TopicAssignment({0: (1, 2), 1: (2, 1)}, topic_id)
        await client.create_topic("events", assignment, {"retention.ms": "1000"})
        assert await client.topics() == ["events"]
        assert await client.topic_assignment("events") == assignment
        assert await client.topic_configs("events") == {"retention.ms": "1000"}
        states = {
            ("events", p): LeaderAndIsrZNode(r[0], 0, r, seat.epoch) for p, r in assignment.partitions.items()
        }
        assert await client.create_partition_states(seat, states) == {("events", 0): 0, ("events", 1): 0}
        assert await client.create_partition_states(seat, states) == {
            ("events", 0): None,
            ("events", 1): None,
        }
        shrunk = LeaderAndIsrZNode(1, 1, (1,), seat.epoch)
        assert await client.update_partition_states(seat, {("events", 0): (shrunk, 0)}) == {("events", 0): 1}
        assert await client.update_partition_states(seat, {("events", 0): (shrunk, 0)}) == {
            ("events", 0): None
        }
        read = await client.partition_state("events", 0)
        assert read is not None and read.state == shrunk and read.zk_version == 1
        await client.delete_topic_znodes(seat, "events", assignment.partitions)
        assert await client.topics() == [] and await client.partition_state("events", 0) is None
    finally:
        await client.close()


@on_loop
async def test_watches_fire_on_the_event_loop(chroot):
    watcher_client, broker = await _client(chroot), await _client(chroot)
    loop = asyncio.get_running_loop()
    fired: asyncio.Future[bool] = loop.create_future()

    def on_change() -> None:
        asyncio.get_running_loop()  # raises unless called on the loop
        fired.set_result(True)

    try:
        assert await watcher_client.live_brokers(on_change) == {}
        await broker.register_broker(_registration(3))
        assert await asyncio.wait_for(fired, 10)
        assert list(await watcher_client.live_brokers()) == [3]
    finally:
        await watcher_client.close()
        await broker.close()


@on_loop
async def test_cluster_id_is_written_once(chroot):
    client = await _client(chroot)
    try:
        assert await client.get_or_create_cluster_id("first") == "first"
        assert await client.get_or_create_cluster_id("second") == "first"
        assert znodes.decode_cluster_id((await client.get(znodes.CLUSTER_ID_PATH))[0]) == "first"
    finally:
        await client.close()


@on_loop
async def test_a_lost_connection_is_dialled_again_at_least_every_one_and_a_half_seconds(
    zookeeper: ZooKeeperServer, chroot: ZooKeeperConnect
) -> None:
    """Kazoo's default backoff doubles: 6 s into an outage it would dial about once in 6 s, and
    once ZooKeeper is back, up to as long again before the broker notices."""
    with FaultProxy(zookeeper.host, zookeeper.port) as link:
        client = await _client(ZooKeeperConnect(link.address, chroot.chroot))
        try:
            link.cut()
            await asyncio.sleep(2)
            dialled = link.refused
            await asyncio.sleep(6)
            assert link.refused - dialled >= 4
        finally:
            link.heal()
            await client.close()
