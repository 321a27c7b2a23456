"""LeaveGroup handler.

API: v0-v5.

Behaviour: Kafka's classic LeaveGroup. v0-v2 name one member (`member_id`) and carry its error at
the top level; v3+ name a batch of members (member id and/or group.instance.id, KIP-345), each
answered on its own, the top level carrying only coordinator errors. A static member leaving by
instance id with another member id answers FENCED_INSTANCE_ID. Members leaving trigger a rebalance
of the others. An empty group id answers INVALID_GROUP_ID.

Deliberate deviations: the per-member `reason` (v5) is accepted and not logged.

Authorization (Kafka's): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.coordinator.classic import LeaveResult, LeavingMember
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.LEAVE_GROUP
MIN_VERSION = 0
MAX_VERSION = 5

FIRST_BATCH_VERSION = 3


def _leaving(request: LeaveGroupRequest, version: int) -> tuple[LeavingMember, ...]:
    if version < FIRST_BATCH_VERSION:
        return (LeavingMember(request.member_id, None),)
    return tuple(LeavingMember(m.member_id, m.group_instance_id) for m in request.members)


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.api_version
    if not request.group_id:
        return error_response(request, version, ErrorCode.INVALID_GROUP_ID)
    leaving = _leaving(request, version)
    result = await ctx.broker.group_coordinator.leave_group(request.group_id, leaving)
    return _response(result, version)


def _response(result: LeaveResult, version: int) -> LeaveGroupResponse:
    if version < FIRST_BATCH_VERSION:
        errors = [code for _, code in result.members if code != ErrorCode.NONE]
        top = result.error_code if result.error_code != ErrorCode.NONE or not errors else errors[0]
        return LeaveGroupResponse(error_code=top)
    return LeaveGroupResponse(
        error_code=result.error_code,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
            )
            for m, code in result.members
        ],
    )


def error_response(request: LeaveGroupRequest, version: int, code: int) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=code)
