"""The controller APIs from the wire, in-process: LeaderAndIsr, UpdateMetadata and StopReplica frames
through the dispatcher to a started broker, fenced by controller epoch and broker epoch, and refused
on a single node.

The broker runs single-node (its own local controller makes it leader of `orders`); a dispatcher
with the ZooKeeper-mode registry stands for a ZooKeeper-mode broker's listener, so the frames take
the same path as from a remote controller and reach the same control-plane functions.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.controller.channel import (
    ControllerIdentity,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header, response_header_version
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.handlers import registry
from odradek.server.kafka_server import KafkaServer
from odradek.server.socket_server import ClientInfo, CloseConnection
from tests.server.raw_client import request_frame

CLIENT = ClientInfo("127.0.0.1", 5555, 1)
ZK_APIS = {
    ApiKey.LEADER_AND_ISR: (2, 7),
    ApiKey.UPDATE_METADATA: (5, 8),
    ApiKey.STOP_REPLICA: (3, 4),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
}
OTHER_BROKER = 7


def make_config(data: Path, **overrides: str) -> KafkaConfig:
    return KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data), **overrides})


async def call(dispatcher: Dispatcher, api_key: int, version: int, request: Any) -> Any:
    chunks = await dispatcher(request_frame(api_key, version, request, 11)[4:], CLIENT)
    assert chunks is not None
    data = b"".join(bytes(chunk) for chunk in chunks)
    correlation_id, offset = parse_response_header(data, response_header_version(api_key, version))
    assert correlation_id == 11
    return decode_response(api_key, version, memoryview(data)[offset:])


Scenario = Callable[[KafkaServer, Dispatcher], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario) -> None:
    """Start a single-node broker leading `orders`-0, then run `scenario` with a ZooKeeper-mode
    dispatcher in front of it."""

    async def main() -> None:
        broker = KafkaServer(make_config(tmp_path))
        await broker.start()
        try:
            topic = await broker.admin.create_topic("orders", 1, 1, {})
            assert await broker.wait_for_leaders("orders", topic.assignment, 10)
            await scenario(broker, Dispatcher(broker, handlers=registry(zookeeper_mode=True)))
        finally:
            await broker.shutdown()

    asyncio.run(main())


def orders(broker: KafkaServer, **changes: Any) -> dict[str, tuple[uuid.UUID, dict[int, PartitionState]]]:
    """`orders`-0's current state with `changes`, leader epoch one higher."""
    topic = broker.metadata_cache.topic("orders")
    assert topic is not None
    state = topic.partitions[0]
    fields = {
        "leader": state.leader,
        "leader_epoch": state.leader_epoch + 1,
        "replicas": state.replicas,
        "isr": state.isr,
        "controller_epoch": state.controller_epoch,
        "partition_epoch": state.partition_epoch + 1,
        **changes,
    }
    return {"orders": (topic.topic_id, {0: PartitionState(**fields)})}


def other_broker() -> BrokerInfo:
    return BrokerInfo(OTHER_BROKER, (Endpoint("PLAINTEXT", "127.0.0.1", 1),))


def identity(controller_epoch: int, broker_epoch: int = -1) -> ControllerIdentity:
    return ControllerIdentity(OTHER_BROKER, controller_epoch, broker_epoch)


def takeover(broker: KafkaServer, api_key: int, sender: ControllerIdentity) -> Any:
    """A request of `api_key` that would move `orders`-0 away from this broker if accepted."""
    if api_key == ApiKey.LEADER_AND_ISR:
        return leader_and_isr_request(sender, orders(broker, leader=OTHER_BROKER), [other_broker()])
    if api_key == ApiKey.UPDATE_METADATA:
        return update_metadata_request(sender, orders(broker, leader=OTHER_BROKER), [other_broker()])
    return stop_replica_request(sender, {"orders": {0: -1}}, delete=True)


def zookeeper_names(broker: KafkaServer, controller_id: int, controller_epoch: int) -> None:
    """Stand for ZooKeeper naming `controller_id` at `controller_epoch` as the controller (this broker
    runs single-node, with no ZooKeeper to ask)."""

    async def registered() -> tuple[int | None, int | None]:
        return controller_id, controller_epoch

    broker.control_plane.registered_controller = registered


def leader_of_orders(broker: KafkaServer) -> tuple[int, int]:
    partition = broker.replica_manager.partition("orders", 0)
    assert partition is not None
    return partition.leader_id, partition.leader_epoch


def cached_leader(broker: KafkaServer) -> int:
    state = broker.metadata_cache.partition("orders", 0)
    assert state is not None
    return state.leader


# -- fencing by controller epoch ---------------------------------------------------------------------


def test_leader_and_isr_from_a_stale_controller_epoch_changes_nothing(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        before = leader_of_orders(broker)
        stale = identity(broker.controller.epoch - 1)
        request = leader_and_isr_request(stale, orders(broker, leader=OTHER_BROKER), [other_broker()])
        response = await call(zk, ApiKey.LEADER_AND_ISR, 7, request)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert [e.error_code for t in response.topics for e in t.partition_errors] == [
            ErrorCode.STALE_CONTROLLER_EPOCH
        ]
        assert leader_of_orders(broker) == before and broker.replica_manager.pending_count() == 0

    run(tmp_path, scenario)


def test_update_metadata_from_a_stale_controller_epoch_changes_nothing(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        stale = identity(broker.controller.epoch - 1)
        request = update_metadata_request(stale, orders(broker, leader=OTHER_BROKER), [other_broker()])
        response = await call(zk, ApiKey.UPDATE_METADATA, 8, request)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert cached_leader(broker) == broker.broker_id
        assert [b.broker_id for b in broker.metadata_cache.brokers()] == [broker.broker_id]

    run(tmp_path, scenario)


def test_stop_replica_from_a_stale_controller_epoch_stops_nothing(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        stale = identity(broker.controller.epoch - 1)
        request = stop_replica_request(stale, {"orders": {0: -1}}, delete=True)
        response = await call(zk, ApiKey.STOP_REPLICA, 4, request)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert [e.error_code for e in response.partition_errors] == [ErrorCode.STALE_CONTROLLER_EPOCH]
        assert broker.replica_manager.partition("orders", 0) is not None

    run(tmp_path, scenario)


def test_a_newer_controller_epoch_from_update_metadata_fences_an_older_leader_and_isr(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        epoch = broker.controller.epoch
        zookeeper_names(broker, OTHER_BROKER, epoch + 1)
        newer = update_metadata_request(identity(epoch + 1), orders(broker), [other_broker()])
        assert (await call(zk, ApiKey.UPDATE_METADATA, 8, newer)).error_code == ErrorCode.NONE
        before = leader_of_orders(broker)
        older = leader_and_isr_request(identity(epoch), orders(broker, leader=OTHER_BROKER), [])
        response = await call(zk, ApiKey.LEADER_AND_ISR, 7, older)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert leader_of_orders(broker) == before

    run(tmp_path, scenario)


# -- fencing by broker epoch -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.LEADER_AND_ISR, 7), (ApiKey.UPDATE_METADATA, 8), (ApiKey.STOP_REPLICA, 4)],
)
def test_a_stale_broker_epoch_is_refused_and_changes_nothing(tmp_path, api_key, version):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        broker.broker_epoch = 100
        sender = identity(broker.controller.epoch, broker_epoch=99)
        before = leader_of_orders(broker)
        request = takeover(broker, api_key, sender)
        response = await call(zk, api_key, version, request)
        assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert leader_of_orders(broker) == before
        assert cached_leader(broker) == broker.broker_id

    run(tmp_path, scenario)


def test_broker_epoch_minus_one_or_current_is_accepted(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        broker.broker_epoch = 100
        epoch = broker.controller.epoch
        unchecked = update_metadata_request(identity(epoch, -1), orders(broker), [other_broker()])
        assert (await call(zk, ApiKey.UPDATE_METADATA, 8, unchecked)).error_code == ErrorCode.NONE
        current = update_metadata_request(
            identity(epoch, 100), orders(broker, leader=OTHER_BROKER), [other_broker()]
        )
        assert (await call(zk, ApiKey.UPDATE_METADATA, 8, current)).error_code == ErrorCode.NONE
        assert cached_leader(broker) == OTHER_BROKER

    run(tmp_path, scenario)


# -- accepted requests and versions ------------------------------------------------------------------


def test_leader_and_isr_v4_from_the_wire_makes_a_follower_and_answers_flat_partition_errors(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        _, epoch_before = leader_of_orders(broker)
        state = orders(broker, leader=OTHER_BROKER, replicas=(broker.broker_id, OTHER_BROKER))
        request = leader_and_isr_request(identity(broker.controller.epoch), state, [other_broker()])
        response = await call(zk, ApiKey.LEADER_AND_ISR, 4, request)
        assert response.error_code == ErrorCode.NONE
        assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [
            ("orders", 0, ErrorCode.NONE)
        ]

        def followed() -> bool:
            return leader_of_orders(broker) == (OTHER_BROKER, epoch_before + 1)

        for _ in range(200):
            if followed():
                break
            await asyncio.sleep(0.01)
        assert followed()
        assert not broker.replica_manager.serves_as_leader("orders", 0)

    run(tmp_path, scenario)


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.LEADER_AND_ISR, 1), (ApiKey.STOP_REPLICA, 2)])
def test_versions_before_the_topic_grouped_forms_are_unsupported(tmp_path, api_key, version):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        before = leader_of_orders(broker)
        sender = identity(broker.controller.epoch)
        request = takeover(broker, api_key, sender)
        response = await call(zk, api_key, version, request)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert leader_of_orders(broker) == before

    run(tmp_path, scenario)


# -- single-node mode --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.LEADER_AND_ISR, 7), (ApiKey.UPDATE_METADATA, 8), (ApiKey.STOP_REPLICA, 4)],
)
def test_a_single_node_broker_closes_the_connection_of_a_controller_request(tmp_path, api_key, version):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        single = Dispatcher(broker)
        before = leader_of_orders(broker)
        sender = identity(broker.controller.epoch + 1)
        request = takeover(broker, api_key, sender)
        with pytest.raises(CloseConnection):
            await single(request_frame(api_key, version, request, 3)[4:], CLIENT)
        assert leader_of_orders(broker) == before
        assert cached_leader(broker) == broker.broker_id

    run(tmp_path, scenario)


def test_api_versions_advertises_the_controller_apis_only_with_zookeeper_connect(tmp_path):
    async def scenario(broker: KafkaServer, zk: Dispatcher) -> None:
        request = ApiVersionsRequest(client_software_name="tests", client_software_version="1")
        single = await call(Dispatcher(broker), ApiKey.API_VERSIONS, 3, request)
        single_keys = {k.api_key for k in single.api_keys}
        assert not single_keys & set(ZK_APIS)
        broker.config = make_config(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181"})
        clustered = await call(Dispatcher(broker), ApiKey.API_VERSIONS, 3, request)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in clustered.api_keys}
        assert {key: ranges[key] for key in ZK_APIS} == ZK_APIS
        assert set(ranges) == single_keys | set(ZK_APIS)

    run(tmp_path, scenario)
