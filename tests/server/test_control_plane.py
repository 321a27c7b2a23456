"""The control plane's fencing (server/control_plane.py), unit by unit: which controller and broker
epochs are refused, what a refusal answers, that a refused request reaches neither the
ReplicaManager nor the metadata cache, and that an accepted one raises the controller epoch seen;
a newer controller epoch from the wire checked against ZooKeeper (a fake reader stands for it).
The same requests through the wire handlers of a started broker: test_control_plane_handlers.py;
on a real cluster: tests/cluster/test_control_plane_hijack.py."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any, cast

import pytest

from odradek.controller.channel import (
    ControllerIdentity,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataResponse
from odradek.server.control_plane import (
    ControllerPeer,
    ControlPlane,
    leader_and_isr_refusal,
    stale_broker_epoch,
    stop_replica_refusal,
    update_metadata_refusal,
)
from odradek.server.socket_server import CloseConnection

BROKER = BrokerInfo(0, (Endpoint("PLAINTEXT", "localhost", 9092),))
STATES = {
    "t": (
        uuid.uuid4(),
        {0: PartitionState(0, 1, (0,), (0,), 1, 1), 1: PartitionState(0, 1, (0,), (0,), 1, 1)},
    )
}


class Recorder:
    """Stands for the ReplicaManager and the metadata cache: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def become_leader_or_follower(self, request: Any) -> LeaderAndIsrResponse:
        self.calls.append("LeaderAndIsr")
        return LeaderAndIsrResponse()

    def stop_replicas(self, request: Any) -> StopReplicaResponse:
        self.calls.append("StopReplica")
        return StopReplicaResponse()

    def update_metadata(self, request: Any) -> UpdateMetadataResponse:
        self.calls.append("UpdateMetadata")
        return UpdateMetadataResponse()


PEER = ControllerPeer("10.1.2.3", "PLAINTEXT", "User:ANONYMOUS")


class ZooKeeper:
    """Stands for ZooKeeper's /controller and /controller_epoch: counts the reads, or fails them."""

    def __init__(self, controller_id: int | None, controller_epoch: int | None) -> None:
        self.controller = (controller_id, controller_epoch)
        self.reads = 0
        self.failure: BaseException | None = None
        self.hang = False

    async def read(self) -> tuple[int | None, int | None]:
        self.reads += 1
        if self.failure is not None:
            raise self.failure
        if self.hang:
            await asyncio.sleep(60)
        return self.controller


def control_plane(
    broker_epoch: int = -1, zookeeper: ZooKeeper | None = None
) -> tuple[ControlPlane, Recorder]:
    recorder = Recorder()
    reader = zookeeper.read if zookeeper is not None else None
    plane = ControlPlane(cast(Any, recorder), cast(Any, recorder), lambda: broker_epoch, reader, 0.2)
    return plane, recorder


def request(api: str, controller_epoch: int, broker_epoch: int = -1, controller_id: int = 1) -> Any:
    sender = ControllerIdentity(controller_id, controller_epoch, broker_epoch)
    if api == "LeaderAndIsr":
        return leader_and_isr_request(sender, STATES, [BROKER])
    if api == "UpdateMetadata":
        return update_metadata_request(sender, STATES, [BROKER])
    return stop_replica_request(sender, {"t": {0: 1, 1: 1}}, delete=False)


def handle(plane: ControlPlane, api: str, req: Any) -> Any:
    handler: Callable[[Any], Any] = {
        "LeaderAndIsr": plane.handle_leader_and_isr,
        "UpdateMetadata": plane.handle_update_metadata,
        "StopReplica": plane.handle_stop_replica,
    }[api]
    return handler(req)


def partition_codes(response: Any) -> list[int]:
    if isinstance(response, LeaderAndIsrResponse):
        return [e.error_code for t in response.topics for e in t.partition_errors]
    if isinstance(response, StopReplicaResponse):
        return [e.error_code for e in response.partition_errors]
    return []


APIS = ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]


def test_a_controller_epoch_is_accepted_unless_older_than_the_newest_seen():
    plane, _ = control_plane()
    assert plane.accept_controller_epoch(0)
    plane.controller_epoch = 4
    assert not plane.accept_controller_epoch(3)
    assert plane.accept_controller_epoch(4) and plane.accept_controller_epoch(5)


def test_a_broker_epoch_is_stale_only_when_older_and_both_are_known():
    assert stale_broker_epoch(10, 11)
    assert not stale_broker_epoch(11, 11) and not stale_broker_epoch(12, 11)
    assert not stale_broker_epoch(-1, 11) and not stale_broker_epoch(10, -1)


@pytest.mark.parametrize("api", APIS)
def test_an_accepted_request_is_applied_and_raises_the_controller_epoch_seen(api):
    plane, recorder = control_plane(broker_epoch=7)
    response = handle(plane, api, request(api, 5, broker_epoch=7))
    assert recorder.calls == [api] and response.error_code == ErrorCode.NONE
    assert plane.controller_epoch == 5


@pytest.mark.parametrize("api", APIS)
def test_a_stale_controller_epoch_is_refused_whole_and_changes_nothing(api):
    plane, recorder = control_plane()
    handle(plane, "UpdateMetadata", request("UpdateMetadata", 5))  # any of the three raises the epoch
    recorder.calls.clear()
    response = handle(plane, api, request(api, 4))
    assert recorder.calls == [] and plane.controller_epoch == 5
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert set(partition_codes(response)) <= {ErrorCode.STALE_CONTROLLER_EPOCH}


@pytest.mark.parametrize("api", APIS)
def test_a_stale_broker_epoch_is_refused_whole_and_leaves_the_controller_epoch(api):
    plane, recorder = control_plane(broker_epoch=100)
    response = handle(plane, api, request(api, 3, broker_epoch=99))
    assert recorder.calls == [] and plane.controller_epoch == -1
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_refusals_carry_the_code_at_the_top_and_for_every_partition():
    code = ErrorCode.STALE_CONTROLLER_EPOCH
    leader_and_isr = leader_and_isr_refusal(request("LeaderAndIsr", 1), code)
    assert leader_and_isr.error_code == code and partition_codes(leader_and_isr) == [code, code]
    assert [e.partition_index for t in leader_and_isr.topics for e in t.partition_errors] == [0, 1]
    stop = stop_replica_refusal(request("StopReplica", 1), code)
    assert stop.error_code == code and partition_codes(stop) == [code, code]
    assert [(e.topic_name, e.partition_index) for e in stop.partition_errors] == [("t", 0), ("t", 1)]
    assert update_metadata_refusal(request("UpdateMetadata", 1), code).error_code == code


# -- from the wire: a newer controller epoch is checked against ZooKeeper ----------------------------


def from_wire(plane: ControlPlane, api: str, req: Any) -> Any:
    handler = {
        "LeaderAndIsr": plane.leader_and_isr_from,
        "UpdateMetadata": plane.update_metadata_from,
        "StopReplica": plane.stop_replica_from,
    }[api]
    return asyncio.run(handler(PEER, req))


@pytest.mark.parametrize("api", APIS)
def test_a_newer_epoch_that_zookeeper_names_is_accepted_and_raises_the_epoch(api):
    zookeeper = ZooKeeper(1, 3)
    plane, recorder = control_plane(zookeeper=zookeeper)
    plane.controller_epoch = 2
    response = from_wire(plane, api, request(api, 3))
    assert response.error_code == ErrorCode.NONE and recorder.calls == [api]
    assert plane.controller_epoch == 3 and zookeeper.reads == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("zk_controller", "zk_epoch"),
    [(1, 2), (1, 5), (0, 3), (None, 3)],
    ids=["forged-epoch", "zookeeper-has-a-newer-epoch", "another-controller", "no-controller"],
)
def test_a_newer_epoch_zookeeper_does_not_name_is_refused_and_changes_nothing(
    api, zk_controller, zk_epoch, caplog
):
    plane, recorder = control_plane(zookeeper=ZooKeeper(zk_controller, zk_epoch))
    plane.controller_epoch = 2
    with caplog.at_level(logging.WARNING, logger="odradek.server.control_plane"):
        response = from_wire(plane, api, request(api, 3))
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert set(partition_codes(response)) <= {ErrorCode.STALE_CONTROLLER_EPOCH}
    assert recorder.calls == [] and plane.controller_epoch == 2
    line = warning(caplog)
    assert api in line and "10.1.2.3 on listener PLAINTEXT as User:ANONYMOUS" in line
    assert f"ZooKeeper has controller {zk_controller} at controller epoch {zk_epoch}" in line


def warning(caplog: pytest.LogCaptureFixture) -> str:
    """The one WARNING logged."""
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return line


@pytest.mark.parametrize("trouble", ["failure", "hang"])
def test_a_newer_epoch_closes_the_connection_when_zookeeper_cannot_be_read(trouble, caplog):
    """Closed, not answered: the controller's channel resends on a new connection."""
    zookeeper = ZooKeeper(1, 3)
    zookeeper.failure = ConnectionError("connection loss") if trouble == "failure" else None
    zookeeper.hang = trouble == "hang"
    plane, recorder = control_plane(zookeeper=zookeeper)
    with caplog.at_level(logging.WARNING, logger="odradek.server.control_plane"):
        with pytest.raises(CloseConnection):
            from_wire(plane, "StopReplica", request("StopReplica", 3))
    assert recorder.calls == [] and plane.controller_epoch == -1
    line = warning(caplog)
    assert "connection closed (ZooKeeper could not be read" in line and "10.1.2.3" in line


def test_a_newer_epoch_is_refused_without_zookeeper(caplog):
    plane, recorder = control_plane()
    with caplog.at_level(logging.WARNING, logger="odradek.server.control_plane"):
        response = from_wire(plane, "StopReplica", request("StopReplica", 3))
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert recorder.calls == [] and plane.controller_epoch == -1
    assert "no ZooKeeper to check" in warning(caplog)


def test_a_request_at_the_epoch_seen_reads_no_zookeeper():
    zookeeper = ZooKeeper(1, 3)
    plane, recorder = control_plane(zookeeper=zookeeper)
    assert from_wire(plane, "UpdateMetadata", request("UpdateMetadata", 3)).error_code == ErrorCode.NONE
    assert zookeeper.reads == 1
    zookeeper.failure = ConnectionError("would refuse if read")
    for api in APIS:
        assert from_wire(plane, api, request(api, 3)).error_code == ErrorCode.NONE
    assert zookeeper.reads == 1 and recorder.calls == ["UpdateMetadata", *APIS]


def test_the_controller_in_this_process_is_trusted_without_a_zookeeper_read():
    zookeeper = ZooKeeper(None, None)
    plane, recorder = control_plane(zookeeper=zookeeper)
    assert handle(plane, "LeaderAndIsr", request("LeaderAndIsr", 4)).error_code == ErrorCode.NONE
    assert zookeeper.reads == 0 and plane.controller_epoch == 4


def test_a_stale_epoch_from_the_wire_is_refused_without_a_read_and_logs_the_peer(caplog):
    zookeeper = ZooKeeper(1, 3)
    plane, recorder = control_plane(broker_epoch=100, zookeeper=zookeeper)
    plane.controller_epoch = 3
    with caplog.at_level(logging.WARNING, logger="odradek.server.control_plane"):
        stale = from_wire(plane, "LeaderAndIsr", request("LeaderAndIsr", 2, broker_epoch=100))
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and zookeeper.reads == 0
    assert "10.1.2.3 on listener PLAINTEXT as User:ANONYMOUS" in warning(caplog)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="odradek.server.control_plane"):
        old = from_wire(plane, "LeaderAndIsr", request("LeaderAndIsr", 3, broker_epoch=99))
    assert old.error_code == ErrorCode.STALE_BROKER_EPOCH and recorder.calls == []
    assert "10.1.2.3 on listener PLAINTEXT as User:ANONYMOUS" in warning(caplog)


def test_a_newer_epoch_accepted_meanwhile_fences_a_request_verified_against_an_older_one():
    """Two newer epochs checked at once: the later one's acceptance fences the earlier one, whose
    check finished after."""
    plane, recorder = control_plane()

    async def scenario() -> tuple[int, int]:
        release = asyncio.Event()

        async def slow_read() -> tuple[int | None, int | None]:
            await release.wait()
            return 1, 3

        plane.registered_controller = slow_read
        first = asyncio.ensure_future(plane.stop_replica_from(PEER, request("StopReplica", 3)))
        await asyncio.sleep(0)

        async def fast_read() -> tuple[int | None, int | None]:
            return 1, 4

        plane.registered_controller = fast_read
        second = await plane.update_metadata_from(PEER, request("UpdateMetadata", 4))
        release.set()
        return (await first).error_code, second.error_code

    assert asyncio.run(scenario()) == (ErrorCode.STALE_CONTROLLER_EPOCH, ErrorCode.NONE)
    assert recorder.calls == ["UpdateMetadata"] and plane.controller_epoch == 4
