"""JoinGroup handler.

API: v0-v9.

Behaviour: Kafka's classic JoinGroup through the group coordinator. The answer may wait for the
rebalance (up to the rebalance timeout). v0 has no rebalance timeout: the session timeout stands in.
v4+ members without a member id get MEMBER_ID_REQUIRED (79) and the id to rejoin with (KIP-394);
static members (v5+ group.instance.id) never do. Protocol metadata is passed through untouched, so
every client-side assignor works. The member's host is recorded as Kafka does ("/<address>").
An empty group id answers INVALID_GROUP_ID; a session timeout outside
[group.min.session.timeout.ms, group.max.session.timeout.ms] INVALID_SESSION_TIMEOUT.

Deliberate deviations: the `reason` (v8+) is accepted and not logged.

Authorization (Kafka's): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.coordinator.classic import JoinArgs, JoinResult
from odradek.coordinator.group import Protocol
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.JOIN_GROUP
MIN_VERSION = 0
MAX_VERSION = 9

FIRST_VERSION_REQUIRING_MEMBER_ID = 4


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.api_version
    if not request.group_id:
        return error_response(request, version, ErrorCode.INVALID_GROUP_ID)
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
    args = JoinArgs(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host if ctx.client_host.startswith("/") else f"/{ctx.client_host}",
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout,
        protocol_type=request.protocol_type,
        protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=version >= FIRST_VERSION_REQUIRING_MEMBER_ID,
    )
    result = await ctx.broker.group_coordinator.join_group(args)
    return _response(result, version)


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


def error_response(request: JoinGroupRequest, version: int, code: int) -> JoinGroupResponse:
    return _response(JoinResult(code, request.member_id), version)
