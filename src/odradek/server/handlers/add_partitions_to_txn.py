"""AddPartitionsToTxn handler.

API: v0-v3 (the producer's form: one transactional id and its topics).

Behaviour (Kafka 3.9's): the transaction coordinator (coordinator/txn_coordinator.py) adds the
partitions to the id's transaction, which becomes Ongoing (and starts its timeout) with the first
ones. Every requested partition answers the same error: INVALID_PRODUCER_ID_MAPPING (unknown id or
other producer id), PRODUCER_FENCED (an older epoch; INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS (the previous transaction's markers are being written),
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE. A partition unknown to
the cluster fails the request before the coordinator is asked: UNKNOWN_TOPIC_OR_PARTITION for it,
OPERATION_NOT_ATTEMPTED for the others.

Deliberate deviations: v4-v5 (the brokers' batched and verify-only form, KIP-890) are not served: no
odradek broker sends them, and ApiVersions advertises v0-v3. throttle_time_ms is always 0.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from odradek.server.context import RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 3

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    keys = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {key for key in keys if ctx.broker.metadata_cache.partition(*key) is None}
    if unknown:
        errors = {
            key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for key in keys
        }
        return _response(request, errors)
    error = await ctx.broker.txn_coordinator.add_partitions(
        request.v3_and_below_transactional_id,
        request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch,
        keys,
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return _response(request, dict.fromkeys(keys, error))


def _response(
    request: AddPartitionsToTxnRequest, errors: dict[tuple[str, int], int]
) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            TopicResult(
                name=topic.name,
                results_by_partition=[PartitionResult(p, errors[(topic.name, p)]) for p in topic.partitions],
            )
            for topic in request.v3_and_below_topics
        ]
    )


def error_response(request: AddPartitionsToTxnRequest, version: int, code: int) -> AddPartitionsToTxnResponse:
    keys = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    return _response(request, dict.fromkeys(keys, code))
