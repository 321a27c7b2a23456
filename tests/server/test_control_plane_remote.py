"""The whole remote path in one process: a RemoteChannel sends LeaderAndIsr v7, UpdateMetadata v8 and
StopReplica v4 over TCP to a listener whose dispatcher serves the ZooKeeper-mode registry, in front
of a started broker; the broker's replica manager and metadata cache take them, and the encoded
responses come back decoded. (A single-node broker's own listeners refuse these requests, so the
ZooKeeper-mode listener is bound by the test, and a stand-in answers for ZooKeeper that the sender
is the controller at its newer epoch.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.channel import (
    ControllerIdentity,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.controller.remote_channel import ChannelSettings, RemoteChannel
from odradek.protocol.errors import ErrorCode
from odradek.scheduler import Scheduler
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.handlers import registry
from odradek.server.kafka_server import KafkaServer
from odradek.server.socket_server import SocketServer

OTHER_BROKER = 7


async def wait_for(condition, timeout_s: float = 5.0) -> bool:
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def registered(sender: ControllerIdentity):
    """Stands for ZooKeeper naming `sender` as the controller (the broker runs single-node)."""

    async def read() -> tuple[int | None, int | None]:
        return sender.controller_id, sender.controller_epoch

    return read


def leader_in_replica_manager(broker: KafkaServer) -> int | None:
    partition = broker.replica_manager.partition("orders", 0)
    return None if partition is None else partition.leader_id


def test_remote_channel_drives_a_broker_through_the_wire_handlers(tmp_path: Path) -> None:
    async def main() -> None:
        broker = KafkaServer(KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}))
        await broker.start()
        server = SocketServer(
            Dispatcher(broker, handlers=registry(zookeeper_mode=True)), Scheduler(SYSTEM_CLOCK)
        )
        channel = RemoteChannel(OTHER_BROKER, ChannelSettings(request_timeout_ms=10_000))
        try:
            created = await broker.admin.create_topic("orders", 1, 1, {})
            assert await broker.wait_for_leaders("orders", created.assignment, 10)
            _, port = await server.bind("PLAINTEXT", "127.0.0.1", 0)
            server.listen()
            me = broker.broker_id
            await channel.add_broker(BrokerInfo(me, (Endpoint("PLAINTEXT", "127.0.0.1", port),)))

            topic = broker.metadata_cache.topic("orders")
            assert topic is not None
            current = topic.partitions[0]
            sender = ControllerIdentity(OTHER_BROKER, broker.controller.epoch + 1)
            broker.control_plane.registered_controller = registered(sender)
            follower = PartitionState(
                OTHER_BROKER,
                current.leader_epoch + 1,
                (me, OTHER_BROKER),
                (OTHER_BROKER, me),
                sender.controller_epoch,
                current.partition_epoch + 1,
            )
            states = {"orders": (topic.topic_id, {0: follower})}
            other = BrokerInfo(OTHER_BROKER, (Endpoint("PLAINTEXT", "127.0.0.1", 1),))

            response = await channel.leader_and_isr(me, leader_and_isr_request(sender, states, [other]))
            assert response.error_code == ErrorCode.NONE
            assert [(t.topic_id, [e.error_code for e in t.partition_errors]) for t in response.topics] == [
                (topic.topic_id, [ErrorCode.NONE])
            ]
            assert await wait_for(lambda: leader_in_replica_manager(broker) == OTHER_BROKER)

            metadata = await channel.update_metadata(me, update_metadata_request(sender, states, [other]))
            assert metadata.error_code == ErrorCode.NONE
            state = broker.metadata_cache.partition("orders", 0)
            assert state is not None and state.leader == OTHER_BROKER
            assert {b.broker_id for b in broker.metadata_cache.brokers()} == {OTHER_BROKER}

            stale = ControllerIdentity(OTHER_BROKER, broker.controller.epoch)
            refused = await channel.stop_replica(me, stop_replica_request(stale, {"orders": {0: -1}}, True))
            assert refused.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
            assert broker.replica_manager.partition("orders", 0) is not None

            stop = stop_replica_request(sender, {"orders": {0: follower.leader_epoch + 1}}, delete=True)
            stopped = await channel.stop_replica(me, stop)
            assert stopped.error_code == ErrorCode.NONE
            assert [(e.topic_name, e.error_code) for e in stopped.partition_errors] == [
                ("orders", ErrorCode.NONE)
            ]
            assert await wait_for(lambda: broker.replica_manager.partition("orders", 0) is None)
        finally:
            await channel.close()
            server.close()
            await server.drain(5)
            await broker.shutdown()

    asyncio.run(main())
