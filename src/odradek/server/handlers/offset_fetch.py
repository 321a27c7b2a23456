"""OffsetFetch handler.

API: v0-v9.

Behaviour: the committed offsets of a group from the group coordinator: the requested partitions,
or every partition with an offset when `topics` is null (v2+). A partition without a committed
offset answers offset -1, leader epoch -1, metadata "" and NONE. v0-v7 ask for one group; v8+ for a
batch of groups, each answered with its own error. Coordinator errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS) are carried per partition in v0-v1, at the top level in v2-v7, per
group in v8+. Committed leader epochs are reported from v5.

With `require_stable` (v7+), a partition whose group has an offset pending in an open transaction
(TxnOffsetCommit not yet completed by its marker) answers UNSTABLE_OFFSET_COMMIT, so the consumer
retries; without it, the last committed offset is answered.

The v9 member id / member epoch (KIP-848): for a consumer-protocol group, a member epoch of 0 or
more must be the member's current one (STALE_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID), as
Kafka checks; -1 (an admin client) fetches freely. Classic groups do not validate them.

Authorization (Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for it) and on each
topic: a named topic's partitions answer TOPIC_AUTHORIZATION_FAILED, and when all the group's
offsets are asked for, the topics the principal may not describe are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeVar

from odradek.coordinator.group import CommittedOffset, TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_names
from odradek.server.context import RequestContext

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 0
MAX_VERSION = 9

FIRST_BATCH_VERSION = 8
FIRST_TOP_LEVEL_ERROR_VERSION = 2
FIRST_MEMBER_EPOCH_VERSION = 9

Requested = list[tuple[str, list[int]]] | None
Fetched = dict[str, list[tuple[int, CommittedOffset | None, int]]]
P = TypeVar(
    "P", OffsetFetchResponse.OffsetFetchResponsePartition, OffsetFetchResponse.OffsetFetchResponsePartitions
)


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    if version >= FIRST_BATCH_VERSION:
        groups = []
        for group in request.groups:
            requested = _requested(group.topics)
            member = (group.member_id, group.member_epoch) if version >= FIRST_MEMBER_EPOCH_VERSION else None
            error, fetched = await _fetch(ctx, group.group_id, requested, request.require_stable, member)
            groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=group.group_id, error_code=error, topics=_batch_topics(fetched)
                )
            )
        return OffsetFetchResponse(groups=groups)
    requested = _requested(request.topics)
    error, fetched = await _fetch(ctx, request.group_id, requested, version >= 7 and request.require_stable)
    return _single_group_response(error, fetched, version)


def _requested(topics: Sequence[Any] | None) -> Requested:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    requested: Requested,
    require_stable: bool,
    member: tuple[str | None, int] | None = None,
) -> tuple[int, Fetched]:
    partitions = None
    if requested is not None:
        partitions = tuple(TopicPartition(name, p) for name, indexes in requested for p in indexes)
    error: int
    offsets: dict[TopicPartition, CommittedOffset | None]
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, offsets = ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    else:
        member_id, member_epoch = member if member is not None else (None, -1)
        error, offsets = await ctx.broker.group_coordinator.fetch_offsets(
            group_id, partitions, member_id, member_epoch
        )
    fetched: Fetched = defaultdict(list)
    if error != ErrorCode.NONE and partitions is not None:
        offsets = {tp: None for tp in partitions}
    unstable = ctx.broker.group_coordinator.pending_txn_partitions(group_id) if require_stable else set()
    topics = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (tp.topic for tp in offsets))
    for tp, committed in offsets.items():
        partition_error = ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable and not error else error
        if tp.topic not in topics:
            if partitions is None:
                continue  # all of the group's offsets: the topics it may not describe are left out
            committed, partition_error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        fetched[tp.topic].append((tp.partition, committed, partition_error))
    return error, fetched


def _partition(cls: type[P], index: int, committed: CommittedOffset | None, error: int) -> P:
    return cls(
        partition_index=index,
        committed_offset=committed.offset if committed is not None else -1,
        committed_leader_epoch=committed.leader_epoch if committed is not None else -1,
        metadata=committed.metadata if committed is not None else "",
        error_code=error,
    )


def _batch_topics(fetched: Fetched) -> list[OffsetFetchResponse.OffsetFetchResponseTopics]:
    return [
        OffsetFetchResponse.OffsetFetchResponseTopics(
            name=name,
            partitions=[_partition(OffsetFetchResponse.OffsetFetchResponsePartitions, *p) for p in parts],
        )
        for name, parts in fetched.items()
    ]


def _single_group_response(error: int, fetched: Fetched, version: int) -> OffsetFetchResponse:
    top_level = version >= FIRST_TOP_LEVEL_ERROR_VERSION
    if error != ErrorCode.NONE and top_level:
        return OffsetFetchResponse(error_code=error)
    topics = [
        OffsetFetchResponse.OffsetFetchResponseTopic(
            name=name,
            partitions=[_partition(OffsetFetchResponse.OffsetFetchResponsePartition, *p) for p in parts],
        )
        for name, parts in fetched.items()
    ]
    return OffsetFetchResponse(topics=topics, error_code=error if top_level else 0)


def error_response(request: OffsetFetchRequest, version: int, code: int) -> OffsetFetchResponse:
    if version >= FIRST_BATCH_VERSION:
        return OffsetFetchResponse(
            groups=[
                OffsetFetchResponse.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                for g in request.groups
            ]
        )
    if version >= FIRST_TOP_LEVEL_ERROR_VERSION:
        return OffsetFetchResponse(error_code=code)
    fetched: Fetched = defaultdict(list)
    for name, indexes in _requested(request.topics) or []:
        fetched[name].extend((p, None, code) for p in indexes)
    return _single_group_response(code, fetched, version)
