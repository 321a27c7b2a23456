"""AddPartitionsToTxn handler.

API: v0-v5. v0-v3 are the producer's form (one transactional id and its topics); v4-v5 the brokers'
batched form (KIP-890 part 1): `transactions`, each with its id, producer id and epoch, topics and
`verify_only`, answered in `results_by_transaction` (one result per transaction, in request order).

Behaviour (Kafka 3.9's), per transaction:
- a partition unknown to the cluster fails the transaction before the coordinator is asked:
  UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for its other partitions;
- verify_only false (and every v0-v3 request): the transaction coordinator
  (coordinator/txn_coordinator.py) adds the partitions to the id's transaction, which becomes
  Ongoing (and starts its timeout) with the first ones. Every partition answers the same error:
  INVALID_PRODUCER_ID_MAPPING (unknown id or other producer id), PRODUCER_FENCED (an older epoch;
  INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS (the previous transaction's markers are
  being written), INVALID_REQUEST (an empty id), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
  COORDINATOR_NOT_AVAILABLE;
- verify_only true (v4+): nothing is added; each partition answers NONE if it is in the id's
  transaction and TRANSACTION_ABORTABLE if not (a partition leader maps that to INVALID_TXN_STATE
  for producers older than Produce v11); INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (another
  epoch), CONCURRENT_TRANSACTIONS (PrepareCommit/PrepareAbort), INVALID_REQUEST (an empty id) and
  the coordinator errors answer every partition of the transaction.
The transactions of one v4+ request are handled concurrently; the top-level error_code is set only
when the whole request fails (the dispatcher's error_response: every transaction then goes
unanswered, as in Kafka).

Deliberate deviations: Kafka accepts v4+ only from brokers (CLUSTER_ACTION on the cluster,
CLUSTER_AUTHORIZATION_FAILED otherwise); odradek has no ACLs, so any client may send v4+, as it may
send WriteTxnMarkers. throttle_time_ms comes from the request quota.

Authorization (Kafka's): v4+ (brokers' batched requests) needs CLUSTER_ACTION on the cluster (else
CLUSTER_AUTHORIZATION_FAILED and a WARNING); each transaction WRITE on its transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for its partitions) and on each topic (else
TOPIC_AUTHORIZATION_FAILED for that topic's partitions, OPERATION_NOT_ATTEMPTED for the others).
"""

from __future__ import annotations

import asyncio

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_names, require_cluster_action
from odradek.server.context import RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 5
FIRST_BROKER_VERSION = 4

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.api_version < FIRST_BROKER_VERSION:
        transaction = Transaction(
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            topics=request.v3_and_below_topics,
        )
        errors = await _handle_transaction(ctx, transaction)
        results = _topic_results(transaction.topics, errors)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)
    require_cluster_action(ctx)
    answered = await asyncio.gather(*(_handle_transaction(ctx, t) for t in request.transactions))
    return AddPartitionsToTxnResponse(
        results_by_transaction=[
            TxnResult(transaction.transactional_id, _topic_results(transaction.topics, errors))
            for transaction, errors in zip(request.transactions, answered, strict=True)
        ]
    )


async def _handle_transaction(ctx: RequestContext, transaction: Transaction) -> dict[TopicPartition, int]:
    keys = [TopicPartition(t.name, p) for t in transaction.topics for p in t.partitions]
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transaction.transactional_id):
        return dict.fromkeys(keys, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authorized_names(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in transaction.topics)
    )
    if any(key.topic not in writable for key in keys):
        return {
            key: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if key.topic not in writable
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for key in keys
        }
    unknown = {key for key in keys if ctx.broker.metadata_cache.partition(*key) is None}
    if unknown:
        return {
            key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for key in keys
        }
    coordinator = ctx.broker.txn_coordinator
    tid, pid, epoch = transaction.transactional_id, transaction.producer_id, transaction.producer_epoch
    if transaction.verify_only:
        return coordinator.verify_partitions(tid, pid, epoch, keys)
    error = await coordinator.add_partitions(tid, pid, epoch, keys) if tid else ErrorCode.INVALID_REQUEST
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(keys, error)


def _topic_results(topics: list[Topic], errors: dict[TopicPartition, int]) -> list[TopicResult]:
    return [
        TopicResult(
            name=topic.name,
            results_by_partition=[
                PartitionResult(p, errors[TopicPartition(topic.name, p)]) for p in topic.partitions
            ],
        )
        for topic in topics
    ]


def error_response(request: AddPartitionsToTxnRequest, version: int, code: int) -> AddPartitionsToTxnResponse:
    if version >= FIRST_BROKER_VERSION:
        return AddPartitionsToTxnResponse(error_code=code)
    keys = [TopicPartition(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=_topic_results(request.v3_and_below_topics, dict.fromkeys(keys, code))
    )
