"""ShareFetch handler (KIP-932).

API: v1-v2 (Kafka 4's share consumers; v0 was the early-access version Kafka 4.1 dropped).

Behaviour: the member's share session (server/share_session.py) is opened (epoch 0), continued
(its epoch: the request's partitions added, its forgotten ones removed) or closed (-1: its
acknowledgements are applied, nothing is fetched, then its acquired records are released). Session
errors are the top-level error code with no partitions (and acquisition_lock_timeout_ms 0):
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST (acknowledgements at epoch 0,
no group or member id, is_renew_ack with a non-zero max_bytes, min_bytes, max_records or
max_wait_ms, named in the error message as Kafka 4.4 does).
Piggy-backed acknowledgements are applied first, each partition's outcome in
acknowledge_error_code. Then every partition of the session is fetched for the member
(server/share_partitions.py: acquisition, the fetch purgatory's long poll with max_wait_ms /
min_bytes / max_bytes, max_records): each answers the batches holding the records acquired, as they
are in the log, and their AcquiredRecords (first offset, last offset, delivery count); a
NOT_LEADER_OR_FOLLOWER partition carries the leader this broker knows. acquisition_lock_timeout_ms
(v1+) is group.share.record.lock.duration.ms.

Errors per partition: UNKNOWN_TOPIC_ID (no topic with that id), TOPIC_AUTHORIZATION_FAILED,
NOT_LEADER_OR_FOLLOWER, INVALID_RECORD_STATE (an acknowledgement of records the member does not
hold), the share coordinator's errors when the state cannot be read or written.

Authorization (Kafka's): READ on the GROUP (else GROUP_AUTHORIZATION_FAILED, top level) and READ on
each TOPIC.

v2 (KIP-1222): is_renew_ack makes the request one of acknowledgements only (RENEW extends the
locks of the records named), answered at once without fetching; RENEW (4) in an earlier version is
INVALID_REQUEST for its partition.

Deliberate deviations: every partition of the session is answered at each fetch, not only those
that changed; acquisition always stops at max_records (share_acquire_mode record_limit; Kafka's
batch_optimized default may go past it to the end of a batch); membership is not checked (the share
group heartbeat side does not exist yet).
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorized_names, require_group
from odradek.server.context import RequestContext
from odradek.server.share_partitions import PartitionFetch
from odradek.server.share_session import FINAL_EPOCH, INITIAL_EPOCH

API_KEY = ApiKey.SHARE_FETCH
MIN_VERSION = 1
MAX_VERSION = 2

Response = ShareFetchResponse
RENEW, RENEW_VERSION = 4, 2  # the RENEW acknowledge type (KIP-1222) and the version that has it
PartitionData = ShareFetchResponse.PartitionData


async def handle(ctx: RequestContext, request: ShareFetchRequest) -> Response:
    require_group(ctx, AclOperation.READ, request.group_id or "")
    manager = ctx.broker.share_partitions
    group_id, member_id, epoch = request.group_id or "", request.member_id or "", request.share_session_epoch
    refused = _refusal(request)
    if refused is not None:
        return refused
    wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    if epoch == INITIAL_EPOCH:
        error, session = manager.sessions.open((group_id, member_id), wanted)
    else:
        error, session = manager.sessions.check((group_id, member_id), epoch)
        if session is not None and epoch != FINAL_EPOCH:
            forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
            manager.sessions.update(session, wanted, forgotten)
    if session is None:
        return Response(error_code=error)
    names = _names(ctx, {t.topic_id for t in request.topics} | {tid for tid, _ in session.partitions})
    answers: dict[tuple[uuid.UUID, int], PartitionData] = {}
    await _acknowledge(ctx, request, names, answers)
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
    elif not request.is_renew_ack:
        await _fetch(ctx, request, list(session.partitions), names, answers)
    lock_ms = manager.settings.lock_duration_ms
    return Response(acquisition_lock_timeout_ms=lock_ms, responses=_by_topic(answers))


def _refusal(request: ShareFetchRequest) -> Response | None:
    """The INVALID_REQUEST answer of a malformed request (Kafka's checks), else None."""
    if not request.group_id or not request.member_id:
        return Response(error_code=ErrorCode.INVALID_REQUEST)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if request.share_session_epoch == INITIAL_EPOCH and has_acks:
        return Response(error_code=ErrorCode.INVALID_REQUEST)
    if request.is_renew_ack:
        limits = [
            ("maxBytes", request.max_bytes),
            ("minBytes", request.min_bytes),
            ("maxRecords", request.max_records),
            ("maxWaitMs", request.max_wait_ms),
        ]
        nonzero = [f"{name} must be set to 0, " for name, value in limits if value != 0]
        if nonzero:
            message = "".join(nonzero) + "if isRenewAck is true."
            return Response(error_code=ErrorCode.INVALID_REQUEST, error_message=message)
    return None


def _names(ctx: RequestContext, topic_ids: set[uuid.UUID]) -> dict[uuid.UUID, str | None]:
    """Each topic id's name; None for an unknown id, "" for a topic this principal may not READ."""
    found = {tid: ctx.broker.replica_manager.topic_name(tid) for tid in topic_ids}
    allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, [n for n in found.values() if n])
    return {tid: (name if name is None or name in allowed else "") for tid, name in found.items()}


def _name_error(name: str | None) -> int:
    return ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def _acknowledge(
    ctx: RequestContext,
    request: ShareFetchRequest,
    names: dict[uuid.UUID, str | None],
    answers: dict[tuple[uuid.UUID, int], PartitionData],
) -> None:
    manager = ctx.broker.share_partitions
    for topic in request.topics:
        name = names.get(topic.topic_id)
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            renews = any(RENEW in b.acknowledge_types for b in p.acknowledgement_batches)
            if not name:
                error = _name_error(name)
            elif renews and ctx.api_version < RENEW_VERSION:
                error = ErrorCode.INVALID_REQUEST
            else:
                batches = [
                    (b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches
                ]
                error = await manager.acknowledge(
                    request.group_id or "",
                    request.member_id or "",
                    name,
                    topic.topic_id,
                    p.partition_index,
                    batches,
                )
            _answer(answers, topic.topic_id, p.partition_index).acknowledge_error_code = error


async def _fetch(
    ctx: RequestContext,
    request: ShareFetchRequest,
    partitions: list[tuple[uuid.UUID, int]],
    names: dict[uuid.UUID, str | None],
    answers: dict[tuple[uuid.UUID, int], PartitionData],
) -> None:
    readable = [(names[tid], tid, index) for tid, index in partitions if names.get(tid)]
    for tid, index in partitions:
        if not names.get(tid):
            _answer(answers, tid, index).error_code = _name_error(names.get(tid))
    if not readable:
        return
    max_bytes = min(request.max_bytes, ctx.broker.config["fetch.max.bytes"])
    results = await ctx.broker.share_partitions.fetch(
        request.group_id or "",
        request.member_id or "",
        [(name or "", tid, index) for name, tid, index in readable],
        request.max_wait_ms,
        request.min_bytes,
        max_bytes,
        request.max_records,
    )
    for (_, tid, index), result in zip(readable, results, strict=True):
        _fill(_answer(answers, tid, index), result)


def _answer(answers: dict[tuple[uuid.UUID, int], PartitionData], tid: uuid.UUID, index: int) -> PartitionData:
    return answers.setdefault((tid, index), PartitionData(index))


def _fill(data: PartitionData, result: PartitionFetch) -> None:
    data.error_code = result.error
    data.current_leader = ShareFetchResponse.LeaderIdAndEpoch(result.leader_id, result.leader_epoch)
    data.records = result.records or b""
    data.acquired_records = [
        ShareFetchResponse.AcquiredRecords(a.first_offset, a.last_offset, a.delivery_count)
        for a in result.acquired
    ]


def _by_topic(
    answers: dict[tuple[uuid.UUID, int], PartitionData],
) -> list[ShareFetchResponse.ShareFetchableTopicResponse]:
    topics: dict[uuid.UUID, list[PartitionData]] = defaultdict(list)
    for (tid, _), data in answers.items():
        topics[tid].append(data)
    return [ShareFetchResponse.ShareFetchableTopicResponse(tid, parts) for tid, parts in topics.items()]


def error_response(request: ShareFetchRequest, version: int, code: int) -> Response:
    return Response(error_code=code)
