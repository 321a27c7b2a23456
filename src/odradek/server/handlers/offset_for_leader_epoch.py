"""OffsetForLeaderEpoch handler.

API: v0-v4.

Behaviour, per partition (Kafka's, KIP-101 and KIP-320): the leader answers from its leader epoch
cache where the requested `leader_epoch` ended: for its latest epoch, the log end offset; for an
older one, the start offset of the first newer epoch, with the newest known epoch at or below the
one requested (leader_epoch in v1+); for an epoch older than every known one, the first known
epoch's start offset with the requested epoch. An epoch newer than every known one, or -1, answers
NONE with leader_epoch -1 and end_offset -1. Followers (replica fetchers) use this to find where to
truncate; consumers (librdkafka, the Java client) to validate their position after a leader change.
Errors: UNKNOWN_TOPIC_OR_PARTITION (unknown to the cluster), NOT_LEADER_OR_FOLLOWER (known but not
led here), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current_leader_epoch (v2+) older / newer
than the partition's (-1 skips the check).

replica_id (v3+) is accepted and not used: as in Kafka 3.9, the leader answers everyone the same.
throttle_time_ms comes from the request quota.

Authorization (Kafka's): CLUSTER_ACTION on the cluster (a replica) or DESCRIBE on each topic; a refused
topic's partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server.authz import authorize_cluster, refusing_topics
from odradek.server.context import RequestContext

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MIN_VERSION = 0
MAX_VERSION = 4

EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        return await _handle(ctx, request)
    return await refusing_topics(
        ctx, request, AclOperation.DESCRIBE, _handle, error_response, lambda t: t.topic
    )


async def _handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        topics=[
            TopicResult(topic=t.topic, partitions=[_partition(ctx, t.topic, p) for p in t.partitions])
            for t in request.topics
        ]
    )


def _partition(
    ctx: RequestContext, topic: str, requested: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
) -> EpochEndOffset:
    index = requested.partition
    hosted = ctx.broker.replica_manager.partition(topic, index)
    if hosted is None:
        known = ctx.broker.metadata_cache.topic(topic)
        code = (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if known is not None and index in known.partitions
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        return EpochEndOffset(partition=index, error_code=code)
    try:
        found = hosted.last_offset_for_leader_epoch(requested.current_leader_epoch, requested.leader_epoch)
    except KafkaError as exc:
        return EpochEndOffset(partition=index, error_code=exc.code)
    return EpochEndOffset(partition=index, leader_epoch=found.leader_epoch, end_offset=found.end_offset)


def error_response(
    request: OffsetForLeaderEpochRequest, version: int, code: int
) -> OffsetForLeaderEpochResponse:
    """Every partition of the request carrying `code`."""
    return OffsetForLeaderEpochResponse(
        topics=[
            TopicResult(
                topic=t.topic,
                partitions=[EpochEndOffset(partition=p.partition, error_code=code) for p in t.partitions],
            )
            for t in request.topics
        ]
    )
