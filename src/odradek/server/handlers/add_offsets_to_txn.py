"""AddOffsetsToTxn handler.

API: v0-v4.

Behaviour (Kafka 3.9's): the transaction coordinator adds the group's `__consumer_offsets`
partition (`partition_for(group_id)`) to the id's transaction, so that the marker ending it is also
written there and completes the offsets the producer commits with TxnOffsetCommit. Errors as
AddPartitionsToTxn (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2). A `__consumer_offsets`
that does not exist yet is created first, as a FindCoordinator for the group would create it (Java
clients send AddOffsetsToTxn before they look for the group's coordinator);
COORDINATOR_NOT_AVAILABLE when it cannot be.

Deliberate deviations: none (throttle_time_ms comes from the request quota).

Authorization (Kafka's): WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
then READ on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group, require_transactional_id
from odradek.server.context import RequestContext

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    require_transactional_id(ctx, AclOperation.WRITE, request.transactional_id)
    require_group(ctx, AclOperation.READ, request.group_id)
    error = await ctx.broker.txn_coordinator.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=error)


def error_response(request: AddOffsetsToTxnRequest, version: int, code: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=code)
