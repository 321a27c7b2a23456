"""Heartbeat handler.

API: v0-v4.

Behaviour: Kafka's classic Heartbeat: keeps the member's session alive; REBALANCE_IN_PROGRESS tells
it to rejoin, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID that it is no longer part
of the generation. An empty group id answers INVALID_GROUP_ID.

Authorization (Kafka's): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.coordinator.classic import HeartbeatArgs
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    require_group(ctx, AclOperation.READ, request.group_id)
    if not request.group_id:
        return HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    args = HeartbeatArgs(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(error_code=await ctx.broker.group_coordinator.heartbeat(args))


def error_response(request: HeartbeatRequest, version: int, code: int) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)
