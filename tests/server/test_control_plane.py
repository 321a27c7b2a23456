"""The control plane's fencing (server/control_plane.py), unit by unit: which controller and broker
epochs are refused, what a refusal answers, that a refused request reaches neither the
ReplicaManager nor the metadata cache, and that an accepted one raises the controller epoch seen.
The same requests through the wire handlers of a started broker: test_control_plane_handlers.py."""

from __future__ import annotations

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
    ControlPlane,
    leader_and_isr_refusal,
    stale_broker_epoch,
    stop_replica_refusal,
    update_metadata_refusal,
)

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


def control_plane(broker_epoch: int = -1) -> tuple[ControlPlane, Recorder]:
    recorder = Recorder()
    return ControlPlane(cast(Any, recorder), cast(Any, recorder), lambda: broker_epoch), recorder


def request(api: str, controller_epoch: int, broker_epoch: int = -1) -> Any:
    sender = ControllerIdentity(1, controller_epoch, broker_epoch)
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
