"""The controller's channel to brokers, and the requests it sends: LeaderAndIsr, UpdateMetadata,
StopReplica.

Owns how a controller decision reaches a broker: as the same request objects (the generated
dataclasses of protocol/messages) a ZooKeeper-mode controller sends over the wire, at the versions a
Kafka 3.9 ZooKeeper-mode broker speaks (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4: the
topic-grouped forms with topic ids). `LocalChannel` hands them to this process's broker by calling
its handling functions directly; a remote channel (one connection per broker, requests in order,
responses read back: controller/remote_channel.py) implements the same three methods, and a
ZooKeeper-mode controller reaches this broker through the first and the others through the second
(`ClusterChannel` routes). A request is queued when the method is called; its response arrives
later through the returned future, so the controller's event handling never waits on a broker.

Invariants: per broker, requests are delivered one at a time in the order sent (the local channel
is a direct call; a remote one queues), so a broker sees LeaderAndIsr before the UpdateMetadata that
follows it, as with Kafka's ControllerChannelManager.

Callers: the controller, through controller/sending.py. Receivers implement `BrokerControlPlane`.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from odradek.controller.metadata import BrokerInfo, PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

R = TypeVar("R")
A = TypeVar("A")

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
PLAINTEXT_SECURITY_PROTOCOL = 0
FULL_UPDATE = 1  # LeaderAndIsr / UpdateMetadata `type`: the request carries every partition
INCREMENTAL_UPDATE = 0


class BrokerControlPlane(Protocol):
    """What a broker offers its controller (Kafka's KafkaApis handlers of the three requests)."""

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse: ...

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse: ...

    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse: ...


class ControllerChannel(abc.ABC):
    """Delivers controller requests to brokers by id. Each method queues its request for the broker
    at once and returns the future of its response, so a controller never waits on a broker (Kafka's
    ControllerChannelManager: the event thread enqueues, the send threads deliver)."""

    @abc.abstractmethod
    def leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest
    ) -> asyncio.Future[LeaderAndIsrResponse]: ...

    @abc.abstractmethod
    def update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest
    ) -> asyncio.Future[UpdateMetadataResponse]: ...

    @abc.abstractmethod
    def stop_replica(
        self, broker_id: int, request: StopReplicaRequest
    ) -> asyncio.Future[StopReplicaResponse]: ...

    @abc.abstractmethod
    async def sync_brokers(self, live: Iterable[BrokerInfo]) -> None:
        """Reach exactly the brokers of `live` from now on (Kafka's addBroker / removeBroker at
        onBrokerStartup / onBrokerFailure): a broker no longer there has its requests failed."""

    @abc.abstractmethod
    def reached(self) -> frozenset[int]:
        """The brokers this channel delivers to now."""


class LocalChannel(ControllerChannel):
    """The channel of a single node: the controller and its one broker share the process, so each
    request is handled at once and its future is returned already answered."""

    def __init__(self, broker_id: int, broker: BrokerControlPlane) -> None:
        self.broker_id = broker_id
        self._broker = broker

    def _handled(self, broker_id: int, handle: Callable[[R], A], request: R) -> asyncio.Future[A]:
        answer: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        if broker_id != self.broker_id:
            answer.set_exception(
                KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in this process")
            )
        else:
            answer.set_result(handle(request))
        return answer

    def leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest
    ) -> asyncio.Future[LeaderAndIsrResponse]:
        return self._handled(broker_id, self._broker.handle_leader_and_isr, request)

    def update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest
    ) -> asyncio.Future[UpdateMetadataResponse]:
        return self._handled(broker_id, self._broker.handle_update_metadata, request)

    def stop_replica(
        self, broker_id: int, request: StopReplicaRequest
    ) -> asyncio.Future[StopReplicaResponse]:
        return self._handled(broker_id, self._broker.handle_stop_replica, request)

    async def sync_brokers(self, live: Iterable[BrokerInfo]) -> None:
        """Nothing to do: the one broker is this process's."""

    def reached(self) -> frozenset[int]:
        return frozenset({self.broker_id})


# -- request builders -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerIdentity:
    """Who sends: controller id, controller epoch, and the receiving broker's epoch (KIP-380)."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1


TopicStates = Mapping[str, tuple[uuid.UUID, Mapping[int, PartitionState]]]


def leader_and_isr_request(
    sender: ControllerIdentity,
    topics: TopicStates,
    live_leaders: Iterable[BrokerInfo],
    new_partitions: frozenset[tuple[str, int]] = frozenset(),
    full: bool = False,
) -> LeaderAndIsrRequest:
    """LeaderAndIsr for the given partitions (`new_partitions` are flagged is_new)."""
    return LeaderAndIsrRequest(
        controller_id=sender.controller_id,
        controller_epoch=sender.controller_epoch,
        broker_epoch=sender.broker_epoch,
        type=FULL_UPDATE if full else INCREMENTAL_UPDATE,
        topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name=name,
                topic_id=topic_id,
                partition_states=[
                    LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                        topic_name=name,
                        partition_index=index,
                        controller_epoch=state.controller_epoch,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        isr=list(state.isr),
                        partition_epoch=state.partition_epoch,
                        replicas=list(state.replicas),
                        is_new=(name, index) in new_partitions,
                    )
                    for index, state in sorted(states.items())
                ],
            )
            for name, (topic_id, states) in sorted(topics.items())
        ],
        live_leaders=[
            LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                broker_id=b.broker_id, host_name=b.endpoints[0].host, port=b.endpoints[0].port
            )
            for b in live_leaders
            if b.endpoints
        ],
    )


def update_metadata_request(
    sender: ControllerIdentity, topics: TopicStates, live_brokers: Iterable[BrokerInfo]
) -> UpdateMetadataRequest:
    """UpdateMetadata with every live broker and the given partitions' states; a partition whose
    leader is LEADER_DURING_DELETE tells the broker to forget it."""
    live = [b for b in live_brokers]
    live_ids = {b.broker_id for b in live}
    return UpdateMetadataRequest(
        controller_id=sender.controller_id,
        controller_epoch=sender.controller_epoch,
        broker_epoch=sender.broker_epoch,
        topic_states=[
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=name,
                topic_id=topic_id,
                partition_states=[
                    UpdateMetadataRequest.UpdateMetadataPartitionState(
                        topic_name=name,
                        partition_index=index,
                        controller_epoch=state.controller_epoch,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        isr=list(state.isr),
                        zk_version=state.partition_epoch,
                        replicas=list(state.replicas),
                        offline_replicas=[r for r in state.replicas if r not in live_ids],
                    )
                    for index, state in sorted(states.items())
                ],
            )
            for name, (topic_id, states) in sorted(topics.items())
        ],
        live_brokers=[
            UpdateMetadataRequest.UpdateMetadataBroker(
                id=b.broker_id,
                endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=e.port,
                        host=e.host,
                        listener=e.listener,
                        security_protocol=PLAINTEXT_SECURITY_PROTOCOL,
                    )
                    for e in b.endpoints
                ],
                rack=b.rack,
            )
            for b in live
        ],
    )


def stop_replica_request(
    sender: ControllerIdentity, partitions: Mapping[str, Mapping[int, int]], delete: bool
) -> StopReplicaRequest:
    """StopReplica for topic -> {partition: leader epoch} (EPOCH_DURING_DELETE when deleting)."""
    return StopReplicaRequest(
        controller_id=sender.controller_id,
        controller_epoch=sender.controller_epoch,
        broker_epoch=sender.broker_epoch,
        topic_states=[
            StopReplicaRequest.StopReplicaTopicState(
                topic_name=name,
                partition_states=[
                    StopReplicaRequest.StopReplicaPartitionState(
                        partition_index=index, leader_epoch=epoch, delete_partition=delete
                    )
                    for index, epoch in sorted(by_partition.items())
                ],
            )
            for name, by_partition in sorted(partitions.items())
        ],
    )


class ClusterChannel(ControllerChannel):
    """A ZooKeeper-mode controller's channel: this broker through `local`, every other through
    `remote`."""

    def __init__(self, local: LocalChannel, remote: ControllerChannel) -> None:
        self._local = local
        self._remote = remote

    def _route(self, broker_id: int) -> ControllerChannel:
        return self._local if self._local.broker_id == broker_id else self._remote

    def leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest
    ) -> asyncio.Future[LeaderAndIsrResponse]:
        return self._route(broker_id).leader_and_isr(broker_id, request)

    def update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest
    ) -> asyncio.Future[UpdateMetadataResponse]:
        return self._route(broker_id).update_metadata(broker_id, request)

    def stop_replica(
        self, broker_id: int, request: StopReplicaRequest
    ) -> asyncio.Future[StopReplicaResponse]:
        return self._route(broker_id).stop_replica(broker_id, request)

    async def sync_brokers(self, live: Iterable[BrokerInfo]) -> None:
        await self._remote.sync_brokers([b for b in live if b.broker_id != self._local.broker_id])

    def reached(self) -> frozenset[int]:
        return self._local.reached() | self._remote.reached()
