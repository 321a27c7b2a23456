"""FindCoordinator handler.

API: v0-v5.

Behaviour: for key type GROUP (0) the coordinator is the leader of the group's `__consumer_offsets`
partition (`abs(hashCode(group id)) % partitions`, Kafka's hash); the topic is created on first use.
v0-v3 look up one `key`, v4+ every `coordinator_keys` entry, each answered on its own. A partition
without a live leader, or whose leader has no endpoint on the listener the request arrived on, answers
COORDINATOR_NOT_AVAILABLE. An unknown key type answers INVALID_REQUEST. Key type TRANSACTION (1)
is answered the same way by the transaction coordinator: the leader of the transactional id's
`__transaction_state` partition (same hash), the topic created on first use.

Deliberate deviations: the first call creates `__consumer_offsets` (or `__transaction_state`)
and waits (up to two seconds, without blocking the broker) until this broker serves its partitions,
so it usually answers with the coordinator at once (Kafka answers COORDINATOR_NOT_AVAILABLE until the
topic exists); it then waits up to a second for the group's (or id's) partition to finish loading.

Authorization (Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) or on the
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
"""

from __future__ import annotations

from odradek.coordinator.coordinator import CoordinatorLocation
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 5

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

Coordinator = FindCoordinatorResponse.Coordinator


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx, key, request.key_type) for key in request.coordinator_keys]
        )
    found = await _find(ctx, request.key, request.key_type)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        # Kafka's v1-v3 answer names the error even when it is NONE (its Errors.NONE.message())
        error_message=found.error_message if found.error_code else "NONE",
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    location: CoordinatorLocation
    if key_type == TRANSACTION_KEY_TYPE:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return _failed(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        location = await ctx.broker.txn_coordinator.find_coordinator(key)
    elif key_type == GROUP_KEY_TYPE:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return _failed(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        location = await ctx.broker.group_coordinator.find_coordinator(key)
    else:
        return _failed(key, ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}.")
    if location.node is None:
        return _failed(key, location.error_code, None)
    endpoint = location.node.endpoint(ctx.listener)
    if endpoint is None:
        return _failed(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"No endpoint on listener {ctx.listener}.")
    return Coordinator(key=key, node_id=location.node.broker_id, host=endpoint.host, port=endpoint.port)


def _failed(key: str, code: int, message: str | None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)


def error_response(request: FindCoordinatorRequest, version: int, code: int) -> FindCoordinatorResponse:
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_failed(key, code, None) for key in request.coordinator_keys]
        )
    return FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)
