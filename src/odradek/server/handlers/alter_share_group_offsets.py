"""AlterShareGroupOffsets handler (KIP-932 share groups).

API: v0.

Behaviour: sets the start offset of the named share-partitions of an empty share group: each gets
a new state epoch starting at the offset, written to the share coordinator
(`SharePartitionManager.alter_start_offset`), its in-flight records forgotten. Group errors:
NON_EMPTY_GROUP ("The group is not empty.") while the group has members, GROUP_ID_NOT_FOUND for an
unknown or another kind of group, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS from routing;
per partition: UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition), the share coordinator's
errors.

Authorization (Kafka's): READ on the group (else GROUP_AUTHORIZATION_FAILED for the request) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 0

Response = AlterShareGroupOffsetsResponse
Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
Partition = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition
RequestTopic = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic


async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> Response:
    group_id = request.group_id
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return error_response(request, 0, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error, message = await ctx.broker.group_coordinator.share_group_admin(group_id, empty=True)
    if error != ErrorCode.NONE:
        response = error_response(request, 0, error)
        response.error_message = message
        for topic in response.responses:
            for partition in topic.partitions:
                partition.error_message = message
        return response
    return Response(responses=[await _topic(ctx, group_id, t) for t in request.topics])


async def _topic(ctx: RequestContext, group_id: str, requested: RequestTopic) -> Topic:
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, requested.topic_name):
        return _failed(requested, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    topic = ctx.broker.metadata_cache.topic(requested.topic_name)
    if topic is None:
        return _failed(requested, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    answered = []
    for wanted in requested.partitions:
        if wanted.partition_index not in topic.partitions:
            answered.append(Partition(wanted.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        code = await ctx.broker.share_partitions.alter_start_offset(
            group_id, topic.topic_id, wanted.partition_index, wanted.start_offset
        )
        answered.append(Partition(wanted.partition_index, code))
    altered = [p.partition_index for p in answered if p.error_code == ErrorCode.NONE]
    if altered:
        coordinator = ctx.broker.group_coordinator
        await coordinator.share_partitions_changed(group_id, {topic.topic_id: (topic.name, altered)})
    return Topic(topic_name=requested.topic_name, topic_id=topic.topic_id, partitions=answered)


def _failed(requested: RequestTopic, code: int) -> Topic:
    return Topic(
        topic_name=requested.topic_name,
        partitions=[Partition(p.partition_index, code) for p in requested.partitions],
    )


def error_response(request: AlterShareGroupOffsetsRequest, version: int, code: int) -> Response:
    return Response(
        error_code=code,
        responses=[
            Topic(
                topic_name=t.topic_name, partitions=[Partition(p.partition_index, code) for p in t.partitions]
            )
            for t in request.topics
        ],
    )
