"""ConsumerGroupHeartbeat handler (KIP-848 consumer groups).

API: v0-v1 (v1: `subscribed_topic_regex`, and the client generates its member id, KIP-1082).

Behaviour: Kafka's ConsumerGroupHeartbeat through the group coordinator
(coordinator/consumer_group.py): joining (member epoch 0), heartbeating, leaving (-1), a static
member's temporary leave (-2); the answer carries the member id (v0: the coordinator's for a new
member; v1: the client's), the member epoch, the heartbeat interval
(group.consumer.heartbeat.interval.ms) and the assignment when it changed or the request was a full
one. Errors: INVALID_REQUEST for fields Kafka refuses, INVALID_REGULAR_EXPRESSION,
UNSUPPORTED_ASSIGNOR, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL (a classic group with
members), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE from routing.

Authorization (Kafka's KafkaApis): READ on the group, else GROUP_AUTHORIZATION_FAILED; then DESCRIBE
on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED. A regex subscription resolves to
the matching topics the heartbeating member's principal may DESCRIBE (Kafka 4, KAFKA-18813), checked
whenever the regex is resolved again (a new regex, or topics created or deleted); a change of ACLs
alone does not resolve it again (Kafka also refreshes on a timer).
"""

from __future__ import annotations

from odradek.coordinator.consumer_group import HeartbeatArgs, HeartbeatResult, TopicPartitions
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorized_names, require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 1

Response = ConsumerGroupHeartbeatResponse


async def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> Response:
    require_group(ctx, AclOperation.READ, request.group_id)
    names = request.subscribed_topic_names
    if names:
        allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if len(allowed) < len(set(names)):
            return Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    owned: TopicPartitions | None = None
    if request.topic_partitions is not None:
        owned = {tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions}
    args = HeartbeatArgs(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host if ctx.client_host.startswith("/") else f"/{ctx.client_host}",
        version=ctx.api_version,
        describable=lambda topics: frozenset(
            authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, log_if_denied=False)
        ),
    )
    return _response(await ctx.broker.group_coordinator.consumer_group_heartbeat(args))


def _response(result: HeartbeatResult) -> Response:
    assignment = None
    if result.assignment is not None:
        assignment = Response.Assignment(
            topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
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


def error_response(request: ConsumerGroupHeartbeatRequest, version: int, code: int) -> Response:
    return Response(error_code=code)
