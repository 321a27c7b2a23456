"""DescribeShareGroupOffsets handler (KIP-932 share groups).

API: v0-v1 (v1: the lag of each share-partition, KIP-1226).

Behaviour: per group, the start offset of each share-partition, read from the share coordinator's
state (`SharePartitionManager.read_start_offsets`): the named topics and partitions, or with null
topics every share-partition with state the local share coordinator keeps for the group. A
partition without state answers start offset -1; the lag is the high watermark minus the start
offset when this broker leads the partition, else -1. Group errors: GROUP_ID_NOT_FOUND for an
unknown or another kind of group ("Group X is not a share group."), NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS from routing. A topic that does not exist answers
UNKNOWN_TOPIC_OR_PARTITION for its partitions.

Authorization (Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for the group) and
DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).

With null topics: the share-partitions the group was ever assigned or had altered (Kafka's
initialized partitions, ShareGroupStatePartitionMetadata) and those this broker's share coordinator
keeps for it. Deviations: leader_epoch is the
partition's leader epoch now (Kafka's: the one its state was last written with);
the lag counts records already acknowledged inside the in-flight window as lag.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.context import RequestContext
from odradek.server.share_partitions import TopicIdPartition

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 1

Response = DescribeShareGroupOffsetsResponse
Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition
RequestGroup = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup


async def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> Response:
    return Response(groups=[await _group(ctx, g) for g in request.groups])


async def _group(ctx: RequestContext, requested: RequestGroup) -> Group:
    group_id = requested.group_id
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return Group(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error, message = await ctx.broker.group_coordinator.share_group_admin(group_id, empty=False)
    if error != ErrorCode.NONE:
        return Group(group_id=group_id, error_code=error, error_message=message)
    manager = ctx.broker.share_partitions
    if requested.topics is None:
        found = set(await manager.read_start_offsets(group_id))
        share = ctx.broker.group_coordinator.find_share_group(group_id)
        if share is not None:
            found |= {TopicIdPartition(t, p) for t, (_, ps) in share.initialized.items() for p in ps}
        by_topic: dict[uuid.UUID, list[int]] = defaultdict(list)
        for topic_id, index in sorted(found):
            by_topic[topic_id].append(index)
        names = {t: ctx.broker.metadata_cache.topic_by_id(t) for t in by_topic}
        wanted = [(topic.name, by_topic[t]) for t, topic in names.items() if topic is not None]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in requested.topics]
    return Group(group_id=group_id, topics=[await _topic(ctx, group_id, n, p) for n, p in sorted(wanted)])


async def _topic(ctx: RequestContext, group_id: str, name: str, partitions: list[int]) -> Topic:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _failed(name, partitions, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    topic = ctx.broker.metadata_cache.topic(name)
    if topic is None:
        return _failed(name, partitions, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    keys = [TopicIdPartition(topic.topic_id, p) for p in partitions]
    found = await ctx.broker.share_partitions.read_start_offsets(group_id, keys)
    answered = []
    for key in keys:
        start = found.get(key, -1)
        answered.append(
            Partition(
                partition_index=key.partition,
                start_offset=start,
                leader_epoch=_leader_epoch(ctx, name, key.partition) if start >= 0 else -1,
                lag=_lag(ctx, name, key, start),
            )
        )
    return Topic(topic_name=name, topic_id=topic.topic_id, partitions=answered)


def _leader_epoch(ctx: RequestContext, name: str, index: int) -> int:
    state = ctx.broker.metadata_cache.partition(name, index)
    return state.leader_epoch if state is not None else -1


def _lag(ctx: RequestContext, name: str, key: TopicIdPartition, start: int) -> int:
    if start < 0:
        return -1
    partition = ctx.broker.replica_manager.partition(name, key.partition)
    if partition is None or not partition.is_leader:
        return -1
    return max(0, partition.high_watermark - start)


def _failed(name: str, partitions: list[int], code: int) -> Topic:
    return Topic(
        topic_name=name,
        partitions=[
            Partition(partition_index=p, start_offset=-1, leader_epoch=-1, error_code=code)
            for p in partitions
        ],
    )


def error_response(request: DescribeShareGroupOffsetsRequest, version: int, code: int) -> Response:
    return Response(groups=[Group(group_id=g.group_id, error_code=code) for g in request.groups])
