"""ListOffsets handler.

API: v1-v11.

Behaviour, per partition (offset, timestamp, and leader_epoch in v4+: the epoch that wrote the
offset, from the partition's leader epoch cache, or -1 when the cache does not cover it):
- timestamp -1 (LATEST): the high watermark for read_uncommitted consumers, the last stable offset
  for read_committed ones (isolation_level, v2+), the log end offset for a broker replica
  (replica_id >= 0); answered with the partition's current leader epoch;
- -2 (EARLIEST) and -4 (EARLIEST_LOCAL, v8+): the log start offset;
- -3 (MAX_TIMESTAMP, v7+): the first record carrying the largest timestamp, with that timestamp;
- -5 (LATEST_TIERED, v9+) and -6 (EARLIEST_PENDING_UPLOAD, v11+): offset -1, timestamp -1,
  leader epoch -1, as Kafka answers when nothing is in (or on its way to) remote storage: odradek
  has no tiered storage (before v11, -6 is looked up as a timestamp like any other);
- any other timestamp: the first record whose timestamp is >= it, with its timestamp.
A lookup finding nothing below the offset the requester may read (HW / LSO, or LEO for replicas)
answers NONE with offset -1 and timestamp -1. Errors: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER (replica_id -2, Kafka's debugging consumer, may ask a follower),
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current_leader_epoch (v4+) older / newer than the
partition's, INVALID_REQUEST for a partition named twice.

Bounded work: a lookup by timestamp (or -3) reads record timestamps from the log (the batches
whose maxTimestamp reaches it, decompressed in bounded pieces, keys and values never kept), so a
request holding one, or naming more than ON_LOOP_PARTITIONS (1000) partitions, is answered in a
worker thread, as Kafka answers on its request handler threads (over a copy of the ReplicaManager's
partition map, taken on the event loop where the map lives); smaller requests of -1, -2, -4 and
-5 only are answered on the event loop from the partitions' offsets. (Decoding the request and
encoding the response stay on the loop: a 3 MB request naming 250,000 partitions still holds it
about 0.12 s.)

v10's timeout_ms bounds a wait on remote storage, which odradek never does: it is not used.
Kafka 4.4 answers UNSUPPORTED_VERSION for a negative timestamp it does not know at the request's
version (-6 before v11, -5 before v9, ..., -7); odradek looks them up as timestamps.

Deliberate deviations: v0 (the multi-offset answer built from segment modification times) is not
served. throttle_time_ms comes from the request quota.

Authorization (Kafka's): DESCRIBE on each topic; a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from odradek.replication.partition import MAX_TIMESTAMP
from odradek.replication.replica_manager import OffsetLookups
from odradek.replication.types import ListOffsetsPartitionRequest, ListOffsetsPartitionResult
from odradek.scheduler import Lane
from odradek.security.authorizer import AclOperation
from odradek.server.authz import refusing_topics
from odradek.server.context import RequestContext

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 1
MAX_VERSION = 11

LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # v11+

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
ON_LOOP_PARTITIONS = 1000  # about 5 ms of lookups

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    if ctx.api_version >= 11:  # nothing is pending upload where nothing is tiered: answered as -5
        for p in (p for t in request.topics for p in t.partitions):
            if p.timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
                p.timestamp = LATEST_TIERED_TIMESTAMP
    return await refusing_topics(ctx, request, AclOperation.DESCRIBE, _handle, error_response)


async def _handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    if _needs_worker(request):
        lookups = ctx.broker.replica_manager.offset_lookups(in_worker=True)  # on the loop
        return await ctx.broker.scheduler.run(Lane.REQUEST, _answer, lookups, request)
    return _answer(ctx.broker.replica_manager.offset_lookups(), request)


def _needs_worker(request: ListOffsetsRequest) -> bool:
    """Whether answering may read records, or visits more partitions than the loop should."""
    partitions = [p for t in request.topics for p in t.partitions]
    return len(partitions) > ON_LOOP_PARTITIONS or any(
        p.timestamp >= 0 or p.timestamp == MAX_TIMESTAMP for p in partitions
    )


def _answer(offsets: OffsetLookups, request: ListOffsetsRequest) -> ListOffsetsResponse:
    counts = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    lookups = [
        ListOffsetsPartitionRequest(t.name, p.partition_index, p.timestamp, p.current_leader_epoch)
        for t in request.topics
        for p in t.partitions
        if counts[(t.name, p.partition_index)] == 1
    ]
    consumer = request.replica_id == CONSUMER_REPLICA_ID
    results = offsets.offsets_for_timestamp(
        lookups,
        request.isolation_level if consumer else None,
        fetch_only_from_leader=request.replica_id != DEBUGGING_REPLICA_ID,
    )
    found = {(r.topic, r.partition): r for r in results}
    return ListOffsetsResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[_partition(found.get((t.name, p.partition_index)), p) for p in t.partitions],
            )
            for t in request.topics
        ]
    )


def _partition(
    result: ListOffsetsPartitionResult | None, requested: ListOffsetsRequest.ListOffsetsPartition
) -> PartitionResponse:
    if result is None:  # named twice in the request
        return PartitionResponse(
            partition_index=requested.partition_index, error_code=ErrorCode.INVALID_REQUEST
        )
    return PartitionResponse(
        partition_index=result.partition,
        error_code=result.error_code,
        timestamp=result.timestamp,
        offset=result.offset,
        leader_epoch=result.leader_epoch,
    )


def error_response(request: ListOffsetsRequest, version: int, code: int) -> ListOffsetsResponse:
    """Every partition of the request carrying `code` (offset and timestamp -1)."""
    return ListOffsetsResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[
                    PartitionResponse(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )
