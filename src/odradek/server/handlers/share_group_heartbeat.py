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

Initialization (Kafka's): when a member is given an assignment, the share-partitions without state
are started at the group's share.auto.offset.reset (the log start offset or the high watermark)
before the answer goes out, for the partitions this broker leads; Deviation: a partition led by
another broker is started by its leader at its first ShareFetch (server/share_partitions.py).
"""

from __future__ import annotations

import logging

from odradek.coordinator.share_group import HeartbeatArgs, HeartbeatResult, TopicPartitions
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
log = logging.getLogger(__name__)


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
    result = await ctx.broker.group_coordinator.share_group_heartbeat(args)
    if result.error_code == ErrorCode.NONE and result.assignment:
        await _initialize(ctx, request.group_id, result.assignment)
    return _response(result)


async def _initialize(ctx: RequestContext, group_id: str, assignment: TopicPartitions) -> None:
    """Start the state of newly assigned share-partitions this broker leads, at the group's
    share.auto.offset.reset (Kafka's group coordinator initializes what it assigns); a partition led
    elsewhere is started by its leader at its first fetch."""
    manager = ctx.broker.share_partitions
    earliest = manager.group_config(group_id).auto_offset_reset == "earliest"
    for topic_id, partitions in assignment.items():
        topic = ctx.broker.metadata_cache.topic_by_id(topic_id)
        if topic is None:
            continue
        for index in sorted(partitions):
            hosted = ctx.broker.replica_manager.partition(topic.name, index)
            if hosted is None or not hosted.is_leader:
                continue
            start = hosted.log_start_offset if earliest else hosted.high_watermark
            error = await manager.initialize_state(group_id, topic_id, index, start)
            if error:
                log.debug("Share group %s: %s-%d not initialized (%s)", group_id, topic.name, index, error)


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
