"""The broker's control plane: the three requests the controller sends it, fenced whole, then applied.

Owns `ControlPlane`, controller/channel.py's `BrokerControlPlane`: `handle_leader_and_isr`,
`handle_update_metadata` and `handle_stop_replica` serve the in-process `LocalChannel` (the
controller in this process, single node or ZooKeeper mode: trusted, synchronous); the `*_from`
coroutines serve the wire handlers of a ZooKeeper-mode broker (handlers/leader_and_isr.py,
update_metadata.py, stop_replica.py). Each fences the whole request first, as Kafka's KafkaApis and
ReplicaManager do:
- controller epoch: `accept_controller_epoch` decides whether a request's controller epoch is
  accepted; one older than the newest this broker has seen in any of the three requests is not:
  STALE_CONTROLLER_EPOCH;
- a controller epoch *newer* than the newest seen, from the wire, is accepted only when ZooKeeper
  agrees (`registered_controller`: /controller_epoch and /controller read after a `sync`, within
  `lookup_timeout_s`): the request's controller epoch must be /controller_epoch's value and its
  controller id /controller's brokerid. Otherwise, or on a broker with no ZooKeeper, it is refused
  with STALE_CONTROLLER_EPOCH (the closest Kafka error) and the epoch seen is left as it was, so a
  forged epoch neither changes anything nor fences the real controller. When ZooKeeper cannot be
  read the connection is closed (`CloseConnection`), refusing the request so that the controller's
  channel sends it again (controller/remote_channel.py resends on a new connection; an error answer
  it would take as final). Nothing is cached but the accepted epoch: a request at the epoch
  seen costs no ZooKeeper read. Deliberate deviation: Kafka takes a newer epoch as it comes;
- broker epoch (KIP-380): a request addressed to an older registration of this broker (its broker
  epoch below the current one, neither being -1) gets STALE_BROKER_EPOCH;
- a refused request changes nothing and is answered with the error at the top and for every
  partition (`leader_and_isr_refusal`, `update_metadata_refusal`, `stop_replica_refusal`, which
  the handlers' error responses use too), with one WARNING line naming the API, the peer address,
  the listener and the principal (`ControllerPeer`); an accepted one raises the controller epoch
  seen (and notes the broker epoch it was accepted under: server/controller_contact.py), then
  LeaderAndIsr and StopReplica go to the ReplicaManager (which fences each partition by its leader
  epoch, replication/fencing.py) and UpdateMetadata to the metadata cache.

A forged request at the *current* controller epoch with the real controller's id cannot be told
from the controller's own here; with an authorizer on, the wire handlers refuse it before it gets
here unless its principal has CLUSTER_ACTION on the cluster (server/authz.py), as in Kafka.

Callers: the broker (builds one, gives it to the `LocalChannel`s and exposes it to handlers as
`control_plane`) and the three handlers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from odradek.replication.fencing import NO_EPOCH
from odradek.replication.replica_manager import ReplicaManager, leader_and_isr_response, stop_error
from odradek.server.metadata_cache import MetadataCache
from odradek.server.socket_server import CloseConnection

log = logging.getLogger(__name__)

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
# The controller's broker id and epoch as ZooKeeper has them now (/controller, /controller_epoch;
# None for either when missing), read after a sync.
RegisteredController = Callable[[], Awaitable[tuple[int | None, int | None]]]


class ControlPlane:
    """Fences and applies the controller's requests; see the module docstring."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        broker_epoch: Callable[[], int],
        registered_controller: RegisteredController | None = None,
        lookup_timeout_s: float = 10.0,
    ) -> None:
        self._replica_manager = replica_manager
        self._metadata_cache = metadata_cache
        self._broker_epoch = broker_epoch
        self.registered_controller = registered_controller  # None: no ZooKeeper (single node)
        self._lookup_timeout_s = lookup_timeout_s
        self.controller_epoch = NO_EPOCH  # the newest controller epoch of an accepted request
        self.accepted_as = NO_EPOCH  # this broker's broker epoch when it last accepted one

    # -- from the controller in this process (LocalChannel): trusted ---------------------------------

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        error = self._fence("LeaderAndIsr", request, LOCAL)
        if error != ErrorCode.NONE:
            return leader_and_isr_refusal(request, error)
        return self._replica_manager.become_leader_or_follower(request)

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        error = self._fence("UpdateMetadata", request, LOCAL)
        if error != ErrorCode.NONE:
            return update_metadata_refusal(request, error)
        return self._metadata_cache.update_metadata(request)

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        error = self._fence("StopReplica", request, LOCAL)
        if error != ErrorCode.NONE:
            return stop_replica_refusal(request, error)
        return self._replica_manager.stop_replicas(request)

    # -- from the wire (the handlers): a newer controller epoch is checked against ZooKeeper -------

    async def leader_and_isr_from(
        self, peer: ControllerPeer, request: LeaderAndIsrRequest
    ) -> LeaderAndIsrResponse:
        error = await self._fence_remote("LeaderAndIsr", request, peer)
        if error != ErrorCode.NONE:
            return leader_and_isr_refusal(request, error)
        return self._replica_manager.become_leader_or_follower(request)

    async def update_metadata_from(
        self, peer: ControllerPeer, request: UpdateMetadataRequest
    ) -> UpdateMetadataResponse:
        error = await self._fence_remote("UpdateMetadata", request, peer)
        if error != ErrorCode.NONE:
            return update_metadata_refusal(request, error)
        return self._metadata_cache.update_metadata(request)

    async def stop_replica_from(
        self, peer: ControllerPeer, request: StopReplicaRequest
    ) -> StopReplicaResponse:
        error = await self._fence_remote("StopReplica", request, peer)
        if error != ErrorCode.NONE:
            return stop_replica_refusal(request, error)
        return self._replica_manager.stop_replicas(request)

    # -- the decision ---------------------------------------------------------------------------------

    def accept_controller_epoch(self, epoch: int) -> bool:
        """Whether a request from controller epoch `epoch` is accepted: not older than the newest
        this broker has seen (a newer one from the wire is checked by `_registered` first)."""
        return epoch >= self.controller_epoch

    async def _fence_remote(self, api: str, request: ControllerRequest, peer: ControllerPeer) -> ErrorCode:
        """`_fence`, after checking a controller epoch newer than the newest seen against ZooKeeper."""
        if request.controller_epoch > self.controller_epoch:
            reason = await self._registered(api, request, peer)
            if reason is not None:
                self._refused(api, request, peer, ErrorCode.STALE_CONTROLLER_EPOCH.name, reason)
                return ErrorCode.STALE_CONTROLLER_EPOCH
        return self._fence(api, request, peer)

    async def _registered(self, api: str, request: ControllerRequest, peer: ControllerPeer) -> str | None:
        """None when ZooKeeper names the request's controller id and epoch as the controller's now;
        otherwise why not. CloseConnection when ZooKeeper cannot be read: the controller's channel
        then sends the request again on a new connection (an error answer it would not resend)."""
        if self.registered_controller is None:
            return "no ZooKeeper to check a newer controller epoch against"
        try:
            controller_id, epoch = await asyncio.wait_for(
                self.registered_controller(), self._lookup_timeout_s
            )
        except Exception as exc:  # noqa: BLE001 - any failure to read ZooKeeper refuses
            self._refused(api, request, peer, "connection closed", f"ZooKeeper could not be read: {exc!r}")
            raise CloseConnection(f"{api} not checked against ZooKeeper") from exc
        if (request.controller_id, request.controller_epoch) != (controller_id, epoch):
            return f"ZooKeeper has controller {controller_id} at controller epoch {epoch}"
        return None

    def _fence(self, api: str, request: ControllerRequest, peer: ControllerPeer) -> ErrorCode:
        """The whole-request check; an accepted request raises the controller epoch seen."""
        if not self.accept_controller_epoch(request.controller_epoch):
            error = ErrorCode.STALE_CONTROLLER_EPOCH
        elif stale_broker_epoch(request.broker_epoch, self._broker_epoch()):
            error = ErrorCode.STALE_BROKER_EPOCH
        else:
            self.controller_epoch, self.accepted_as = request.controller_epoch, self._broker_epoch()
            return ErrorCode.NONE
        self._refused(api, request, peer, error.name, "")
        return error

    def _refused(
        self, api: str, request: ControllerRequest, peer: ControllerPeer, outcome: str, reason: str
    ) -> None:
        log.warning(
            "Refused %s from %s claiming controller %d (controller epoch %d, broker epoch %d): %s%s; "
            "this broker has seen controller epoch %d and registered with broker epoch %d",
            api,
            peer,
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            outcome,
            f" ({reason})" if reason else "",
            self.controller_epoch,
            self._broker_epoch(),
        )


@dataclass(frozen=True, slots=True)
class ControllerPeer:
    """Where a controller request came from, for the refusal's log line."""

    host: str
    listener: str
    principal: str

    def __str__(self) -> str:
        if not self.listener:
            return self.host
        return f"{self.host} on listener {self.listener} as {self.principal}"


LOCAL = ControllerPeer("the controller in this process", "", "")


class Connection(Protocol):
    """What the control plane reads of a handler's RequestContext (server/context.py)."""

    @property
    def client_host(self) -> str: ...

    @property
    def listener(self) -> str: ...

    @property
    def principal(self) -> object: ...


def controller_peer(ctx: Connection) -> ControllerPeer:
    """The peer of a controller request from the wire, from its RequestContext."""
    return ControllerPeer(ctx.client_host, ctx.listener, str(ctx.principal))


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
