"""DescribeGroups handler.

API: v0-v5.

Behaviour: per requested group, from its coordinator: state (Empty, PreparingRebalance,
CompletingRebalance, Stable; Dead for a group that does not exist), protocol type, and its members
(member id, group.instance.id v4+, client id, client host). The selected protocol and each member's
metadata and assignment are reported only when the group is Stable, as Kafka does. A group whose
coordinator is elsewhere or loading carries that error. v3+ authorized operations are reported only
when asked for: those of READ, DELETE, DESCRIBE the principal is allowed (no authorizer: all).

Authorization (Kafka's): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it.
"""

from __future__ import annotations

from odradek.coordinator.classic import GroupDescription
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_operations
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

Described = DescribeGroupsResponse.DescribedGroup
Member = DescribeGroupsResponse.DescribedGroupMember


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = ctx.broker.group_coordinator
    described = []
    for group_id in request.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if request.include_authorized_operations:
            operations = authorized_operations(ctx, ResourceType.GROUP, group_id)
        described.append(_described(await coordinator.describe_group(group_id), operations))
    return DescribeGroupsResponse(groups=described)


def _described(group: GroupDescription, operations: int) -> Described:
    return Described(
        error_code=group.error_code,
        group_id=group.group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=group.protocol,
        members=[
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in group.members
        ],
        authorized_operations=operations,
    )


def error_response(request: DescribeGroupsRequest, version: int, code: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[Described(error_code=code, group_id=g) for g in request.groups])
