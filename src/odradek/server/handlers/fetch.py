"""Fetch handler.

API: v4-v18.

Behaviour: partitions are named by topic (v4-v12) or topic id (v13+; an unknown id answers
UNKNOWN_TOPIC_ID for its partitions) and read by the ReplicaManager in request order (in an
incremental fetch, in the session's order); the response lists them in that order, consecutive
partitions of one topic sharing a topic entry (as Kafka groups them):
- consumers (replica id -1) read below the high watermark (isolation_level 0) or the last stable
  offset (1); a broker replica (replica id >= 0, from ReplicaState in v15+) reads to the log end
  offset and its fetch offset advances its LEO as the leader tracks it (a broker that is not a
  replica of the partition gets no records for it, as in Kafka);
- min_bytes / max_wait_ms: answered at once when min_bytes are there or a partition errors,
  otherwise the request waits in the fetch purgatory until appends bring min_bytes or max_wait_ms
  passes, then answers with what is there; a follower's fetch (v18+, KIP-1166) naming a partition
  whose high_watermark it reports below this leader's is answered at once, so the high watermark
  reaches it without waiting for an append;
- max_bytes (capped by the broker's fetch.max.bytes for consumers) is shared by the partitions in
  request order, each also bounded by its partition_max_bytes; the first batch of the first
  partition with data is returned whole even when larger than both (KIP-74);
- per partition: high_watermark, last_stable_offset, log_start_offset, preferred_read_replica -1,
  aborted_transactions null (read_uncommitted) or, for read_committed, the producer id and first
  offset of every aborted transaction overlapping the range read (from the segments' transaction
  indexes, as Kafka's collectAbortedTransactions), and the records as a file
  range the network layer sends with sendfile (record bytes never enter Python). Errors:
  OFFSET_OUT_OF_RANGE (with the partition's offsets, so the client can reset),
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
  for a current_leader_epoch (v9+) older / newer than the partition's.

Fetch sessions (KIP-227, v7+; see server/fetch_session.py): session_epoch 0 makes a full fetch that
creates a session when the cache has a slot (its id is in the response), -1 a sessionless one (a
session_id given with either is closed first). Another epoch is an incremental fetch: a session
error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR) is the
top-level error code with session id 0 and no partitions; otherwise the session is updated, its
partitions are read in its order, and only the partitions that changed are answered. A partition
the previous fetches found quiet (replication/quiet.py: at its fetchable end, nothing to say, and
nothing about it moved since) is not read; a fetch that waits still watches it, and an append to it
answers that fetch with its records, as before.

Divergence (v12+, KIP-595's check, used by follower fetchers): a partition whose last_fetched_epoch
(>= 0) does not end in this leader's log at or after fetch_offset (the leader epoch cache's answer
for that epoch) answers no records and diverging_epoch = (the newest epoch at or below it, where it
ends here), so the fetcher truncates before fetching again.

Authorization (Kafka's): a replica's fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster
(refused: a WARNING naming the peer and the principal, and every partition answers
TOPIC_AUTHORIZATION_FAILED), a consumer's READ on each topic (its partitions answer
TOPIC_AUTHORIZATION_FAILED and are not read); checked at every fetch, incremental ones included.

Consumer quota (consumer_byte_rate, server/client_quotas.py; a follower's fetch is exempt, its
throttle is replication's): a consumer's max_bytes is also capped at its quota's most in one window
(limit x (quota.window.num - 1) x quota.window.size.seconds, Kafka's getMaxValueInQuotaWindow), so a
fetch is shrunk rather than held; the record bytes answered are recorded, and a fetch that takes its
group over the quota carries the throttle time (the dispatcher then mutes the connection). A fetch
that arrives while its group is still over its quota is answered at once with no partitions and
that throttle time, as Kafka's throttled response, without reading (the session's epoch has moved,
nothing else of it).

Deliberate deviations: v0-v3 are not served (they need message format v0/v1 down-conversion).
Kafka answers the fetch that takes its group over the quota empty and un-records it; odradek answers
it with its records and throttles the next ones, so its fetch session never has to forget an answer
it built. Kafka reads every partition of a session at every incremental fetch;
odradek skips the quiet ones (above), which changes what is answered in no case, only the order:
a quiet partition a waiting fetch was woken for comes after the partitions read.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import encode_element
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID
from odradek.protocol.messages.fetch import RESPONSE_SPEC, FetchRequest, FetchResponse
from odradek.protocol.primitives import records_size
from odradek.replication.partition import READ_COMMITTED
from odradek.replication.quiet import QuietMark
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.types import FetchParams, FetchPartitionRequest, FetchPartitionResult
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorized_names, require_cluster_action
from odradek.server.client_quotas import now_monotonic_ms, quota_names
from odradek.server.context import RequestContext
from odradek.server.fetch_session import CachedPartition, FetchSession

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = 18

TOPIC_IDS_VERSION = 13
FOLLOWER_HIGH_WATERMARK_VERSION = 18

PartitionData = FetchResponse.PartitionData
TopicResponse = FetchResponse.FetchableTopicResponse
# A partition's answer: built, or pre-encoded (`_answerer`).
Answer = PartitionData | bytes
# A topic's partitions as one fetch names them (consecutive in the request or the session): name
# (before v13), topic id (v13+), and the partitions (request entries or session entries).
TopicGroup = tuple[str, uuid.UUID, Sequence[FetchRequest.FetchPartition] | Sequence[CachedPartition]]
_T = TypeVar("_T")


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        response = await _full_fetch(ctx, request)
    else:
        response = await _incremental_fetch(ctx, request)
    if response.throttle_time_ms == 0 and not quota_exempt(request):
        response.throttle_time_ms = _record_consumer_bytes(ctx, response)
    return response


def quota_exempt(request: FetchRequest) -> bool:
    """A follower's fetch: exempt from client quotas (the dispatcher asks too)."""
    return _replica_id(request) >= 0


def _over_quota(ctx: RequestContext, request: FetchRequest) -> int:
    """The throttle time of a consumer whose group is over its consumer_byte_rate now (0: none)."""
    quota = ctx.broker.quotas.fetch
    if not quota.enabled or quota_exempt(request):
        return 0
    return quota.throttle_ms(*quota_names(ctx), now_monotonic_ms())


def _record_consumer_bytes(ctx: RequestContext, response: FetchResponse) -> int:
    quota = ctx.broker.quotas.fetch
    if not quota.enabled:
        return 0
    size = sum(_records_size(p) for t in response.responses for p in t.partitions)
    return quota.record(*quota_names(ctx), size, now_monotonic_ms())


def _records_size(answer: Answer) -> int:
    return 0 if isinstance(answer, bytes) else records_size(answer.records)  # pre-encoded: no records


async def _full_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    sessions = ctx.broker.fetch_sessions
    if request.session_id != INVALID_SESSION_ID:
        sessions.remove(request.session_id)
    throttle_ms = _over_quota(ctx, request)
    if throttle_ms:
        return FetchResponse(throttle_time_ms=throttle_ms, session_id=INVALID_SESSION_ID)
    if request.session_epoch == FINAL_EPOCH:  # sessionless: read the request's own partitions
        groups: list[TopicGroup] = [(t.topic, t.topic_id, t.partitions) for t in request.topics]
        answers = await _read(ctx, request, groups)
        return FetchResponse(session_id=INVALID_SESSION_ID, responses=_topic_responses(groups, answers))
    partitions = [CachedPartition.from_request(t, p) for t in request.topics for p in t.partitions]
    groups = _by_topic(partitions)
    results = await _read_results(ctx, request, groups)
    for partition, result in zip(partitions, results, strict=True):
        # what the client is told now is the new session's baseline
        partition.must_respond(result or _failed(partition.partition, ErrorCode.UNKNOWN_TOPIC_ID))
    answers = _answers(ctx.api_version, request, groups, results)
    session_id = sessions.maybe_create(
        partitions, _replica_id(request) >= 0, ctx.api_version >= TOPIC_IDS_VERSION
    )
    return FetchResponse(session_id=session_id, responses=_group(zip(partitions, answers, strict=True)))


async def _incremental_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    session = ctx.broker.fetch_sessions.incremental(
        request.session_id,
        request.session_epoch,
        ctx.api_version >= TOPIC_IDS_VERSION,
        request.topics,
        request.forgotten_topics_data,
    )
    if isinstance(session, int):
        return FetchResponse(error_code=session, session_id=INVALID_SESSION_ID)
    throttle_ms = _over_quota(ctx, request)
    if throttle_ms:
        return FetchResponse(throttle_time_ms=throttle_ms, session_id=session.session_id)
    replica_manager = ctx.broker.replica_manager
    active, resting, quiet = _split_quiet(replica_manager, session, request.isolation_level)
    groups = _by_topic(active)
    names, refused = _readable(ctx, request, _topic_names(ctx, groups))
    fetched = await replica_manager.fetch_session(
        _partition_reads(groups, names), quiet, _fetch_params(ctx, request), session.clock
    )
    read = [
        *zip(active, _with_refusals(groups, refused, _spread(groups, names, fetched.results)), strict=True),
        *((resting[index], result) for index, result in fetched.woken.items()),
    ]
    changed, moved = _changes(read, _answerer(ctx.api_version, request.isolation_level == READ_COMMITTED))
    for partition, mark in zip(active, _spread(groups, names, fetched.marks), strict=True):
        partition.quiet = mark
    for index in fetched.woken:
        resting[index].quiet = None  # released by the ReplicaManager
    for partition in moved:
        session.move_to_end(partition)
    return FetchResponse(session_id=session.session_id, responses=_group(changed))


def _split_quiet(
    replica_manager: ReplicaManager, session: FetchSession, isolation_level: int
) -> tuple[list[CachedPartition], list[CachedPartition], list[QuietMark]]:
    """The session's partitions to read, those to skip (their quiet mark holds) and their marks."""
    active: list[CachedPartition] = []
    resting: list[CachedPartition] = []
    quiet: list[QuietMark] = []
    for partition in session.partitions.values():
        mark = partition.quiet
        if mark is not None and replica_manager.still_quiet(mark, isolation_level):
            resting.append(partition)
            quiet.append(mark)
        else:
            partition.release()
            active.append(partition)
    return active, resting, quiet


def _changes(
    read: Iterable[tuple[CachedPartition, FetchPartitionResult | None]],
    answer: Callable[[FetchPartitionResult], Answer],
) -> tuple[list[tuple[CachedPartition, Answer]], list[CachedPartition]]:
    """What an incremental response carries (the partitions that changed, with their answers) and
    the partitions answered with records (they move to the end of the session's order)."""
    changed: list[tuple[CachedPartition, Answer]] = []
    moved: list[CachedPartition] = []
    for partition, result in read:
        if result is None:  # an unknown topic id: an error, always answered
            data: Answer = _failed(partition.partition, ErrorCode.UNKNOWN_TOPIC_ID)
            partition.must_respond(data)
        elif partition.must_respond(result):  # an unchanged partition gets no answer built
            data = answer(result)
            if result.records:
                moved.append(partition)
        else:
            continue
        changed.append((partition, data))
    return changed, moved


def _replica_id(request: FetchRequest) -> int:
    return request.replica_state.replica_id if request.replica_state is not None else request.replica_id


def _by_topic(partitions: Sequence[CachedPartition]) -> list[TopicGroup]:
    """`partitions` in order, consecutive partitions of one topic in one group."""
    groups: list[TopicGroup] = []
    members: list[CachedPartition] = []
    for partition in partitions:
        if not groups or (groups[-1][0], groups[-1][1]) != (partition.topic, partition.topic_id):
            members = []
            groups.append((partition.topic, partition.topic_id, members))
        members.append(partition)
    return groups


async def _read(ctx: RequestContext, request: FetchRequest, groups: Sequence[TopicGroup]) -> list[Answer]:
    """One answer for each partition of `groups`, in order (see `_read_results`)."""
    return _answers(ctx.api_version, request, groups, await _read_results(ctx, request, groups))


def _answers(
    version: int,
    request: FetchRequest,
    groups: Sequence[TopicGroup],
    results: list[FetchPartitionResult | None],
) -> list[Answer]:
    answer = _answerer(version, request.isolation_level == READ_COMMITTED)
    partitions = [p for _, _, members in groups for p in members]
    return [
        answer(result) if result is not None else _failed(partition.partition, ErrorCode.UNKNOWN_TOPIC_ID)
        for partition, result in zip(partitions, results, strict=True)
    ]


async def _read_results(
    ctx: RequestContext, request: FetchRequest, groups: Sequence[TopicGroup]
) -> list[FetchPartitionResult | None]:
    """Read every partition of `groups` in order through the ReplicaManager (long poll included);
    one result each, None for a partition of an unknown topic id (not read: UNKNOWN_TOPIC_ID)."""
    names, refused = _readable(ctx, request, _topic_names(ctx, groups))
    params = _fetch_params(ctx, request)
    results = await ctx.broker.replica_manager.fetch_messages(
        _partition_reads(groups, names),
        params.min_bytes,
        params.max_bytes,
        params.max_wait_ms,
        params.isolation_level,
        params.replica_id,
    )
    return _with_refusals(groups, refused, _spread(groups, names, results))


def _fetch_params(ctx: RequestContext, request: FetchRequest) -> FetchParams:
    """The request's limits; a consumer's max_bytes capped by fetch.max.bytes and its quota's window."""
    replica_id = _replica_id(request)
    max_bytes = request.max_bytes
    if replica_id < 0:
        max_bytes = min(max_bytes, ctx.broker.config["fetch.max.bytes"])
        quota = ctx.broker.quotas.fetch
        window_bytes = (
            quota.max_value_in_window(*quota_names(ctx), now_monotonic_ms()) if quota.enabled else None
        )
        if window_bytes is not None:
            max_bytes = min(max_bytes, max(1, int(window_bytes)))
    max_wait_ms = request.max_wait_ms
    if (
        replica_id >= 0
        and ctx.api_version >= FOLLOWER_HIGH_WATERMARK_VERSION
        and _follower_behind(ctx, request)
    ):
        max_wait_ms = 0
    return FetchParams(replica_id, max_wait_ms, request.min_bytes, max_bytes, request.isolation_level)


def _follower_behind(ctx: RequestContext, request: FetchRequest) -> bool:
    """Whether a partition of the request reports a high watermark below this broker's (v18+: a
    follower sends its own; the default, int64's largest, never is)."""
    replicas = ctx.broker.replica_manager
    for topic in request.topics:
        name = topic.topic if ctx.api_version < TOPIC_IDS_VERSION else replicas.topic_name(topic.topic_id)
        for fetched in topic.partitions if name is not None else ():
            hosted = replicas.partition(name, fetched.partition)
            if hosted is not None and fetched.high_watermark < hosted.high_watermark:
                return True
    return False


def _partition_reads(
    groups: Sequence[TopicGroup], names: Sequence[str | None]
) -> list[FetchPartitionRequest]:
    """The ReplicaManager's read of each partition of `groups` whose topic is known."""
    return [
        FetchPartitionRequest(
            name,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch,
            p.last_fetched_epoch,
        )
        for (_, _, partitions), name in zip(groups, names, strict=True)
        if name is not None
        for p in partitions
    ]


def _spread(
    groups: Sequence[TopicGroup], names: Sequence[str | None], values: Sequence[_T]
) -> list[_T | None]:
    """`values` (one per partition read) back over every partition of `groups`: None for the
    partitions of an unknown topic id, which were not read."""
    found = iter(values)
    return [
        next(found) if name is not None else None
        for (_, _, partitions), name in zip(groups, names, strict=True)
        for _ in partitions
    ]


def _aborted(result: FetchPartitionResult) -> list[FetchResponse.AbortedTransaction]:
    """aborted_transactions of a read_committed answer (read_uncommitted answers null)."""
    return [
        FetchResponse.AbortedTransaction(txn.producer_id, txn.first_offset)
        for txn in result.aborted_transactions or ()
    ]


def _topic_names(ctx: RequestContext, groups: Iterable[TopicGroup]) -> list[str | None]:
    """Each group's topic name: from v13 looked up by topic id (None for an unknown id)."""
    if ctx.api_version < TOPIC_IDS_VERSION:
        return [topic for topic, _, _ in groups]
    return [ctx.broker.replica_manager.topic_name(topic_id) for _, topic_id, _ in groups]


def _readable(
    ctx: RequestContext, request: FetchRequest, names: list[str | None]
) -> tuple[list[str | None], dict[int, str]]:
    """`names` with the topics this fetch may not read replaced by None, and those groups' names by
    index: a replica's fetch needs CLUSTER_ACTION on the cluster (refused: every topic, with a
    WARNING), a consumer's READ on each topic."""
    if _replica_id(request) >= 0:
        try:
            require_cluster_action(ctx)
            return names, {}
        except KafkaError:
            refused = {i: n for i, n in enumerate(names) if n is not None}
    else:
        allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (n for n in names if n))
        refused = {i: n for i, n in enumerate(names) if n is not None and n not in allowed}
    if not refused:
        return names, refused
    return [None if i in refused else n for i, n in enumerate(names)], refused


def _with_refusals(
    groups: Sequence[TopicGroup], refused: dict[int, str], results: list[FetchPartitionResult | None]
) -> list[FetchPartitionResult | None]:
    """`results` with the partitions of the refused groups answering TOPIC_AUTHORIZATION_FAILED."""
    if not refused:
        return results
    start = 0
    for index, (_, _, partitions) in enumerate(groups):
        if index in refused:
            for offset, p in enumerate(partitions, start):
                results[offset] = FetchPartitionResult(
                    refused[index], p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
        start += len(partitions)
    return results


def _topic_responses(groups: Sequence[TopicGroup], answers: list[Answer]) -> list[TopicResponse]:
    """The response topics of a full fetch: one per group (a topic named twice in a row, once)."""
    responses: list[TopicResponse] = []
    start = 0
    for topic, topic_id, partitions in groups:
        end = start + len(partitions)
        if responses and (responses[-1].topic, responses[-1].topic_id) == (topic, topic_id):
            responses[-1].partitions.extend(answers[start:end])
        else:
            responses.append(TopicResponse(topic, topic_id, answers[start:end]))
        start = end
    return responses


def _group(answers: Iterable[tuple[CachedPartition, Answer]]) -> list[TopicResponse]:
    """Response topics: consecutive partitions of one topic share an entry, in the given order."""
    responses: list[TopicResponse] = []
    for partition, data in answers:
        if not responses or (responses[-1].topic_id, responses[-1].topic) != (
            partition.topic_id,
            partition.topic,
        ):
            responses.append(TopicResponse(topic=partition.topic, topic_id=partition.topic_id))
        responses[-1].partitions.append(data)
    return responses


@functools.cache
def _answerer(version: int, committed: bool) -> Callable[[FetchPartitionResult], Answer]:
    """A partition's answer from its read. A read that found nothing and nothing wrong (most
    partitions of a tailing consumer's or a follower's fetch) is answered with its wire form at
    `version` (a pre-encoded element, see protocol/codec.py): the offsets packed in front of the
    fixed rest, which the codec encodes once here. The head's layout is checked against the codec."""
    template = PartitionData(1, 0, 2, 3, 4, aborted_transactions=[] if committed else None, records=b"")
    encoded = encode_element(RESPONSE_SPEC, version, template)
    head = ">ihqqq" if version >= 5 else ">ihqq"  # partition_index .. log_start_offset (v5+)
    rest = encoded[struct.calcsize(head) :]
    pack = struct.Struct(f"{head}{len(rest)}s").pack
    values = (1, 0, 2, 3, 4)[: len(head) - 1]
    if pack(*values, rest) != encoded:
        raise AssertionError(f"Fetch v{version}: a partition's answer does not start with {head}")

    def answer(result: FetchPartitionResult) -> Answer:
        _, index, error_code, high_watermark, stable, start, records, _, _, diverging, aborted = result
        if error_code or records or diverging is not None or aborted:
            return _partition(result, committed)
        if version >= 5:
            return pack(index, 0, high_watermark, stable, start, rest)
        return pack(index, 0, high_watermark, stable, rest)

    return answer


def _partition(result: FetchPartitionResult, committed: bool) -> PartitionData:
    diverging = result.diverging_epoch
    return PartitionData(
        result.partition,
        result.error_code,
        result.high_watermark,
        result.last_stable_offset,
        result.log_start_offset,
        FetchResponse.EpochEndOffset(diverging.leader_epoch, diverging.end_offset) if diverging else None,
        None,  # current_leader
        None,  # snapshot_id
        _aborted(result) if committed else [] if result.error_code in _REFUSED_BEFORE_READ else None,
        -1,  # preferred_read_replica
        result.records or b"",
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


# Errors Kafka answers before reading the partition (unknown, refused): its answer then carries an
# empty aborted_transactions list, never null.
_REFUSED_BEFORE_READ = frozenset(
    {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED}
)


def _failed(partition: int, code: int) -> PartitionData:
    return PartitionData(
        partition_index=partition, error_code=code, high_watermark=-1, aborted_transactions=[], records=b""
    )
