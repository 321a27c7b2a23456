"""OffsetDelete handler.

API: v0.

Behaviour: deletes committed offsets of a group (tombstones in `__consumer_offsets`). Top level:
GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for a group with members that is not a
consumer group, INVALID_GROUP_ID for an empty id, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have,
GROUP_SUBSCRIBED_TO_TOPIC while a member of the group subscribes to the topic. An Empty group left
without offsets is deleted, as Kafka does.

Authorization (Kafka's): DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and READ on each
topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from odradek.coordinator.group import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    require_group(ctx, AclOperation.DELETE, request.group_id)
    if not request.group_id:
        return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    errors: dict[TopicPartition, int] = {}
    for topic in request.topics:
        known = ctx.broker.metadata_cache.topic(topic.name)
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if not readable:
                errors[TopicPartition(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known.partitions:
                errors[TopicPartition(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wanted = tuple(
        TopicPartition(t.name, p.partition_index)
        for t in request.topics
        for p in t.partitions
        if TopicPartition(t.name, p.partition_index) not in errors
    )
    result = await ctx.broker.group_coordinator.delete_offsets(request.group_id, wanted)
    if result.error_code != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=result.error_code)
    errors.update(result.partitions)
    return OffsetDeleteResponse(
        topics=[
            Topic(
                name=t.name,
                partitions=[
                    Partition(
                        partition_index=p.partition_index,
                        error_code=errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def error_response(request: OffsetDeleteRequest, version: int, code: int) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code)
