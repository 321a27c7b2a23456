"""DeleteShareGroupOffsets handler (KIP-932 share groups).

API: v0.

Behaviour: deletes the share-partition state of every partition of the named topics for an empty
share group (`SharePartitionManager.delete_state`: the share coordinator writes the deletion and the
leader forgets the share-partition); the group starts again from share.auto.offset.reset when it
next consumes them. Group errors: NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND
for an unknown or another kind of group, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS from
routing; per topic: UNKNOWN_TOPIC_OR_PARTITION, the share coordinator's first error.

Authorization (Kafka's): DELETE on the group (else GROUP_AUTHORIZATION_FAILED for the request) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext
from odradek.server.share_partitions import TopicIdPartition

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 0

Response = DeleteShareGroupOffsetsResponse
Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> Response:
    group_id = request.group_id
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return error_response(request, 0, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error, message = await ctx.broker.group_coordinator.share_group_admin(group_id, empty=True)
    if error != ErrorCode.NONE:
        return Response(error_code=error, error_message=message)
    return Response(responses=[await _topic(ctx, group_id, t.topic_name) for t in request.topics])


async def _topic(ctx: RequestContext, group_id: str, name: str) -> Topic:
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name):
        return Topic(topic_name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    topic = ctx.broker.metadata_cache.topic(name)
    if topic is None:
        return Topic(
            topic_name=name,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message="This server does not host this topic-partition.",
        )
    keys = [TopicIdPartition(topic.topic_id, p) for p in sorted(topic.partitions)]
    errors = await ctx.broker.share_partitions.delete_state(group_id, keys)
    code = next((e for e in errors.values() if e != ErrorCode.NONE), ErrorCode.NONE)
    if code == ErrorCode.NONE:
        code = await ctx.broker.group_coordinator.share_partitions_changed(group_id, removed=[topic.topic_id])
    return Topic(topic_name=name, topic_id=topic.topic_id, error_code=code)


def error_response(request: DeleteShareGroupOffsetsRequest, version: int, code: int) -> Response:
    return Response(error_code=code)
