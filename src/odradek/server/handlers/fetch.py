"""Fetch handler.

API: v4-v17.

Behaviour: partitions are named by topic (v4-v12) or topic id (v13+; an unknown id answers
UNKNOWN_TOPIC_ID for its partitions) and read by the ReplicaManager in request order:
- consumers (replica id -1) read below the high watermark (isolation_level 0) or the last stable
  offset (1); a broker replica (replica id >= 0, from ReplicaState in v15+) reads to the log end
  offset and its fetch offset advances its LEO as the leader tracks it (a broker that is not a
  replica of the partition gets no records for it, as in Kafka);
- min_bytes / max_wait_ms: answered at once when min_bytes are there or a partition errors,
  otherwise the request waits in the fetch purgatory until appends bring min_bytes or max_wait_ms
  passes, then answers with what is there;
- max_bytes (capped by the broker's fetch.max.bytes for consumers) is shared by the partitions in
  request order, each also bounded by its partition_max_bytes; the first batch of the first
  partition with data is returned whole even when larger than both (KIP-74);
- per partition: high_watermark, last_stable_offset, log_start_offset, preferred_read_replica -1,
  aborted_transactions null (read_uncommitted) or empty (read_committed), and the records as a file
  range the network layer sends with sendfile (record bytes never enter Python). Errors:
  OFFSET_OUT_OF_RANGE (with the partition's offsets, so the client can reset),
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
  for a current_leader_epoch (v9+) older / newer than the partition's.

Deliberate deviations: the broker keeps no incremental fetch sessions (KIP-227). Every request with
session_epoch 0 or -1 is served as a full, sessionless fetch and answered with session_id 0, which
tells Java clients no session was created (they keep sending full fetches; librdkafka never uses
sessions); forgotten_topics_data is therefore moot. Incremental requests (another epoch) get
FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for a session it does not know, and clients fall back
to a full fetch. v0-v3 are not served (they need message format v0/v1 down-conversion). No
last_fetched_epoch divergence check (no leader epoch cache), so diverging_epoch is never set.
throttle_time_ms is always 0.
"""

from __future__ import annotations

import uuid

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.replication.partition import READ_COMMITTED
from odradek.replication.replica_manager import FetchPartitionRequest, FetchPartitionResult
from odradek.server.context import RequestContext

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = 17

TOPIC_IDS_VERSION = 13
FULL_FETCH_EPOCHS = (0, -1)  # INITIAL_EPOCH, FINAL_EPOCH

PartitionData = FetchResponse.PartitionData
TopicResponse = FetchResponse.FetchableTopicResponse


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if request.session_epoch not in FULL_FETCH_EPOCHS:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    broker = ctx.broker
    by_id = ctx.api_version >= TOPIC_IDS_VERSION
    replica_id = request.replica_state.replica_id if request.replica_state is not None else request.replica_id
    max_bytes = (
        request.max_bytes if replica_id >= 0 else min(request.max_bytes, broker.config["fetch.max.bytes"])
    )
    reads: list[FetchPartitionRequest] = []
    unknown_ids: set[uuid.UUID] = set()
    for topic in request.topics:
        name = broker.replica_manager.topic_name(topic.topic_id) if by_id else topic.topic
        if name is None:
            unknown_ids.add(topic.topic_id)
            continue
        reads.extend(
            FetchPartitionRequest(
                name, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch
            )
            for p in topic.partitions
        )
    results = await broker.replica_manager.fetch_messages(
        reads, request.min_bytes, max_bytes, request.max_wait_ms, request.isolation_level, replica_id
    )
    aborted: list[FetchResponse.AbortedTransaction] | None = (
        [] if request.isolation_level == READ_COMMITTED else None
    )
    return FetchResponse(session_id=0, responses=_responses(request, results, unknown_ids, aborted))


def _responses(
    request: FetchRequest,
    results: list[FetchPartitionResult],
    unknown_ids: set[uuid.UUID],
    aborted: list[FetchResponse.AbortedTransaction] | None,
) -> list[TopicResponse]:
    """One response topic per request topic, partitions in request order."""
    responses = []
    position = 0
    for topic in request.topics:
        if topic.topic_id in unknown_ids:
            partitions = [_failed(p.partition, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partitions]
        else:
            count = len(topic.partitions)
            partitions = [_partition(result, aborted) for result in results[position : position + count]]
            position += count
        responses.append(TopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=partitions))
    return responses


def _partition(
    result: FetchPartitionResult, aborted: list[FetchResponse.AbortedTransaction] | None
) -> PartitionData:
    return PartitionData(
        partition_index=result.partition,
        error_code=result.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=aborted,
        records=result.records or b"",
    )


def error_response(request: FetchRequest, version: int, code: int) -> FetchResponse:
    """The top-level error code; before v13 also every partition carrying it (as Kafka answers)."""
    if version >= TOPIC_IDS_VERSION:
        return FetchResponse(error_code=code)
    return FetchResponse(
        error_code=code,
        responses=[
            TopicResponse(
                topic=topic.topic,
                partitions=[_failed(p.partition, code) for p in topic.partitions],
            )
            for topic in request.topics
        ],
    )


def _failed(partition: int, code: int) -> PartitionData:
    return PartitionData(partition_index=partition, error_code=code, high_watermark=-1, records=b"")
