"""DeleteRecords handler.

API: v0-v2.

Behaviour, per partition (ReplicaManager.delete_records): the leader moves its log start offset up
to the requested offset (-1: the high watermark) and answers the new log start offset as
`low_watermark`; records below it can no longer be fetched, ListOffsets EARLIEST answers it, and the
segments wholly below it are deleted at the next retention pass. Errors: UNKNOWN_TOPIC_OR_PARTITION
(not in the cluster), NOT_LEADER_OR_FOLLOWER (hosted elsewhere or followed here),
OFFSET_OUT_OF_RANGE for an offset past the high watermark or below -1, POLICY_VIOLATION for a topic
whose cleanup.policy does not include delete, INVALID_REQUEST for a partition named twice. An offset
at or below the log start offset changes nothing.

Deliberate deviation: the answer does not wait for the followers (Kafka's purgatory waits until every
replica's log start offset reached the offset, and answers the smallest); they move their own log
start offset up to the leader's with their next fetch (odradek.replication.fetcher), so a follower
elected leader before that fetch still serves the records below it until retention removes them.
throttle_time_ms comes from the request quota.

Authorization (Kafka's): DELETE on each topic; a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import refusing_topics
from odradek.server.context import RequestContext

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2

NO_LOW_WATERMARK = -1

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    return await refusing_topics(ctx, request, AclOperation.DELETE, _handle, error_response)


async def _handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
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
    code, low_watermark = ctx.broker.replica_manager.delete_records(topic, index, offset)
    if code != ErrorCode.NONE:
        return _failed(index, code)
    return PartitionResult(partition_index=index, low_watermark=low_watermark)


def _failed(index: int, code: int) -> PartitionResult:
    return PartitionResult(partition_index=index, low_watermark=NO_LOW_WATERMARK, error_code=code)


def error_response(request: DeleteRecordsRequest, version: int, code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            TopicResult(name=t.name, partitions=[_failed(p.partition_index, code) for p in t.partitions])
            for t in request.topics
        ]
    )
