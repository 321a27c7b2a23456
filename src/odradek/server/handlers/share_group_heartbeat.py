"""ShareGroupHeartbeat handler (KIP-932 share groups).

API: v1 (Kafka 4's share consumers; v0 was the early-access version Kafka 4.1 dropped).

Behaviour: Kafka's ShareGroupHeartbeat through the group coordinator (coordinator/share_group.py):
joining with member epoch 0 and the member id the client generated, heartbeating with the current
epoch, leaving with -1. The answer carries the member id, the member epoch, the heartbeat interval
(group.share.heartbeat.interval.ms) and the assignment when the member joined or its assignment
changed. A partition may be assigned to several members (the `simple` assignor).
Errors: INVALID_REQUEST (empty group or member id, no subscribed topics in the first heartbeat, an
epoch below -1), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED
(group.share.max.size), GROUP_ID_NOT_FOUND (a classic or consumer group holds the id, or an unknown
group with a member epoch other than 0), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE from routing.

Authorization (Kafka's KafkaApis): READ on the group, else GROUP_AUTHORIZATION_FAILED; DESCRIBE on
every subscribed topic, else TOPIC_AUTHORIZATION_FAILED.

Deviation: the share-partitions' state is initialized by the partition leader at the first
ShareFetch (server/share_partitions.py, following share.auto.offset.reset), not by the group
coordinator when it assigns the partition (Kafka's ShareGroupStatePartitionMetadata is read, not
written).
"""

from __future__ import annotations

from odradek.coordinator.share_group import HeartbeatArgs, HeartbeatResult
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorized_names, require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
MIN_VERSION = 1
MAX_VERSION = 1

Response = ShareGroupHeartbeatResponse


async def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> Response:
    require_group(ctx, AclOperation.READ, request.group_id)
    names = request.subscribed_topic_names
    if names:
        allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if len(allowed) < len(set(names)):
            return Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    args = HeartbeatArgs(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host if ctx.client_host.startswith("/") else f"/{ctx.client_host}",
    )
    return _response(await ctx.broker.group_coordinator.share_group_heartbeat(args))


def _response(result: HeartbeatResult) -> Response:
    assignment = None
    if result.assignment is not None:
        assignment = Response.Assignment(
            topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
                if partitions
            ]
        )
    return Response(
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(request: ShareGroupHeartbeatRequest, version: int, code: int) -> Response:
    return Response(error_code=code)
