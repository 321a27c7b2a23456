"""The local metadata store, the admin manager and the controller, in-process with a recording broker:
persistence, restart elections, validation, the requests the controller sends, deletion, fencing."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.admin import AdminManager
from odradek.controller.channel import LocalChannel
from odradek.controller.controller import Controller, known_brokers
from odradek.controller.local import METADATA_FILE, LocalMetadataStore
from odradek.controller.meta_properties import (
    MetaPropertiesError,
    ensure_meta_properties,
    new_cluster_id,
    read_meta_properties,
)
from odradek.controller.metadata import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    BrokerInfo,
    Endpoint,
    PartitionState,
    validate_topic_name,
)
from odradek.controller.store import StoredTopic
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest
from odradek.scheduler import Scheduler
from odradek.server.metadata_cache import MetadataCache

SCHEDULER = Scheduler(SYSTEM_CLOCK)  # lanes only: these tests register no timers

BROKER = BrokerInfo(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))


class RecordingBroker:
    """A broker control plane that records every request and keeps a real metadata cache."""

    def __init__(self) -> None:
        self.requests: list[object] = []
        self.cache = MetadataCache(0)

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        self.requests.append(request)
        return LeaderAndIsrResponse()

    def handle_update_metadata(self, request: UpdateMetadataRequest):
        self.requests.append(request)
        return self.cache.update_metadata(request)

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        self.requests.append(request)
        return StopReplicaResponse()

    def kinds(self) -> list[str]:
        return [type(r).__name__.removesuffix("Request") for r in self.requests]


class Node:
    """Store, admin manager and controller of one node over `path`."""

    def __init__(self, path: Path, max_broker_partitions: int = 1000) -> None:
        self.store = LocalMetadataStore(path, SCHEDULER)
        self.store.load()
        self.broker = RecordingBroker()
        self.admin = AdminManager(self.store, lambda: [BROKER], max_broker_partitions)
        self.controller = Controller(0, self.store, LocalChannel(0, self.broker), scheduler=SCHEDULER)

    async def start(self) -> Node:
        await self.controller.startup(known_brokers([BROKER]))
        return self

    async def settle(self) -> None:
        """Wait until the controller handled every store event so far."""
        await self.controller.idle()

    async def stop(self) -> None:
        await self.controller.shutdown()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def error_code(awaitable: Awaitable[object]) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        await awaitable
    return info.value.code


def test_new_topic_is_stored_then_brought_online_with_leader_and_isr_before_update_metadata(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        node.broker.requests.clear()
        created = await node.admin.create_topic("orders", 3, 1, {"retention.ms": "1000"})
        assert node.store.topics()["orders"].states == {}  # the admin part is durable first
        await node.settle()
        assert node.broker.kinds() == ["LeaderAndIsr", "UpdateMetadata"]
        leader_and_isr = node.broker.requests[0]
        assert (leader_and_isr.controller_id, leader_and_isr.controller_epoch) == (0, 1)
        [topic_state] = leader_and_isr.topic_states
        assert topic_state.topic_id == created.topic_id
        assert [(p.leader, p.leader_epoch, p.isr, p.is_new) for p in topic_state.partition_states] == [
            (0, 0, [0], True)
        ] * 3
        cached = node.broker.cache.topic("orders")
        assert cached is not None and cached.topic_id == created.topic_id and len(cached.partitions) == 3
        await node.stop()

    run(scenario)


def test_restart_elects_again_with_new_leader_and_controller_epochs(tmp_path):
    async def scenario() -> None:
        first = await Node(tmp_path).start()
        created = await first.admin.create_topic("orders", 2, 1, {})
        await first.settle()
        before = first.store.topics()["orders"].states[1]
        await first.stop()

        second = await Node(tmp_path).start()
        after = second.store.topics()["orders"]
        assert after.topic_id == created.topic_id
        assert second.store.controller_epoch == first.store.controller_epoch + 1
        assert after.states[1].leader_epoch == before.leader_epoch + 1
        assert after.states[1].partition_epoch == before.partition_epoch + 1
        assert second.broker.kinds() == ["LeaderAndIsr", "UpdateMetadata"]
        assert second.broker.requests[0].controller_epoch == second.store.controller_epoch
        await second.stop()

    run(scenario)


def test_a_topic_stored_without_state_is_brought_online_at_startup(tmp_path):
    async def scenario() -> None:
        store = LocalMetadataStore(tmp_path, SCHEDULER)
        await store.create_topic(StoredTopic("half", uuid.uuid4(), {0: (0,)}))  # crash before the state
        node = await Node(tmp_path).start()
        assert node.store.topics()["half"].states[0].leader == 0
        assert node.broker.cache.topic("half") is not None
        await node.stop()

    run(scenario)


def test_file_is_json_and_old_format_files_read(tmp_path):
    old = {
        "version": 1,
        "controller_epoch": 4,
        "topics": {
            "t": {
                "topic_id": str(uuid.uuid4()),
                "configs": {},
                "partitions": {
                    "0": {
                        "leader": 0,
                        "leader_epoch": 2,
                        "replicas": [0],
                        "isr": [0],
                        "controller_epoch": 4,
                        "partition_epoch": 3,
                    }
                },
            }
        },
    }
    (tmp_path / METADATA_FILE).write_text(json.dumps(old))

    async def scenario() -> None:
        node = await Node(tmp_path).start()
        assert node.store.topics()["t"].states[0].leader_epoch == 3
        document = json.loads((tmp_path / METADATA_FILE).read_text())
        assert document["controller_epoch"] == 5
        assert document["topics"]["t"]["partitions"]["0"]["leader_epoch"] == 3
        assert not list(tmp_path.glob("*.tmp"))
        await node.stop()

    run(scenario)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/name", "ünï"])
def test_illegal_topic_names_are_refused(tmp_path, name):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        assert await error_code(node.admin.create_topic(name, 1, 1, {})) == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert node.store.topics() == {}
        await node.stop()

    run(scenario)


def test_legal_topic_names():
    for name in ["a" * 249, "A.b_c-9", "..."]:
        validate_topic_name(name)


def test_validation_refuses_before_writing(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path, max_broker_partitions=10).start()
        admin = node.admin
        await admin.create_topic("a.b", 1, 1, {})
        assert await error_code(admin.create_topic("a.b", 1, 1, {})) == ErrorCode.TOPIC_ALREADY_EXISTS
        assert await error_code(admin.create_topic("a_b", 1, 1, {})) == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert await error_code(admin.create_topic("t", 0, 1, {})) == ErrorCode.INVALID_PARTITIONS
        assert await error_code(admin.create_topic("t", 1, 2, {})) == ErrorCode.INVALID_REPLICATION_FACTOR
        bad = admin.create_topic("t", -1, -1, {}, {0: [0], 2: [0]})
        assert await error_code(bad) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert await error_code(admin.create_topic("t", 10, 1, {})) == ErrorCode.POLICY_VIOLATION
        assert await error_code(admin.create_partitions("a.b", 11)) == ErrorCode.POLICY_VIOLATION
        assert sorted(node.store.topics()) == ["a.b"]
        assert len(node.store.topics()["a.b"].assignment) == 1
        await node.stop()

    run(scenario)


def test_validate_only_writes_and_sends_nothing(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        node.broker.requests.clear()
        topic = await node.admin.create_topic("t", 2, 1, {}, validate_only=True)
        assert sorted(topic.assignment) == [0, 1]
        await node.settle()
        assert "t" not in node.store.topics() and node.broker.requests == []
        await node.stop()

    run(scenario)


def test_create_partitions_grows_only_and_brings_only_new_partitions_online(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.admin.create_topic("t", 2, 1, {})
        await node.settle()
        assert await error_code(node.admin.create_partitions("t", 2)) == ErrorCode.INVALID_PARTITIONS
        assert await error_code(node.admin.create_partitions("t", 1)) == ErrorCode.INVALID_PARTITIONS
        nope = node.admin.create_partitions("nope", 3)
        assert await error_code(nope) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        node.broker.requests.clear()
        assert await node.admin.create_partitions("t", 4) == {2: (0,), 3: (0,)}
        await node.settle()
        [topic_state] = node.broker.requests[0].topic_states
        assert [p.partition_index for p in topic_state.partition_states] == [2, 3]
        assert sorted(node.broker.cache.topic("t").partitions) == [0, 1, 2, 3]
        await node.stop()

    run(scenario)


def test_deletion_stops_and_deletes_replicas_then_forgets_the_topic(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.admin.create_topic("t", 2, 1, {})
        await node.settle()
        node.broker.requests.clear()
        await node.admin.delete_topic("t")
        await node.settle()
        assert node.broker.kinds() == ["StopReplica", "UpdateMetadata"]
        [stop] = node.broker.requests[0].topic_states
        assert [(p.leader_epoch, p.delete_partition) for p in stop.partition_states] == [
            (EPOCH_DURING_DELETE, True)
        ] * 2
        [gone] = node.broker.requests[1].topic_states
        assert {p.leader for p in gone.partition_states} == {LEADER_DURING_DELETE}
        assert node.broker.cache.topic("t") is None and "t" not in node.store.topics()
        assert await error_code(node.admin.delete_topic("t")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await node.stop()

    run(scenario)


def test_store_refuses_writes_from_a_stale_controller(tmp_path):
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.admin.create_topic("t", 1, 1, {})
        await node.settle()
        await node.store.elect_controller()  # another controller took over
        stale = {"t": {0: PartitionState(0, 9, (0,), (0,), 1, 9)}}
        assert (
            await error_code(node.store.write_partition_states(stale, 1)) == ErrorCode.STALE_CONTROLLER_EPOCH
        )
        assert await error_code(node.store.remove_topic("t", 1)) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert node.store.topics()["t"].states[0].leader_epoch == 0
        await node.stop()

    run(scenario)


def test_meta_properties_written_and_checked(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    cluster_id = ensure_meta_properties(dirs, 3, None)
    assert len(cluster_id) == 22
    for d in dirs:
        props = read_meta_properties(d)
        assert props == {"version": "1", "broker.id": "3", "cluster.id": cluster_id}
    assert ensure_meta_properties(dirs, 3, None) == cluster_id
    with pytest.raises(MetaPropertiesError, match="broker.id"):
        ensure_meta_properties(dirs, 4, None)
    with pytest.raises(MetaPropertiesError, match="cluster.id"):
        ensure_meta_properties(dirs, 3, "another-cluster")


def test_cluster_ids_are_random_uuids():
    first, second = new_cluster_id(), new_cluster_id()
    assert first != second
    assert uuid.UUID(bytes=base64.urlsafe_b64decode(first + "=="))
