"""EndTxn handler.

API: v0-v4.

Behaviour (Kafka 3.9's): the transaction coordinator appends PrepareCommit or PrepareAbort to
`__transaction_state` and answers; the markers are then written to every partition of the
transaction and CompleteCommit/CompleteAbort appended (coordinator/txn_coordinator.py). Errors:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS (the same decision still being completed, or another change in flight),
INVALID_TXN_STATE (no transaction, or the opposite decision already taken); a retry of a completed
decision answers NONE. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE as
the other coordinator APIs.

Deliberate deviations: none (throttle_time_ms comes from the request quota).

Authorization (Kafka's): WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_transactional_id
from odradek.server.context import RequestContext

API_KEY = ApiKey.END_TXN
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    require_transactional_id(ctx, AclOperation.WRITE, request.transactional_id)
    error = await ctx.broker.txn_coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=error)


def error_response(request: EndTxnRequest, version: int, code: int) -> EndTxnResponse:
    return EndTxnResponse(error_code=code)
