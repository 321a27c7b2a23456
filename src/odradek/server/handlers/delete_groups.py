"""DeleteGroups handler.

API: v0-v3.

Behaviour: deletes each named group that has no members: its committed offsets and group metadata
are tombstoned in `__consumer_offsets`. Per group: NON_EMPTY_GROUP while it has members,
GROUP_ID_NOT_FOUND when it does not exist, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when its
coordinator is elsewhere or loading. v3's per-group error message is always null: each error
code above is its whole cause (odradek has no GROUP_DELETION_FAILED to explain). An empty share
group is deleted with its share-partition state (the share-partitions it was assigned, and those
this broker's share coordinator keeps for it).

Authorization (Kafka's): DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext
from odradek.server.share_partitions import TopicIdPartition

API_KEY = ApiKey.DELETE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 3

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = [
        Result(
            group_id=g,
            error_code=(
                await _delete(ctx, g)
                if authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, g)
                else ErrorCode.GROUP_AUTHORIZATION_FAILED
            ),
        )
        for g in request.groups_names
    ]
    return DeleteGroupsResponse(results=results)


async def _delete(ctx: RequestContext, group_id: str) -> int:
    """Delete the group; a deleted share group's share-partition state goes with it."""
    coordinator = ctx.broker.group_coordinator
    share = coordinator.find_share_group(group_id)
    is_share = share is not None
    initialized = share.initialized if share is not None else {}
    error = await coordinator.delete_group(group_id)
    if error == ErrorCode.NONE and is_share:
        manager = ctx.broker.share_partitions
        partitions = set(await manager.read_start_offsets(group_id))
        partitions |= {TopicIdPartition(t, p) for t, (_, ps) in initialized.items() for p in ps}
        await manager.delete_state(group_id, sorted(partitions))
    return error


def error_response(request: DeleteGroupsRequest, version: int, code: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[Result(group_id=g, error_code=code) for g in request.groups_names])
