"""Metadata handler.

API: v0-v13.

Behaviour: brokers (the advertised host and port of the listener the request arrived on, rack;
brokers without an endpoint on that listener are left out), cluster id (v2+), controller id (v1+),
and the requested topics — all topics when the list is null (v1+) or empty (v0). Topics are looked
up by name, or by topic id in v12 (an unknown id answers UNKNOWN_TOPIC_ID with a null name); v10-v11
requests naming a topic id or a null name are refused (INVALID_REQUEST), as Kafka does. Per
partition: leader, leader epoch (v7+), replicas, ISR, offline replicas (v5+; replicas on brokers
that are not live); a leader that is not live answers LEADER_NOT_AVAILABLE, a live leader without an
endpoint on the request's listener LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before), as Kafka.
A missing topic is created when the request allows it (always before v4) and
`auto.create.topics.enable` is true; an illegal name answers INVALID_TOPIC_EXCEPTION, a missing
topic that may not be created UNKNOWN_TOPIC_OR_PARTITION. The requested topics are a set, as in
Kafka: a name (or id) named twice is answered once, so a request's cost follows the distinct topics
it names; missing topics are auto-created together, not one after another. Authorized operations
(v8+) are reported only when asked for: the supported operations the principal is allowed
(server/authz.py; with no authorizer, every one). The top-level error code (v13+, for Kafka 4's
REBOOTSTRAP_REQUIRED) is always 0: odradek never asks a client to rebootstrap.

Authorization (Kafka's): the all-topics list leaves out the topics the principal may not DESCRIBE
(quietly); a named topic (or topic id) it may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED; a
missing topic is auto-created only with CREATE on the cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED.

Everything comes from the broker's metadata cache (what the controller's UpdateMetadata said).
`PartitionLeaders` (whether a partition's leader serves on the request's listener, its offline
replicas) is shared with the DescribeTopicPartitions handler.

Deliberate deviations: a partition this broker leads whose log is still loading (after a restart, or
while a large topic is being created) answers LEADER_NOT_AVAILABLE until it serves, so clients wait
and ask again instead of producing into NOT_LEADER_OR_FOLLOWER (Kafka opens its port only after
every log is loaded, so it never shows this state). A topic auto-created by this request is waited for (up to
AUTO_CREATE_WAIT_S, without blocking the broker) and returned with its leaders when they are ready in
time (Kafka answers LEADER_NOT_AVAILABLE at once and lets the client retry); past the wait the answer
is LEADER_NOT_AVAILABLE, as in Kafka.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.controller.metadata import TopicMetadata
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.metadata import MetadataRequest, MetadataResponse
from odradek.protocol.primitives import ZERO_UUID
from odradek.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from odradek.server.authz import authorize, authorize_cluster, authorized_names, authorized_operations
from odradek.server.context import RequestContext

if TYPE_CHECKING:
    from odradek.replication.replica_manager import ReplicaManager

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 13

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    version = ctx.api_version
    _check_topic_ids_allowed(request, version)
    broker = ctx.broker
    cache = broker.metadata_cache
    brokers = [
        Broker(node_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack)
        for b in cache.brokers()
        if (endpoint := b.endpoint(ctx.listener)) is not None
    ]
    no_listener = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
    operations = _topic_operations(ctx) if request.include_topic_authorized_operations else None
    requested = await _requested_topics(ctx, request)
    leaders = PartitionLeaders.of(ctx)
    topics = [_describe(t, leaders, no_listener, operations) for t in requested]
    return MetadataResponse(
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id(),
        topics=topics,
        cluster_authorized_operations=(
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )


def _check_topic_ids_allowed(request: MetadataRequest, version: int) -> None:
    if version >= 12 or not request.topics:
        return
    for topic in request.topics:
        if topic.name is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Topic name can not be null for version {version}")
        if topic.topic_id != ZERO_UUID:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Topic IDs are not supported for version {version}")


async def _requested_topics(ctx: RequestContext, request: MetadataRequest) -> list[TopicMetadata | Topic]:
    metadata = ctx.broker.metadata_cache
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = metadata.topics()
        return [topics[name] for name in sorted(topics) if _may_describe(ctx, name, log_if_denied=False)]
    allow_create = ctx.api_version < 4 or request.allow_auto_topic_creation
    ids = dict.fromkeys(wanted.topic_id for wanted in request.topics or [] if wanted.name is None)
    names = dict.fromkeys(wanted.name for wanted in request.topics or [] if wanted.name is not None)
    by_id = [_by_id(ctx, i) for i in ids]
    refused = {n: Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n) for n in names}
    for name in authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names):
        del refused[name]
    missing = [name for name in names if name not in refused and metadata.topic(name) is None]
    created = dict(
        zip(missing, await asyncio.gather(*(_missing(ctx, n, allow_create) for n in missing)), strict=True)
    )
    return [*by_id, *(refused.get(name) or metadata.topic(name) or created[name] for name in names)]


def _by_id(ctx: RequestContext, topic_id: uuid.UUID) -> TopicMetadata | Topic:
    found = ctx.broker.metadata_cache.topic_by_id(topic_id)
    if found is None:
        return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, topic_id=topic_id)
    if not _may_describe(ctx, found.name):
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id=topic_id)
    return found


def _may_describe(ctx: RequestContext, name: str, log_if_denied: bool = True) -> bool:
    return authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's check before an auto-creation)."""
    return authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False) or authorize(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def _topic_operations(ctx: RequestContext) -> Callable[[str], int]:
    return lambda name: authorized_operations(ctx, ResourceType.TOPIC, name)


async def _missing(ctx: RequestContext, name: str, allow_create: bool) -> TopicMetadata | Topic:
    """Auto-create the topic when allowed, else the error Kafka answers for it."""
    if not (allow_create and ctx.broker.config["auto.create.topics.enable"]):
        return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
    if not _may_create(ctx, name):
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
    try:
        created = await ctx.broker.auto_create_topic(name)
    except KafkaError as exc:
        return Topic(error_code=exc.code, name=name)
    return created or Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name)


@dataclass(frozen=True, slots=True)
class PartitionLeaders:
    """Whether a partition's leader can serve a client on the request's listener, and which replicas
    are offline: the live brokers (the metadata cache's), those with an endpoint on the listener, and
    this broker's partitions whose log does not serve yet."""

    broker_id: int
    live: frozenset[int]
    reachable: frozenset[int]
    replica_manager: ReplicaManager

    @classmethod
    def of(cls, ctx: RequestContext) -> PartitionLeaders:
        brokers = ctx.broker.metadata_cache.brokers()
        return cls(
            broker_id=ctx.broker.broker_id,
            live=frozenset(b.broker_id for b in brokers),
            reachable=frozenset(b.broker_id for b in brokers if b.endpoint(ctx.listener) is not None),
            replica_manager=ctx.broker.replica_manager,
        )

    def leader_error(self, topic: str, index: int, leader: int, no_listener: int) -> int:
        """NONE when `leader` serves the partition to this listener, else the error Metadata answers."""
        if self._loading(topic, index, leader) or leader not in self.live:
            return ErrorCode.LEADER_NOT_AVAILABLE
        return ErrorCode.NONE if leader in self.reachable else no_listener

    def offline_replicas(self, replicas: Iterable[int]) -> list[int]:
        return [r for r in replicas if r not in self.live]

    def _loading(self, topic: str, index: int, leader: int) -> bool:
        if leader != self.broker_id:
            return False
        hosted = self.replica_manager.partition(topic, index)
        return hosted is None or not hosted.is_leader


def _describe(
    topic: TopicMetadata | Topic,
    leaders: PartitionLeaders,
    no_listener: int,
    operations: Callable[[str], int] | None,
) -> Topic:
    if isinstance(topic, Topic):
        return topic
    partitions = [
        Partition(
            error_code=leaders.leader_error(topic.name, index, state.leader, no_listener),
            partition_index=index,
            leader_id=state.leader,
            leader_epoch=state.leader_epoch,
            replica_nodes=list(state.replicas),
            isr_nodes=list(state.isr),
            offline_replicas=leaders.offline_replicas(state.replicas),
        )
        for index, state in sorted(topic.partitions.items())
    ]
    return Topic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
        if operations is None
        else operations(topic.name),
    )


def error_response(request: MetadataRequest, version: int, code: int) -> MetadataResponse:
    """Every requested topic carrying `code` (no brokers: the client retries)."""
    return MetadataResponse(
        topics=[Topic(error_code=code, name=t.name, topic_id=t.topic_id) for t in request.topics or []]
    )
