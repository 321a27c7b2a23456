"""SyncGroup handler.

API: v0-v5.

Behaviour: Kafka's classic SyncGroup. A follower's request waits until the leader's assignment is
stored in `__consumer_offsets`; the leader's request stores it and answers everyone. v5 requests
must name the protocol type and name (else INCONSISTENT_GROUP_PROTOCOL) and get them back. An empty
group id answers INVALID_GROUP_ID.

Authorization (Kafka's): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.coordinator.classic import SyncArgs, SyncResult
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.SYNC_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.api_version
    if not request.group_id:
        return error_response(request, version, ErrorCode.INVALID_GROUP_ID)
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return error_response(request, version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    args = SyncArgs(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    result = await ctx.broker.group_coordinator.sync_group(args)
    return _response(result)


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def error_response(request: SyncGroupRequest, version: int, code: int) -> SyncGroupResponse:
    return _response(SyncResult(code))
