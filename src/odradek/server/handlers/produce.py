"""Produce handler.

API: v3-v11.

Behaviour: every partition's record batches are appended by the ReplicaManager as leader (validated
first: size against max.message.bytes, magic, CRC32C, counts, timestamps; all-or-nothing per
partition), answered per partition with the base offset, log_append_time_ms (-1 for CreateTime
topics) and log_start_offset (v5+), or an error code (with error_message, v8+):
- acks other than -1, 0, 1: INVALID_REQUIRED_ACKS for every partition, nothing appended;
- a partition this broker does not host (topics are never auto-created by Produce):
  UNKNOWN_TOPIC_OR_PARTITION;
- an internal topic (__consumer_offsets...) written by any client but the admin client:
  INVALID_TOPIC_EXCEPTION;
- CORRUPT_MESSAGE (bad CRC, truncated or unknown compression), INVALID_RECORD (no batches, bad
  counts, control batches), MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT
  (magic 0/1 batches);
- idempotent batches (producer_id >= 0), checked against the partition's producer state:
  INVALID_PRODUCER_EPOCH (47) for an epoch older than the known one, OUT_OF_ORDER_SEQUENCE_NUMBER
  (45) for a sequence that does not follow the last one (or a new epoch not starting at 0); a
  re-sent batch still among the producer's last five is answered with its original base offset and
  NONE, and stored once;
- acks=-1: NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas (nothing appended),
  otherwise the answer waits (produce purgatory) until the high watermark covers the append:
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum, REQUEST_TIMED_OUT after
  timeout_ms.
Bounded work (invariant 9): the records of compressed batches are walked before the append
(`ReplicaManager.append_client_records`, `Log.check_records`; the append itself checks framing, CRC
and counts and walks only uncompressed batches). A request's compressed partitions share
ON_LOOP_DECOMPRESSION_BUDGET (1 MiB of decompressed records, about the cost of walking one
uncompressed 1 MiB batch) on the event loop; the partitions that need more are checked in one worker
thread, as Kafka validates on its request handler threads, while the loop serves other connections.
A batch decompressing past the limit of `records.validation` (64 MiB or max.message.bytes) is
MESSAGE_TOO_LARGE, with the same log line as any refused append.
acks=0 sends no response at all; if any partition failed, the connection is closed instead, as
Kafka does, so the producer notices (its request had no answer to carry the error). A non-null
Transactional batches (attributes bit 4): a request holding one without a transactional_id is
answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition (Kafka's answer to a transactional
write it does not authorize); batches of more than one producer id answer
INVALID_PRODUCER_ID_MAPPING for the whole request. With transaction.partition.verification.enable
(default true; KIP-890 part 1, as Kafka 3.6+), each partition led here whose transactional batch
starts the producer's transaction on it (no transaction of that producer ongoing in the partition)
is verified first: the leader asks the id's transaction coordinator with AddPartitionsToTxn v4
verify_only (replication/txn_verification.py; batched per coordinator broker, answered directly when
the coordinator is this broker), and the produce waits for the answer without blocking the event
loop. A partition not in the id's ongoing transaction answers INVALID_TXN_STATE (Produce v3-v10) or
TRANSACTION_ABORTABLE (v11), another epoch INVALID_PRODUCER_EPOCH, an unknown id or other producer id
INVALID_PRODUCER_ID_MAPPING, and a coordinator that cannot answer (CONCURRENT_TRANSACTIONS,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NETWORK_EXCEPTION)
NOT_ENOUGH_REPLICAS with the cause in error_message, which clients retry. A verified append must
still carry the partition's current verification guard: a marker written meanwhile (the transaction
ended) voids it, and the append answers INVALID_TXN_STATE. Once the producer's transaction is
ongoing in a partition, its later batches there are not verified again. The partition's producer
state then checks epoch and sequence as for any idempotent batch.

Authorization (Kafka's): a request holding transactional batches needs WRITE on its transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request); each topic needs WRITE (else
TOPIC_AUTHORIZATION_FAILED for its partitions, before any other check of the topic).
Deliberate deviations: v0-v2 are not served (their magic 0/1 message sets cannot be stored: only
RecordBatch v2 is), so ApiVersions advertises v3+ and older requests get UNSUPPORTED_VERSION.
record_errors is always empty: a record that fails validation fails its whole partition, and
error_message names the problem; no batch_index is reported. current_leader and node_endpoints
(v10+, KIP-951) are not filled: a client told NOT_LEADER_OR_FOLLOWER (in a cluster, a partition
that moved) finds the new leader through Metadata, as before KIP-951.
throttle_time_ms comes from the quotas (server/client_quotas.py: producer_byte_rate, counting the
whole request's size as Kafka does, and request_percentage), set by the dispatcher's quota stage,
which also mutes a throttled connection (KIP-219), an acks=0 producer's too.
Each partition's batches go to its log with one positional write, as Kafka writes each partition's
log apart, so a request over k partitions makes k write system calls (a confluent-kafka Produce
holds one partition). Submitting a request's writes together (Linux AIO, io_uring) cost more CPU
per write than pwrite on ext4 here (bench/write_batching.py, docs/benchmarks.md).
A write that fails on the disk (ENOSPC, EIO) answers KAFKA_STORAGE_ERROR (56) for that partition
with the log unchanged, and the log dir stays online: the next produce tries again, so appends work
once space returns, without a restart (Kafka marks the dir offline and moves its partitions away).
The ReplicaManager logs the first failure per partition and the recovery, not every request.
"""

from __future__ import annotations

import logging

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.produce import ProduceRequest, ProduceResponse
from odradek.protocol.primitives import ZERO_UUID
from odradek.protocol.records.batch import (
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
    iter_batches,
)
from odradek.protocol.records.errors import RecordsError
from odradek.protocol.records.validation import has_batch_with
from odradek.replication.partition import Verified
from odradek.replication.txn_verification import produce_error
from odradek.replication.types import PartitionResponse, TopicPartition
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext
from odradek.server.socket_server import CloseConnection

API_KEY = ApiKey.PRODUCE
MIN_VERSION = 3
MAX_VERSION = 11

log = logging.getLogger(__name__)

ADMIN_CLIENT_ID = "__admin_client"  # the only client Kafka lets write internal topics
VALID_ACKS = (-1, 0, 1)

PartitionResult = ProduceResponse.PartitionProduceResponse


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    if request.transactional_id is None and _has_transactional_records(request):
        raise KafkaError(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional records need a transactional id"
        )
    if (
        request.transactional_id is not None
        and not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        and _has_transactional_records(request)
    ):
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.acks not in VALID_ACKS:
        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={request.acks} is not -1, 0 or 1")
    responses, entries = _check_topics(ctx, request)
    verified: dict[TopicPartition, Verified] = {}
    if (
        request.transactional_id is not None
        and ctx.broker.config["transaction.partition.verification.enable"]
    ):
        verified = await _verify_transactional(ctx, request.transactional_id, entries, responses)
    if entries:
        appended = await ctx.broker.replica_manager.append_client_records(
            entries, request.acks, request.timeout_ms, verified
        )
        responses.update(appended)
    if request.acks == 0:
        failed = [key for key, response in responses.items() if response.error_code != ErrorCode.NONE]
        if failed:
            raise CloseConnection(f"acks=0 produce failed for {failed[0][0]}-{failed[0][1]}")
        return None
    return _response(request, responses)


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether any partition holds a transactional batch (Kafka looks at each partition's first
    batch, the only one it accepts; odradek accepts several, so it looks at all)."""
    return any(
        isinstance(data.records, memoryview) and has_batch_with(data.records, TRANSACTIONAL_MASK)
        for topic in request.topic_data
        for data in topic.partition_data
    )


async def _verify_transactional(
    ctx: RequestContext,
    transactional_id: str,
    entries: dict[TopicPartition, memoryview],
    responses: dict[TopicPartition, PartitionResponse],
) -> dict[TopicPartition, Verified]:
    """Verify the transactional partitions led here with the id's coordinator (see the module
    docstring); the failed ones move from `entries` to `responses`. Returns the producer and guard
    each verified partition's append must carry."""
    producers: set[tuple[int, int]] = set()
    transactional: list[TopicPartition] = []
    for key, records in entries.items():
        found = _transactional_producers(records)
        if found:
            producers |= found
            transactional.append(key)
    if not producers:
        return {}
    if len(producers) > 1:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one producer ID"
        )
    ((producer_id, producer_epoch),) = producers
    verified = ctx.broker.replica_manager.start_transaction_verification(
        transactional, producer_id, producer_epoch
    )
    to_verify = [key for key, (_, guard) in verified.items() if guard is not None]
    if not to_verify:
        return verified
    failed = await ctx.broker.txn_verifier.verify(transactional_id, producer_id, producer_epoch, to_verify)
    for key, code in failed.items():
        error, message = produce_error(code, ctx.api_version)
        log.debug("Transactional produce of %s to %s-%d not verified: error %d", transactional_id, *key, code)
        entries.pop(key, None)
        verified.pop(key, None)
        responses[key] = PartitionResponse(error, error_message=message)
    return verified


def _transactional_producers(records: memoryview) -> set[tuple[int, int]]:
    """(producer id, epoch) of each transactional batch; a malformed batch is left to validation."""
    if len(records) < RECORD_BATCH_OVERHEAD or not has_batch_with(records, TRANSACTIONAL_MASK):
        return set()
    found: set[tuple[int, int]] = set()
    try:
        for _, header in iter_batches(records):
            if header.attributes & TRANSACTIONAL_MASK and header.producer_id >= 0:
                found.add((header.producer_id, header.producer_epoch))
    except RecordsError:
        pass
    return found


def _check_topics(
    ctx: RequestContext, request: ProduceRequest
) -> tuple[dict[TopicPartition, PartitionResponse], dict[TopicPartition, memoryview]]:
    """Refuse topics the principal may not write and internal topics for ordinary clients; collect the
    rest as (topic, partition) -> records."""
    responses: dict[TopicPartition, PartitionResponse] = {}
    entries: dict[TopicPartition, memoryview] = {}
    admin = ctx.header.client_id == ADMIN_CLIENT_ID
    for topic in request.topic_data:
        known = ctx.broker.metadata_cache.topic(topic.name)
        refused = known is not None and known.is_internal and not admin
        authorized = authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        for data in topic.partition_data:
            # a plain tuple, equal to TopicPartition and cheaper to build on this path
            key: TopicPartition = (topic.name, data.index)  # type: ignore[assignment]
            if not authorized:
                responses[key] = PartitionResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif refused:
                message = f"Cannot append to internal topic {topic.name}"
                responses[key] = PartitionResponse(ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=message)
            else:
                records = data.records  # decoded as a memoryview of the request, or None
                entries[key] = records if isinstance(records, memoryview) else memoryview(b"")
    return responses, entries


def _response(request: ProduceRequest, responses: dict[TopicPartition, PartitionResponse]) -> ProduceResponse:
    """The answer, its structs built by position in their schema's field order (index, error_code,
    base_offset, log_append_time_ms, log_start_offset, record_errors, error_message; name, topic_id,
    partition_responses): 1.9% fewer instructions a Produce than by keyword (docs/benchmarks.md)."""
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, index), response in responses.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(
                index,
                response.error_code,
                response.base_offset,
                response.log_append_time,
                response.log_start_offset,
                [],
                response.error_message,
            )
        )
    topics = by_topic.items()
    if len(by_topic) > 1:  # in the request's order
        order = {topic.name: position for position, topic in enumerate(request.topic_data)}
        topics = sorted(topics, key=lambda item: order[item[0]])  # type: ignore[assignment]
    return ProduceResponse(
        [ProduceResponse.TopicProduceResponse(name, ZERO_UUID, partitions) for name, partitions in topics]
    )


def error_response(request: ProduceRequest, version: int, code: int) -> ProduceResponse:
    """Every partition of the request answers `code`; with acks=0 the connection closes instead."""
    if request.acks == 0:
        raise CloseConnection(f"acks=0 produce failed with {ErrorCode(code).name}")
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    PartitionResult(index=data.index, error_code=code, base_offset=-1)
                    for data in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )
