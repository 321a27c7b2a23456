"""Replica fetchers: a follower copies its leaders' logs (Kafka's ReplicaFetcherManager and
ReplicaFetcherThread).

Owns, per leader broker and fetcher id (hash of the partition modulo num.replica.fetchers), one
asyncio task with one `NodeConnection` to the leader's inter-broker endpoint, and per partition it
follows the leader epoch it follows it in and when it may fetch again after an error.

Behaviour (Kafka's, with IBP >= 2.7: truncation through Fetch's diverging epoch):
- A fetch covers every ready partition: fetch offset = the local LEO, last_fetched_epoch = the
  latest epoch of the local leader epoch cache, current_leader_epoch = the epoch followed; replica
  id = this broker, replica.fetch.wait.max.ms / min.bytes / response.max.bytes / max.bytes. The
  leader holds the request until data arrives (its fetch purgatory), so an append at the leader
  reaches its followers in one round trip.
- Fetch sessions (KIP-227, client/fetch_session.py), as Kafka's followers use them: the first fetch
  is full and opens a session on the leader; later ones name only the partitions whose fetch state
  changed (new data appended here, a new epoch, a new log start) and forget those no longer ready
  (backing off, throttled, moved), and the leader answers only the partitions with something new.
  Over many partitions that keeps an idle partition out of both the request and the answer. A
  session error starts a new session at once; a failed request starts one with the next fetch.
- A partition's fetch state is looked at again only when it may have changed: an answer for it,
  a back-off starting or ending, `add` and `remove` (with throttled replicas configured, every
  fetch looks at every partition, as the quota moves on its own). An idle partition costs the
  follower nothing per fetch. A log start offset moved by this broker's own retention reaches
  the leader with the partition's next change (the leader does not use a follower's).
- An answer with records: appended as they came (`Partition.append_records_as_follower`: offsets
  and epochs are the leader's), then the follower's HW = min(leader's HW, own LEO), and its log
  start offset moves up to the leader's (DeleteRecords at the leader), as Kafka's followers do.
  Nothing is appended if the partition moved on (another epoch, or a LEO that changed) while the
  fetch was out.
- diverging_epoch (the leader's log leaves this one): truncate to min(the leader's end offset of
  that epoch, this log's end offset of the same epoch), then fetch again from there.
- OFFSET_OUT_OF_RANGE: below the leader's log start offset the log is emptied and starts there;
  above the leader's LEO it is truncated to the leader's HW.
- Any other partition error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
  UNKNOWN_TOPIC_OR_PARTITION, ...): the partition waits replica.fetch.backoff.ms and tries again,
  until LeaderAndIsr moves it; a lost connection or a top-level error delays every partition of
  the fetcher the same way, and the connection is opened again.
- Throttles (KIP-73, replication/quotas.py): while the follower quota is exceeded, a throttled
  partition this broker follows from outside its ISR is left out of the fetches (looked at again
  every THROTTLE_RECHECK_S); the bytes fetched for throttled partitions are recorded.
- A partition becoming leader or stopped is removed; a new leader or epoch moves it to the
  right fetcher (`ReplicaFetcherManager.add_partitions`).

Deliberate deviation: truncation and the follower's append run on the event loop, as the leader's
append does.

Invariants: appends happen only at the local LEO the fetch was built from; a response for a
partition removed or moved meanwhile is dropped. Never blocks the event loop on the network.

Callers: the ReplicaManager (add / remove partitions as LeaderAndIsr and StopReplica change them,
shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from odradek.client.fetch_session import FetchPlan, FetchSessionHandler
from odradek.network_client import (
    ClientSecurity,
    NodeDisconnected,
    NodeUnreachable,
    RequestTimedOut,
    ReusedConnection,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_session import SESSION_ERRORS
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.protocol.primitives import ProtocolDecodeError
from odradek.protocol.topic_partition import TopicPartition
from odradek.repeated_failures import RepeatedFailures
from odradek.replication.partition import Partition
from odradek.replication.quotas import ReplicationQuota
from odradek.storage.leader_epoch import UNDEFINED_EPOCH
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topics by name, last_fetched_epoch and diverging_epoch
THROTTLE_RECHECK_S = 0.2
_LOST = (NodeUnreachable, NodeDisconnected, RequestTimedOut, ProtocolDecodeError)


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Kafka's replica.fetch.* settings of this broker."""

    broker_id: int
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    num_fetchers: int = 1  # num.replica.fetchers
    security: ClientSecurity | None = None  # the inter-broker listener's TLS, if any


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    broker_id: int
    host: str
    port: int


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    ready_at: float = 0.0  # monotonic seconds


class _Sent(NamedTuple):
    """A partition's fetch state as a request sends it: what the session compares (a NamedTuple,
    one per partition per fetch)."""

    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


PartitionLookup = Callable[[str, int], Partition | None]


class StuckDivergence(Exception):
    """A truncation to the leader's diverging epoch left the log as it was: fetching again at once
    would get the same answer, so the partition backs off (a guard against a loop, logged)."""


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader (see the module docstring)."""

    def __init__(
        self,
        leader: LeaderEndpoint,
        settings: FetcherSettings,
        lookup: PartitionLookup,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.leader = leader
        self._settings = settings
        self._lookup = lookup
        self._quota = quota or ReplicationQuota(settings.broker_id)
        self._states: dict[TopicPartition, _FetchState] = {}
        # the fetch state of every partition the next fetch wants (ready, not throttled), kept
        # up to date for the partitions in `_changed` only (see `_refresh`)
        self._wanted: dict[TopicPartition, _Sent] = {}
        self._changed: set[TopicPartition] = set()
        self._waiting: set[TopicPartition] = set()  # backing off or throttled until their ready_at
        self._failures = RepeatedFailures(log)  # per partition: a full disk fails every append
        self._wake = asyncio.Event()
        self._connection = ReusedConnection(
            f"replica-fetcher-{settings.broker_id}",
            settings.request_timeout_ms + settings.max_wait_ms,
            security=settings.security,
        )
        self._task: asyncio.Task[None] | None = None
        self._unreachable_logged = False
        self._session: FetchSessionHandler[TopicPartition, _Sent] = FetchSessionHandler()

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._states)

    def add(self, key: TopicPartition, leader_epoch: int) -> None:
        self._states[key] = _FetchState(leader_epoch)
        self._changed.add(key)
        self._waiting.discard(key)
        self._wake.set()
        if self._task is None:
            name = f"replica-fetcher-{self._settings.broker_id}-from-{self.leader.broker_id}"
            self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    def remove(self, key: TopicPartition) -> None:
        self._states.pop(key, None)
        self._changed.add(key)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self._connection.close()

    # -- the fetch loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        while self._states:
            changed = self._refresh(time.monotonic())
            if not self._wanted:
                await self._sleep_until_ready()
                continue
            sent = self._wanted
            plan = self._session.plan(sent, changed)
            response = await self._fetch(self._request(plan))
            if response is None:
                self._session.on_failure()
                self._back_off(sent)
                continue
            self._session.on_response(plan, response.error_code, response.session_id)
            if response.error_code in SESSION_ERRORS:  # the next fetch is a full one, at once
                log.info(
                    "Fetch session %d with broker %d: error %d, starting a new one",
                    plan.session_id,
                    self.leader.broker_id,
                    response.error_code,
                )
                continue
            if response.error_code != ErrorCode.NONE:
                self._back_off(sent)
                continue
            for topic in response.responses:
                for data in topic.partitions:
                    key = (topic.topic, data.partition_index)
                    if key in sent:
                        self._process(key, sent[key], data)
        self._task = None
        await self._connection.close()

    async def _sleep_until_ready(self) -> None:
        self._wake.clear()
        soonest = min(state.ready_at for state in self._states.values())
        try:
            await asyncio.wait_for(self._wake.wait(), max(0.0, soonest - time.monotonic()))
        except TimeoutError:
            pass

    def _refresh(self, now: float) -> set[TopicPartition] | None:
        """Bring `_wanted` up to date (see the module docstring) and return the partitions whose
        entry may have changed since the last fetch (None: any may have)."""
        changed: set[TopicPartition] | None = self._changed
        self._changed = set()
        if self._quota.throttles_any:
            changed = None
        states = self._states
        due = [key for key in self._waiting if (state := states.get(key)) is None or state.ready_at <= now]
        for key in due:
            self._waiting.discard(key)
        if changed is None:
            for key in {**states, **self._wanted}:
                self._refresh_partition(key, now)
            return None
        changed.update(due)
        for key in changed:
            self._refresh_partition(key, now)
        return changed

    def _refresh_partition(self, key: TopicPartition, now: float) -> None:
        """Put `key`'s fetch state in `_wanted`, or take it out (not ready, throttled, gone)."""
        state = self._states.get(key)
        partition = self._lookup(*key) if state is not None else None
        if (
            state is None
            or partition is None
            or partition.is_leader
            or partition.leader_epoch != state.leader_epoch
        ):
            self._states.pop(key, None)
            self._waiting.discard(key)
            self._wanted.pop(key, None)
        elif state.ready_at > now:
            self._waiting.add(key)
            self._wanted.pop(key, None)
        elif self._throttled(partition):
            state.ready_at = now + THROTTLE_RECHECK_S
            self._waiting.add(key)
            self._wanted.pop(key, None)
        else:
            plog = partition.log
            self._wanted[key] = _Sent(
                state.leader_epoch,
                plog.log_end_offset,
                plog.leader_epoch_cache.latest_epoch,
                plog.log_start_offset,
            )

    def _request(self, plan: FetchPlan[TopicPartition, _Sent]) -> FetchRequest:
        settings = self._settings
        topics: dict[str, FetchRequest.FetchTopic] = {}
        for (topic, index), sent in plan.send.items():
            topics.setdefault(topic, FetchRequest.FetchTopic(topic=topic)).partitions.append(
                FetchRequest.FetchPartition(
                    partition=index,
                    current_leader_epoch=sent.leader_epoch,
                    fetch_offset=sent.fetch_offset,
                    last_fetched_epoch=sent.last_fetched_epoch,
                    log_start_offset=sent.log_start_offset,
                    partition_max_bytes=settings.partition_max_bytes,
                )
            )
        forgotten: dict[str, FetchRequest.ForgottenTopic] = {}
        for topic, index in plan.forget:
            forgotten.setdefault(topic, FetchRequest.ForgottenTopic(topic=topic)).partitions.append(index)
        return FetchRequest(
            replica_id=settings.broker_id,
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.max_bytes,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=list(forgotten.values()),
        )

    def _throttled(self, partition: Partition) -> bool:
        """KIP-73's follower throttle: out of the ISR, throttled, and the quota exceeded."""
        quota = self._quota
        return (
            self._settings.broker_id not in partition.isr
            and quota.is_throttled(partition.topic, partition.partition)
            and quota.exceeded()
        )

    async def _fetch(self, request: FetchRequest) -> FetchResponse | None:
        try:
            leader = self.leader
            connection = await self._connection.to(leader.broker_id, leader.host, leader.port)
            response: FetchResponse = await connection.send(ApiKey.FETCH, FETCH_VERSION, request)
        except _LOST as exc:
            if not self._unreachable_logged:
                log.warning("Replica fetch from broker %d failed: %s", self.leader.broker_id, exc)
                self._unreachable_logged = True
            await self._connection.close()
            return None
        self._unreachable_logged = False
        return response

    def _back_off(self, keys: Iterable[TopicPartition]) -> None:
        ready_at = time.monotonic() + self._settings.backoff_ms / 1000
        for key in keys:
            state = self._states.get(key)
            if state is not None:
                state.ready_at = ready_at
                self._changed.add(key)

    # -- one partition's answer ------------------------------------------------------------------

    def _process(self, key: TopicPartition, sent: _Sent, data: FetchResponse.PartitionData) -> None:
        self._changed.add(key)
        state = self._states.get(key)
        partition = self._lookup(*key)
        if state is None or partition is None or state.leader_epoch != sent.leader_epoch:
            return
        if partition.is_leader or partition.leader_epoch != sent.leader_epoch:
            return
        try:
            if data.error_code == ErrorCode.NONE:
                self._on_data(partition, sent, data)
                if self._failures:
                    self._failures.succeeded(
                        key, "Replicating %s-%d from broker %d works again", *key, self.leader.broker_id
                    )
            elif data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._on_out_of_range(partition, sent, data)
            else:
                log.debug(
                    "Fetching %s-%d from broker %d: error %d", *key, self.leader.broker_id, data.error_code
                )
                self._back_off([key])
        except (KafkaError, StuckDivergence) as exc:
            self._failures.failed(
                key, "Replicating %s-%d from broker %d fails: %s", *key, self.leader.broker_id, exc
            )
            self._back_off([key])
        except Exception:
            log.exception("Replicating %s-%d from broker %d failed", *key, self.leader.broker_id)
            self._back_off([key])

    def _on_data(self, partition: Partition, sent: _Sent, data: FetchResponse.PartitionData) -> None:
        diverging = data.diverging_epoch
        if diverging is not None and diverging.epoch != UNDEFINED_EPOCH:
            self._truncate_to_diverging(partition, diverging.epoch, diverging.end_offset)
            return
        if partition.log_end_offset != sent.fetch_offset:
            return
        # a decoded response carries its records as a view of the frame, or none at all
        records = data.records if isinstance(data.records, memoryview) else memoryview(b"")
        if self._quota.is_throttled(partition.topic, partition.partition):
            self._quota.record(len(records))
        partition.append_records_as_follower(records, data.high_watermark)
        if data.log_start_offset > partition.log_start_offset:  # the leader's DeleteRecords or retention
            partition.log.advance_start_offset(data.log_start_offset)

    def _truncate_to_diverging(self, partition: Partition, epoch: int, leader_end: int) -> None:
        mine = partition.log.leader_epoch_cache.end_offset_for(epoch, partition.log_end_offset)
        offset = leader_end if mine.leader_epoch == UNDEFINED_EPOCH else min(leader_end, mine.end_offset)
        log.info(
            "Truncating %s-%d from %d to %d: its log diverges from leader %d's at epoch %d",
            partition.topic,
            partition.partition,
            partition.log_end_offset,
            offset,
            self.leader.broker_id,
            epoch,
        )
        before = (partition.log_end_offset, partition.log.leader_epoch_cache.latest_epoch)
        partition.truncate_to(offset)
        if (partition.log_end_offset, partition.log.leader_epoch_cache.latest_epoch) == before:
            raise StuckDivergence(f"truncating to {offset} at epoch {epoch} changed nothing; backing off")

    def _on_out_of_range(self, partition: Partition, sent: _Sent, data: FetchResponse.PartitionData) -> None:
        name = f"{partition.topic}-{partition.partition}"
        if sent.fetch_offset < data.log_start_offset:
            log.info(
                "%s: leader %d's log starts at %d, past this log's end %d: starting over there",
                name,
                self.leader.broker_id,
                data.log_start_offset,
                sent.fetch_offset,
            )
            partition.truncate_fully_and_start_at(data.log_start_offset)
        else:
            log.info(
                "%s: offset %d is past leader %d's log: truncating to its high watermark %d",
                name,
                sent.fetch_offset,
                self.leader.broker_id,
                data.high_watermark,
            )
            partition.truncate_to(max(data.high_watermark, 0))


class ReplicaFetcherManager:
    """The fetchers of this broker, one per (leader, fetcher id); see the module docstring."""

    def __init__(
        self, settings: FetcherSettings, lookup: PartitionLookup, quota: ReplicationQuota | None = None
    ) -> None:
        self._settings = settings
        self._lookup = lookup
        self._quota = quota
        self._fetchers: dict[tuple[LeaderEndpoint, int], ReplicaFetcher] = {}
        self._placement: dict[TopicPartition, tuple[LeaderEndpoint, int]] = {}

    def fetcher_id(self, key: TopicPartition) -> int:
        return zlib.crc32(f"{key[0]}-{key[1]}".encode()) % max(1, self._settings.num_fetchers)

    def add_partitions(self, partitions: Mapping[TopicPartition, tuple[LeaderEndpoint, int]]) -> None:
        """Follow each partition's (leader, leader epoch), moving it from another fetcher if needed."""
        for key, (leader, leader_epoch) in partitions.items():
            placement = (leader, self.fetcher_id(key))
            if self._placement.get(key) != placement:
                self._remove(key)
            fetcher = self._fetchers.get(placement)
            if fetcher is None:
                fetcher = self._fetchers[placement] = ReplicaFetcher(
                    leader, self._settings, self._lookup, self._quota
                )
            fetcher.add(key, leader_epoch)
            self._placement[key] = placement

    def remove_partitions(self, keys: Iterable[TopicPartition]) -> None:
        for key in keys:
            self._remove(key)

    def _remove(self, key: TopicPartition) -> None:
        placement = self._placement.pop(key, None)
        fetcher = self._fetchers.get(placement) if placement is not None else None
        if fetcher is not None:
            fetcher.remove(key)

    def following(self) -> dict[TopicPartition, int]:
        """Each partition being fetched and the broker it is fetched from."""
        return {key: leader.broker_id for key, (leader, _) in self._placement.items()}

    async def shutdown(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._placement = {}
        await asyncio.gather(*(fetcher.stop() for fetcher in fetchers))
