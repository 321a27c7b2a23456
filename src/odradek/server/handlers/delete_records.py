"""DeleteRecords handler.

API: v0-v2.

Behaviour, per partition: the leader moves its log start offset up to the requested offset (-1: the
high watermark) and answers the new log start offset as `low_watermark`; records below it can no
longer be fetched, ListOffsets EARLIEST answers it, and the segments wholly below it are deleted at
the next retention pass. Errors: UNKNOWN_TOPIC_OR_PARTITION (not in the cluster), NOT_LEADER_OR_FOLLOWER
(hosted elsewhere or followed here), OFFSET_OUT_OF_RANGE for an offset past the high watermark or
below -1, POLICY_VIOLATION for a topic whose cleanup.policy does not include delete, INVALID_REQUEST
for a partition named twice. An offset at or below the log start offset changes nothing.

Deliberate deviation: the answer does not wait for the followers (Kafka's purgatory waits until every
replica's log start offset reached the offset, and answers the smallest); they move their own log
start offset up to the leader's with their next fetch (odradek.replication.fetcher), so a follower
elected leader before that fetch still serves the records below it until retention removes them.
throttle_time_ms is always 0.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from odradek.server.context import RequestContext

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2

HIGH_WATERMARK = -1
NO_LOW_WATERMARK = -1

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    counts = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    return DeleteRecordsResponse(
        topics=[
            TopicResult(
                name=t.name,
                partitions=[
                    _delete(ctx, t.name, p.partition_index, p.offset)
                    if counts[(t.name, p.partition_index)] == 1
                    else _failed(p.partition_index, ErrorCode.INVALID_REQUEST)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> PartitionResult:
    hosted = ctx.broker.replica_manager.partition(topic, index)
    if hosted is None:
        known = ctx.broker.metadata_cache.contains_partition(topic, index)
        return _failed(
            index, ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
    try:
        hosted.check_leader()
    except KafkaError as exc:
        return _failed(index, exc.code)
    if not hosted.log.config.delete_enabled:
        return _failed(index, ErrorCode.POLICY_VIOLATION)
    target = hosted.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > hosted.high_watermark:
        return _failed(index, ErrorCode.OFFSET_OUT_OF_RANGE)
    return PartitionResult(partition_index=index, low_watermark=hosted.log.advance_start_offset(target))


def _failed(index: int, code: int) -> PartitionResult:
    return PartitionResult(partition_index=index, low_watermark=NO_LOW_WATERMARK, error_code=code)


def error_response(request: DeleteRecordsRequest, version: int, code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            TopicResult(name=t.name, partitions=[_failed(p.partition_index, code) for p in t.partitions])
            for t in request.topics
        ]
    )
