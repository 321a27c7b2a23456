"""TxnOffsetCommit handler.

API: v0-v4.

Behaviour (Kafka 3.9's): the group coordinator stores the offsets in `__consumer_offsets` in a
transactional batch of the producer (answered once committed, acks=-1) and keeps them pending: they
become the group's committed offsets when the producer's COMMIT marker reaches the partition, and
are dropped on ABORT (coordinator/shard.py; a reload replays them the same way). A member id,
group.instance.id or generation given (v3+) must be the group's: UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, ILLEGAL_GENERATION otherwise. Per partition: UNKNOWN_TOPIC_OR_PARTITION for a
partition the cluster does not have, OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes,
INVALID_PRODUCER_EPOCH for a producer epoch older than the one the partition knows (a fenced
producer); NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the other group APIs.

With transaction.partition.verification.enable (default true; KIP-890 part 1, as Kafka 3.9, whose
answers tests/differential compares), the group's `__consumer_offsets` partition is first verified
with the transactional id's coordinator (replication/txn_verification.py, as a transactional
produce): not in the producer's transaction (no AddOffsetsToTxn) answers INVALID_TXN_STATE, another
epoch INVALID_PRODUCER_EPOCH, an unknown id or another producer id INVALID_PRODUCER_ID_MAPPING, for
every partition of the request that passed its own checks; a coordinator that cannot answer
(unreachable, loading, moved, busy) COORDINATOR_NOT_AVAILABLE, which clients retry.

Deliberate deviations: the producer's epoch is checked by the partition's producer state as the
batch is appended and again when its marker is written. The shard, the
partition's only writer, numbers its transactional batches itself from what it replayed; were the
producer's batches cleaned from the partition while its producer state remains, the next batch of
that producer would be refused (UNKNOWN_SERVER_ERROR). throttle_time_ms comes from the request quota.

Authorization (Kafka's): WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
READ on the group (else GROUP_AUTHORIZATION_FAILED), both for every partition; READ on each topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.classic import CommitArgs
from odradek.coordinator.group import CommittedOffset, TopicPartition
from odradek.coordinator.partitioning import OFFSETS_TOPIC
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import require_group, require_transactional_id
from odradek.server.context import RequestContext
from odradek.server.handlers.offset_commit import checked_offsets

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 4

# The transaction coordinator could not answer the verification: a code the client retries
_COORDINATOR_UNREACHABLE = frozenset(
    {
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)

Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    require_transactional_id(ctx, AclOperation.WRITE, request.transactional_id)
    require_group(ctx, AclOperation.READ, request.group_id)
    coordinator = ctx.broker.group_coordinator
    errors, offsets = checked_offsets(
        ctx,
        request.topics,
        lambda p, now_ms: CommittedOffset(
            p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now_ms
        ),
    )
    if offsets and ctx.broker.config["transaction.partition.verification.enable"]:
        refused = await _verified(ctx, request)
        if refused != ErrorCode.NONE:
            errors.update(dict.fromkeys(offsets, refused))
            offsets = {}
    if offsets:
        args = CommitArgs(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            offsets=offsets,
        )
        errors.update(await coordinator.commit_txn_offsets(args, request.producer_id, request.producer_epoch))
    return _response(request, lambda tp: errors[tp])


async def _verified(ctx: RequestContext, request: TxnOffsetCommitRequest) -> int:
    """NONE when the group's offsets partition is in the producer's transaction with this epoch,
    else why not; NONE too before the offsets topic exists (the commit then answers as without)."""
    partition = ctx.broker.group_coordinator.partition_for(request.group_id)
    if partition is None:
        return ErrorCode.NONE
    key = TopicPartition(OFFSETS_TOPIC, partition)
    failed = await ctx.broker.txn_verifier.verify(
        request.transactional_id, request.producer_id, request.producer_epoch, [key]
    )
    code = failed.get(key, ErrorCode.NONE)
    if code == ErrorCode.TRANSACTION_ABORTABLE:  # v0-v4 predate it (KIP-890 part 2)
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if code in _COORDINATOR_UNREACHABLE else code


def _response(
    request: TxnOffsetCommitRequest, error_of: Callable[[TopicPartition], int]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            Topic(
                name=t.name,
                partitions=[
                    Partition(p.partition_index, error_of(TopicPartition(t.name, p.partition_index)))
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def error_response(request: TxnOffsetCommitRequest, version: int, code: int) -> TxnOffsetCommitResponse:
    return _response(request, lambda _: code)
