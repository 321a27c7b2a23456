"""ZkMetadataStore against a real ZooKeeper server: admin writes land in Kafka's znodes and reach a
second broker's store as events, controller writes are fenced by the controller epoch and
conditional on the partition epoch, a deposed controller's write raises ControllerMovedError."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kazoo.client import KazooClient

from odradek.controller.metadata import PartitionState
from odradek.controller.store import (
    DEFAULT_BROKER_ENTITY,
    ReplicaAssignment,
    StoredTopic,
    StoreEvent,
    StoreEventKind,
)
from odradek.controller.zk import znodes
from odradek.controller.zk.client import ControllerMovedError, KafkaZkClient
from odradek.controller.zk.store import ZkMetadataStore
from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.controller.zk.test_zk_client import SCHEDULER, on_loop


async def _store(connect: ZooKeeperConnect, broker_id: int) -> ZkMetadataStore:
    client = await KafkaZkClient.connect(
        connect, session_timeout_ms=6000, connection_timeout_ms=10000, scheduler=SCHEDULER
    )
    store = ZkMetadataStore(client, broker_id)
    await store.load()
    return store


async def _close(*stores: ZkMetadataStore) -> None:
    for store in stores:
        await store.close()
        await store.zk.close()


def _delete_controller_znode(connect: ZooKeeperConnect) -> None:
    kazoo = KazooClient(hosts=connect.hosts + connect.chroot, timeout=5.0)
    kazoo.start(timeout=10)
    try:
        kazoo.delete(znodes.CONTROLLER_PATH)
    finally:
        kazoo.stop()
        kazoo.close()


class Events:
    """The events a store delivered, awaitable."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self.seen: list[StoreEvent] = []
        self._changed = asyncio.Event()
        store.watch(self._on_event)

    def _on_event(self, event: StoreEvent) -> None:
        asyncio.get_running_loop()  # raises unless delivered on the loop
        self.seen.append(event)
        self._changed.set()

    async def wait_for(self, kind: StoreEventKind, topic: str) -> None:
        async with asyncio.timeout(10):
            while StoreEvent(kind, topic) not in self.seen:
                self._changed.clear()
                await self._changed.wait()


@on_loop
async def test_admin_writes_by_one_broker_reach_another_as_events(chroot):
    writer, reader = await _store(chroot, 1), await _store(chroot, 2)
    events = Events(reader)
    try:
        topic = StoredTopic("orders", uuid.uuid4(), {0: (1, 2)}, {"retention.ms": "1000"})
        await writer.create_topic(topic)
        assert writer.topics()["orders"] == topic
        with pytest.raises(KafkaError) as taken:
            await writer.create_topic(topic)
        assert taken.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        await events.wait_for(StoreEventKind.TOPIC_CREATED, "orders")
        assert reader.topics()["orders"] == topic

        await writer.add_partitions("orders", {1: (2, 1)})
        await events.wait_for(StoreEventKind.PARTITIONS_ADDED, "orders")
        assert reader.topics()["orders"].assignment == {0: (1, 2), 1: (2, 1)}

        await writer.set_topic_configs("orders", {"retention.ms": "5000"})
        await events.wait_for(StoreEventKind.CONFIGS_CHANGED, "orders")
        assert reader.topics()["orders"].configs == {"retention.ms": "5000"}
        changes = await writer.zk.config_changes()
        assert changes and changes[-1].startswith(znodes.CONFIG_CHANGE_PREFIX)
        assert await writer.zk.config_change(changes[-1]) == ("topics", "orders")

        await writer.request_deletion("orders")
        await events.wait_for(StoreEventKind.DELETION_REQUESTED, "orders")
        assert reader.topics()["orders"].marked_for_deletion
        assert await writer.zk.topics_marked_for_deletion() == ["orders"]
        assert events.seen.count(StoreEvent(StoreEventKind.TOPIC_CREATED, "orders")) == 1
    finally:
        await _close(writer, reader)


@on_loop
async def test_controller_writes_are_fenced_and_conditional(chroot):
    first, second = await _store(chroot, 1), await _store(chroot, 2)
    try:
        await first.create_topic(StoredTopic("t", uuid.uuid4(), {0: (1, 2)}))
        epoch = await first.elect_controller()
        assert epoch == 1 and first.controller_epoch == 1
        new = PartitionState(1, 0, (1, 2), (1, 2), epoch, 0)
        await first.write_partition_states({"t": {0: new}}, epoch)
        assert first.topics()["t"].states[0] == new
        moved = PartitionState(2, 1, (1, 2), (2,), epoch, 1)
        await first.write_partition_states({"t": {0: moved}}, epoch)
        read = await first.zk.partition_state("t", 0)
        assert read is not None and read.zk_version == 1 and (read.state.leader, read.state.isr) == (2, (2,))
        with pytest.raises(KafkaError) as stale:
            await first.write_partition_states({"t": {0: moved}}, epoch - 1)
        assert stale.value.code == ErrorCode.STALE_CONTROLLER_EPOCH

        with pytest.raises(ControllerMovedError):
            await second.elect_controller()
        await asyncio.to_thread(_delete_controller_znode, chroot)  # as first's session expiry would
        assert await second.elect_controller() == 2
        assert second.topics()["t"].states[0] == moved  # the new controller re-read every state
        with pytest.raises(ControllerMovedError):
            await first.write_partition_states({"t": {0: moved}}, epoch)
        await second.remove_topic("t", 2)
        assert "t" not in second.topics() and await second.zk.topics() == []
    finally:
        await _close(first, second)


@on_loop
async def test_a_reassignment_is_written_in_the_topic_znode_and_read_back(chroot):
    controller, other = await _store(chroot, 1), await _store(chroot, 2)
    events = Events(other)
    try:
        await controller.create_topic(StoredTopic("t", uuid.uuid4(), {0: (1, 2), 1: (2, 3)}))
        await events.wait_for(StoreEventKind.TOPIC_CREATED, "t")
        epoch = await controller.elect_controller()
        await controller.write_partition_states(
            {"t": {0: PartitionState(1, 0, (1, 2), (1, 2), epoch, 0)}}, epoch
        )
        moving = ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
        await controller.write_replica_assignments("t", {0: moving}, epoch)
        topic = controller.topics()["t"]
        assert topic.replica_assignment(0) == moving and topic.states[0].replicas == (2, 3, 1)
        znode = await controller.zk.topic_assignment("t")
        assert znode is not None and (znode.adding_replicas, znode.removing_replicas) == (
            {0: (3,)},
            {0: (1,)},
        )
        assert znode.partitions == {0: (2, 3, 1), 1: (2, 3)}

        successor = await _store(chroot, 3)  # a new controller finds it in progress
        assert successor.topics()["t"].replica_assignment(0) == moving
        await controller.write_replica_assignments("t", {0: ReplicaAssignment((2, 3))}, epoch)
        await controller.add_partitions("t", {2: (3, 1)})
        await events.wait_for(StoreEventKind.PARTITIONS_ADDED, "t")
        assert other.topics()["t"].assignment == {0: (2, 3), 1: (2, 3), 2: (3, 1)}
        assert not other.topics()["t"].adding_replicas
        with pytest.raises(KafkaError) as stale:
            await controller.write_replica_assignments("t", {0: moving}, epoch - 1)
        assert stale.value.code == ErrorCode.STALE_CONTROLLER_EPOCH
        await _close(successor)
    finally:
        await _close(controller, other)


@on_loop
async def test_a_controller_that_gives_up_its_seat_lets_another_broker_win(chroot):
    first, second = await _store(chroot, 1), await _store(chroot, 2)
    try:
        assert await first.elect_controller() == 1
        await second.give_up_seat()  # not the holder: changes nothing
        assert await second.zk.controller_id() == 1
        await first.give_up_seat()
        assert await second.zk.controller_id() is None
        assert await second.elect_controller() == 2
    finally:
        await _close(first, second)


@on_loop
async def test_broker_configs_reach_the_brokers_they_concern(chroot):
    writer, other = await _store(chroot, 1), await _store(chroot, 2)
    heard: list[str] = []
    other.watch_broker_configs(heard.append)
    try:
        await writer.set_broker_configs(DEFAULT_BROKER_ENTITY, {"log.retention.ms": "60000"})
        await writer.set_broker_configs("1", {"log.segment.bytes": "2048"})
        assert writer.broker_configs("1") == {"log.segment.bytes": "2048"}
        changes = await writer.zk.config_changes()
        assert await writer.zk.config_change(changes[-1]) == ("brokers", "1")
        assert await writer.zk.entity_configs("brokers", "<default>") == {"log.retention.ms": "60000"}
        async with asyncio.timeout(10):
            while other.broker_configs(DEFAULT_BROKER_ENTITY) != {"log.retention.ms": "60000"}:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # broker 1's own change has been seen by now, and ignored
        assert heard == [DEFAULT_BROKER_ENTITY]
        assert other.broker_configs("1") == {}
        restarted = await _store(chroot, 1)
        assert restarted.broker_configs("1") == {"log.segment.bytes": "2048"}
        await _close(restarted)
    finally:
        await _close(writer, other)


@on_loop
async def test_group_configs_reach_every_broker_and_survive_a_restart(chroot):
    writer, other = await _store(chroot, 1), await _store(chroot, 2)
    try:
        await writer.set_group_configs("a/group", {"share.auto.offset.reset": "earliest"})
        assert writer.group_configs("a/group") == {"share.auto.offset.reset": "earliest"}
        assert await writer.zk.entity_configs("groups", "a%2Fgroup") == {
            "share.auto.offset.reset": "earliest"
        }
        async with asyncio.timeout(10):
            while other.group_configs("a/group") != {"share.auto.offset.reset": "earliest"}:
                await asyncio.sleep(0.05)
        restarted = await _store(chroot, 3)
        assert restarted.group_configs("a/group") == {"share.auto.offset.reset": "earliest"}
        await writer.set_group_configs("a/group", {})
        async with asyncio.timeout(10):
            while restarted.group_configs("a/group") != {}:
                await asyncio.sleep(0.05)
        await _close(restarted)
    finally:
        await _close(writer, other)
