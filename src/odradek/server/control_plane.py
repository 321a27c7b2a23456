"""The broker's control plane: the three requests the controller sends it, fenced whole, then applied.

Owns `ControlPlane`, controller/channel.py's `BrokerControlPlane`: the same three functions serve
the in-process `LocalChannel` (the controller in this process, single node or ZooKeeper mode) and
the wire handlers of a ZooKeeper-mode broker (handlers/leader_and_isr.py, update_metadata.py,
stop_replica.py). Each fences the whole request first, as Kafka's KafkaApis and ReplicaManager do:
- controller epoch: `accept_controller_epoch` decides whether a request's controller epoch is
  accepted; one older than the newest this broker has seen in any of the three requests is not:
  STALE_CONTROLLER_EPOCH. It is the one place that decision is made (a newer epoch is taken as
  it comes today);
- broker epoch (KIP-380): a request addressed to an older registration of this broker (its broker
  epoch below the current one, neither being -1) gets STALE_BROKER_EPOCH;
- a refused request changes nothing and is answered with the error at the top and for every
  partition (`leader_and_isr_refusal`, `update_metadata_refusal`, `stop_replica_refusal`, which
  the handlers' error responses use too), with one WARNING line; an accepted one raises the
  controller epoch seen, then LeaderAndIsr and StopReplica go to the ReplicaManager (which fences
  each partition by its leader epoch, replication/fencing.py) and UpdateMetadata to the metadata
  cache.

Callers: the broker (builds one, gives it to the `LocalChannel`s and exposes it to handlers as
`control_plane`) and the three handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from odradek.replication.fencing import NO_EPOCH
from odradek.replication.replica_manager import ReplicaManager, leader_and_isr_response, stop_error
from odradek.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


class ControlPlane:
    """Fences and applies the controller's requests; see the module docstring."""

    def __init__(
        self, replica_manager: ReplicaManager, metadata_cache: MetadataCache, broker_epoch: Callable[[], int]
    ) -> None:
        self._replica_manager = replica_manager
        self._metadata_cache = metadata_cache
        self._broker_epoch = broker_epoch
        self.controller_epoch = NO_EPOCH  # the newest controller epoch of an accepted request

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        error = self._fence("LeaderAndIsr", request)
        if error != ErrorCode.NONE:
            return leader_and_isr_refusal(request, error)
        return self._replica_manager.become_leader_or_follower(request)

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        error = self._fence("UpdateMetadata", request)
        if error != ErrorCode.NONE:
            return update_metadata_refusal(request, error)
        return self._metadata_cache.update_metadata(request)

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        error = self._fence("StopReplica", request)
        if error != ErrorCode.NONE:
            return stop_replica_refusal(request, error)
        return self._replica_manager.stop_replicas(request)

    def accept_controller_epoch(self, epoch: int) -> bool:
        """Whether a request from controller epoch `epoch` is accepted: not older than the newest
        this broker has seen."""
        return epoch >= self.controller_epoch

    def _fence(self, api: str, request: ControllerRequest) -> ErrorCode:
        """The whole-request check; an accepted request raises the controller epoch seen."""
        broker_epoch = self._broker_epoch()
        if not self.accept_controller_epoch(request.controller_epoch):
            error = ErrorCode.STALE_CONTROLLER_EPOCH
        elif stale_broker_epoch(request.broker_epoch, broker_epoch):
            error = ErrorCode.STALE_BROKER_EPOCH
        else:
            self.controller_epoch = request.controller_epoch
            return ErrorCode.NONE
        log.warning(
            "Refused %s from controller %d (controller epoch %d, broker epoch %d): %s; this broker "
            "has seen controller epoch %d and registered with broker epoch %d",
            api,
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            error.name,
            self.controller_epoch,
            broker_epoch,
        )
        return error


def stale_broker_epoch(request_broker_epoch: int, broker_epoch: int) -> bool:
    """KIP-380: a request addressed to an older registration of this broker (-1: not checked)."""
    return NO_EPOCH not in (request_broker_epoch, broker_epoch) and request_broker_epoch < broker_epoch


def leader_and_isr_refusal(request: LeaderAndIsrRequest, code: int) -> LeaderAndIsrResponse:
    """The answer to a LeaderAndIsr refused whole: `code` at the top and for every partition."""
    return leader_and_isr_response(request, lambda *_: code, code)


def update_metadata_refusal(request: UpdateMetadataRequest, code: int) -> UpdateMetadataResponse:
    """The answer to an UpdateMetadata refused whole."""
    return UpdateMetadataResponse(error_code=code)


def stop_replica_refusal(request: StopReplicaRequest, code: int) -> StopReplicaResponse:
    """The answer to a StopReplica refused whole: `code` at the top and for every partition."""
    return StopReplicaResponse(
        error_code=code,
        partition_errors=[
            stop_error(topic.topic_name, p, code)
            for topic in request.topic_states
            for p in topic.partition_states
        ],
    )
