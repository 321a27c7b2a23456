"""ListTransactions handler.

API: v0-v2.

Behaviour (Kafka's): the transactional ids of every `__transaction_state` partition this broker
leads, with producer id and state name (Kafka's: Empty, Ongoing...), filtered by `state_filters`
and `producer_id_filters` when they are not empty and, v1, by `duration_filter` (only ids whose last
transaction started at least that many milliseconds ago) and, v2, by `transactional_id_pattern`
when it is not null or empty: a regular expression the whole id must match (case-sensitive); one
Kafka's RE2/J would refuse answers INVALID_REGULAR_EXPRESSION with no transactions (as Kafka 4.4
answers). State filters that name no state are echoed in `unknown_state_filters`.
COORDINATOR_LOAD_IN_PROGRESS while a partition loads (with what the loaded ones hold).

Deliberate deviation: Python's `re` stands in for RE2/J (`coordinator.consumer_group.regex_problem`,
as for KIP-848 subscriptions), so RE2/J-only syntax is refused (`\\p{L}`) or read differently (POSIX
classes such as `[[:alpha:]]`) where Kafka 4.4 matches with it.

Deliberate deviations: no authorization (odradek has no ACLs). throttle_time_ms is always 0.

Authorization (Kafka's): only the transactional ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

import re

from odradek.coordinator.consumer_group import regex_problem
from odradek.coordinator.txn_metadata import TxnMetadata, TxnState
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 2

STATE_NAMES = frozenset(state.kafka_name for state in TxnState)


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    pattern = request.transactional_id_pattern
    if pattern and regex_problem(pattern) is not None:
        return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    matches = re.compile(pattern).fullmatch if pattern else None
    error, found = ctx.broker.txn_coordinator.list_transactions()
    now_ms = ctx.broker.clock.time_ms()
    listed = [
        ListTransactionsResponse.TransactionState(m.transactional_id, m.producer_id, m.state.kafka_name)
        for m in found
        if _wanted(m, request, now_ms)
        and (matches is None or matches(m.transactional_id) is not None)
        and authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id, False)
    ]
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=[name for name in request.state_filters if name not in STATE_NAMES],
        transaction_states=listed,
    )


def _wanted(meta: TxnMetadata, request: ListTransactionsRequest, now_ms: int) -> bool:
    if request.state_filters and meta.state.kafka_name not in request.state_filters:
        return False
    if request.producer_id_filters and meta.producer_id not in request.producer_id_filters:
        return False
    if request.duration_filter >= 0:
        return meta.start_ms >= 0 and now_ms - meta.start_ms >= request.duration_filter
    return True


def error_response(request: ListTransactionsRequest, version: int, code: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=code)
