"""ListGroups handler.

API: v0-v5.

Behaviour: the groups this broker coordinates (group id, protocol type; state v4+; type v5+:
"classic", or "consumer" for a KIP-848 consumer-protocol group, whose protocol type is "consumer"
and whose state is Empty, Assigning, Reconciling or Stable), filtered by state (v4+,
case-insensitive, empty = all) and by type (v5+, case-insensitive, empty = all). While a
`__consumer_offsets` partition is still loading the answer carries COORDINATOR_LOAD_IN_PROGRESS
along with the groups already loaded, as Kafka does.

Authorization (Kafka's): with DESCRIBE on the cluster every group is listed, else only the groups
the principal may DESCRIBE.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize_cluster, authorized_names
from odradek.server.context import RequestContext

API_KEY = ApiKey.LIST_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    error, listings = ctx.broker.group_coordinator.list_groups()
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        allowed = authorized_names(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in listings)
        )
        listings = [g for g in listings if g.group_id in allowed]
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    if types:
        listings = [g for g in listings if g.group_type in types]
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in sorted(listings, key=lambda g: g.group_id)
            if not states or g.state.lower() in states
        ],
    )


def error_response(request: ListGroupsRequest, version: int, code: int) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)
