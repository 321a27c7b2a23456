"""DescribeTransactions handler.

API: v0.

Behaviour (Kafka's): for each transactional id, its state as the transaction coordinator keeps it:
state name (Kafka's: Empty, Ongoing, PrepareCommit...), timeout, start time (-1 without an open
transaction), producer id and epoch, and the partitions of the open transaction by topic. Per id:
NOT_COORDINATOR (its `__transaction_state` partition is not led here), COORDINATOR_LOAD_IN_PROGRESS,
TRANSACTIONAL_ID_NOT_FOUND.

Deliberate deviations: no authorization (odradek has no ACLs). throttle_time_ms is always 0.

Authorization (Kafka's): DESCRIBE on each transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it); the topics the principal may not DESCRIBE are left out
of a transaction's partitions.
"""

from __future__ import annotations

from odradek.coordinator.txn_metadata import TxnMetadata
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_names
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 0

State = DescribeTransactionsResponse.TransactionState


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = []
    for transactional_id in request.transactional_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(State(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id))
            continue
        error, meta = ctx.broker.txn_coordinator.describe(transactional_id)
        states.append(_state(ctx, meta) if meta is not None else State(error, transactional_id))
    return DescribeTransactionsResponse(transaction_states=states)


def _state(ctx: RequestContext, meta: TxnMetadata) -> DescribeTransactionsResponse.TransactionState:
    topics: dict[str, list[int]] = {}
    described = authorized_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in meta.partitions)
    )
    for topic, partition in sorted(meta.partitions):
        if topic in described:
            topics.setdefault(topic, []).append(partition)
    return State(
        transactional_id=meta.transactional_id,
        transaction_state=meta.state.kafka_name,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[DescribeTransactionsResponse.TopicData(t, ps) for t, ps in topics.items()],
    )


def error_response(
    request: DescribeTransactionsRequest, version: int, code: int
) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[State(code, tid) for tid in request.transactional_ids]
    )
