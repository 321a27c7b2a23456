"""OffsetCommit handler.

API: v0-v9.

Behaviour: stores committed offsets in `__consumer_offsets` through the group coordinator (answered
once the records are committed, acks=-1). Members commit with their generation (and member id,
group.instance.id v7+); anyone may commit with generation -1 to a group without members (simple
consumers that only store offsets). Per partition: UNKNOWN_TOPIC_OR_PARTITION for a topic or
partition the cluster does not have, OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes; a
null metadata is stored as "". The commit timestamp is the broker's clock, or the client's v1
`commit_timestamp` when it sets one; v2-v4 `retention_time_ms` (when not -1) sets an explicit expiry.
v6+ carry the committed leader epoch. `generation_id_or_member_epoch` is the classic generation, or
for a consumer-protocol group (KIP-848) the member epoch: a commit of a member must carry its
current epoch (STALE_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID), and one without a member
(epoch -1) is accepted only while the group is empty, and a member's commit below v9 answers
UNSUPPORTED_VERSION, as Kafka checks.

Deliberate deviations: v0 commits are stored in `__consumer_offsets` like every other version
(Kafka stored them in ZooKeeper).

Authorization (Kafka's): READ on the group (else GROUP_AUTHORIZATION_FAILED for every partition)
and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from odradek.coordinator.classic import CommitArgs
from odradek.coordinator.group import CommittedOffset, TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, require_group
from odradek.server.context import RequestContext

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 9

Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = OffsetCommitResponse.OffsetCommitResponsePartition


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    require_group(ctx, AclOperation.READ, request.group_id)
    version = ctx.api_version
    coordinator = ctx.broker.group_coordinator
    errors, offsets = checked_offsets(
        ctx, request.topics, lambda p, now_ms: _committed(p, request, version, now_ms)
    )
    if offsets:
        args = CommitArgs(
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            offsets=offsets,
        )
        errors.update(await coordinator.commit_offsets(args, version))
    return _response(request, lambda tp: errors[tp])


def checked_offsets(
    ctx: RequestContext, topics: Iterable[Any], committed: Callable[[Any, int], CommittedOffset]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
    """The per-partition checks of an offset commit (OffsetCommit, TxnOffsetCommit; READ on the topic
    first, as Kafka checks it, else TOPIC_AUTHORIZATION_FAILED): the errors of
    the partitions that fail them, and `committed(partition, now_ms)` for the others."""
    now_ms = ctx.broker.clock.time_ms()
    max_metadata = ctx.broker.group_coordinator.config.offset_metadata_max_bytes
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, CommittedOffset] = {}
    for topic in topics:
        known = ctx.broker.metadata_cache.topic(topic.name)
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len((p.committed_metadata or "").encode()) > max_metadata:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = committed(p, now_ms)
    return errors, offsets


def _committed(
    p: OffsetCommitRequest.OffsetCommitRequestPartition,
    request: OffsetCommitRequest,
    version: int,
    now_ms: int,
) -> CommittedOffset:
    commit_ms = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    return CommittedOffset(
        offset=p.committed_offset,
        leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
        metadata=p.committed_metadata or "",
        commit_timestamp_ms=commit_ms,
        expire_timestamp_ms=commit_ms + retention if retention != -1 else None,
    )


def _response(
    request: OffsetCommitRequest, error_of: Callable[[TopicPartition], int]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            Topic(
                name=t.name,
                partitions=[
                    Partition(
                        partition_index=p.partition_index,
                        error_code=error_of(TopicPartition(t.name, p.partition_index)),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def error_response(request: OffsetCommitRequest, version: int, code: int) -> OffsetCommitResponse:
    return _response(request, lambda _: code)
