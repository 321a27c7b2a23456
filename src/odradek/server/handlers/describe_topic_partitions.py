"""DescribeTopicPartitions handler (KIP-966).

API: v0.

Behaviour, as Kafka's DescribeTopicPartitionsRequestHandler: the requested topics by name, or every
topic when the list is empty; names are a set, answered in name order, and only the names at or
after the cursor's topic are looked at. The response holds at most `response_partition_limit`
partitions, capped by the broker's `max.request.partition.size.limit` (default 2000). Topics are
filled in order, the cursor's topic from the cursor's partition index, the others from partition 0;
when a topic's partitions do not all fit, `next_cursor` names the first left out and the response
ends there; when the limit is used up exactly, `next_cursor` names the next topic at partition 0
(a limit of 0 is used up before the first topic; a negative limit answers no topic and no cursor).
A listed topic the broker does not know answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
for an illegal name) with a zero topic id; a topic is never auto-created. A cursor naming a topic the
request's non-empty list lacks is refused (INVALID_REQUEST, every listed topic carrying it).

Per partition: leader (-1 when it does not serve on the request's listener: not live, no endpoint on
the listener, or this broker's log still loading, exactly when Metadata answers an error for it),
leader epoch, replicas, ISR and offline replicas as Metadata reports them (`PartitionLeaders`);
partition error codes are always NONE, as in Kafka. Eligible leader replicas and last known ELR are
empty: there is no ELR without KRaft. Topic authorized operations are always filled (the supported topic
operations the principal is allowed; no authorizer: every one), as Kafka fills them for every topic.

Authorization (Kafka's): every topic needs DESCRIBE; when all topics are asked for, the others are
left out, and a listed one answers TOPIC_AUTHORIZATION_FAILED.

Deliberate deviations: Kafka serves this API on KRaft brokers only (its `"listeners": ["broker"]`; a
ZooKeeper-mode broker does not advertise it). odradek serves it on single-node and ZooKeeper-mode
brokers alike, because newer admin clients prefer it for describing topics. A cursor with a negative
partition index is refused with INVALID_REQUEST (Kafka does not check it and answers a response
whose shape depends on the limit).
"""

from __future__ import annotations

from odradek.controller.metadata import INTERNAL_TOPICS, TopicMetadata, validate_topic_name
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_operations
from odradek.server.context import RequestContext
from odradek.server.handlers.metadata import PartitionLeaders

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 0

NO_LEADER_ID = -1

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    cache = ctx.broker.metadata_cache
    names = _requested_names(request, cache.topics())
    limit = min(ctx.broker.config["max.request.partition.size.limit"], request.response_partition_limit)
    leaders = PartitionLeaders.of(ctx)
    response = DescribeTopicPartitionsResponse()
    remaining = limit
    for name in names:
        if remaining <= 0:
            if remaining == 0:
                response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = cache.topic(name)
        if not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=bool(request.topics)
        ):
            if request.topics:
                response.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name))
            continue
        operations = authorized_operations(ctx, ResourceType.TOPIC, name)
        if topic is None:
            if request.topics:
                response.topics.append(_unknown(name, operations))
            continue
        start = _start_index(request, name)
        end = min(len(topic.partitions), start + remaining)
        described = _describe(topic, range(start, end), leaders, operations)
        response.topics.append(described)
        if end < len(topic.partitions):
            response.next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(described.partitions)
    return response


def _requested_names(request: DescribeTopicPartitionsRequest, known: dict[str, TopicMetadata]) -> list[str]:
    """The topic names to describe, in name order, from the cursor's topic on."""
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    wanted = {t.name for t in request.topics} if request.topics else known.keys()
    names = sorted(name for name in wanted if name >= first)
    if cursor is not None:
        if request.topics and cursor.topic_name not in wanted:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {first}",
            )
        if cursor.partition_index < 0:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Cursor partition index {cursor.partition_index} is negative"
            )
    return names


def _start_index(request: DescribeTopicPartitionsRequest, name: str) -> int:
    cursor = request.cursor
    return cursor.partition_index if cursor is not None and cursor.topic_name == name else 0


def _describe(topic: TopicMetadata, indexes: range, leaders: PartitionLeaders, operations: int) -> Topic:
    partitions = []
    for index in indexes:
        state = topic.partitions.get(index)
        if state is None:
            continue
        error = leaders.leader_error(topic.name, index, state.leader, ErrorCode.LISTENER_NOT_FOUND)
        partitions.append(
            Partition(
                partition_index=index,
                leader_id=state.leader if error == ErrorCode.NONE else NO_LEADER_ID,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                eligible_leader_replicas=[],
                last_known_elr=[],
                offline_replicas=leaders.offline_replicas(state.replicas),
            )
        )
    return Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _unknown(name: str, operations: int) -> Topic:
    try:
        validate_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as exc:
        error = exc.code
    return Topic(
        error_code=error,
        name=name,
        is_internal=name in INTERNAL_TOPICS,
        topic_authorized_operations=operations,
    )


def error_response(
    request: DescribeTopicPartitionsRequest, version: int, code: int
) -> DescribeTopicPartitionsResponse:
    """Every listed topic carrying `code`, as Kafka answers a request it refuses."""
    topics = [Topic(error_code=code, name=t.name) for t in request.topics]
    return DescribeTopicPartitionsResponse(topics=topics)
