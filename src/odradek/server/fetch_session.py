"""Incremental fetch sessions (KIP-227): the FetchSessionCache and what each session remembers.

A fetch session spares a client (a consumer or a follower broker) from listing every partition in
every Fetch: the broker keeps the session's partitions with their fetch positions and what it last
told the client about each; the client then sends only what changed, and the broker answers only
what changed.

Request metadata (session_id, session_epoch), read as Kafka reads it (Fetch v7+; v4-v6 decode as
0 / -1):
- (0, -1): a sessionless full fetch, nothing is created (librdkafka and aiokafka always send this);
- (0, 0): a full fetch that creates a session if the cache has a slot for it: the response carries
  its id and the client's next request uses epoch 1 (kafka-python and Java clients do this);
- (id, 0): close session `id`, then as (0, 0); (id, -1): close session `id`, then as (0, -1);
- (id, epoch > 0): an incremental fetch, checked by `FetchSessionCache.incremental`:
  FETCH_SESSION_ID_NOT_FOUND if the cache does not hold `id`, INVALID_FETCH_SESSION_EPOCH if `epoch`
  is not the session's next one, FETCH_SESSION_TOPIC_ID_ERROR if the session was made with topic ids
  (Fetch v13+) and this request names topics, or the other way round. Otherwise the request's
  partitions are added or updated (fetch offset, partition max bytes, leader epoch),
  `forgotten_topics_data` removes partitions, the epoch moves on (after 2^31-1 comes 1) and the
  whole session is read, but for the partitions whose quiet mark still holds (`CachedPartition.quiet`,
  replication/quiet.py; a request naming or forgetting a partition ends its mark). A follower's
  session keeps the `FetchClock` its quiet partitions rest on.

What an incremental response carries (`CachedPartition.must_respond`): a partition with records, or
whose high watermark, last stable offset or log start offset differ from what the client was last
told, or that has an error (after which its next answer is always sent). A partition answered with
records moves to the end of the session's order, so that partitions cut short by the response's
max_bytes come first next time (Kafka's round robin).

Cache (`max.incremental.fetch.session.cache.slots`, default 1000; 0 turns sessions off). When it is
full, a new session takes the slot of:
1. the least recently used session, if it has been idle for EVICTION_MS (Kafka's internal
   min.incremental.fetch.session.eviction.ms): any new session may evict it; else
2. the consumer session with the fewest partitions (the least recently used of those), if the new
   session belongs to a follower (replica id >= 0, "privileged") or has more partitions than it.
Otherwise no session is created and the response says session id 0, so the client goes on with full
fetches.

Deliberate simplification: one cache with one eviction order, where Kafka divides the slots among 8
shards that evict independently.

Invariants: session ids are random positive int32s, unique in the cache; a session's epoch is the
one its next incremental request must carry. Everything runs on the broker's event loop (no locks).

Callers: the Fetch handler (server/handlers/fetch.py); the broker builds one cache.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session import INT32_MAX, INVALID_SESSION_ID, next_epoch
from odradek.protocol.messages.fetch import FetchRequest
from odradek.replication.partition import FetchClock
from odradek.replication.quiet import QuietMark

log = logging.getLogger(__name__)

EVICTION_MS = 120_000
DEFAULT_CACHE_SLOTS = 1000
UNKNOWN = -1

# A partition as the client names it: (topic id, topic name, partition). Before Fetch v13 the id is
# the zero UUID; from v13 the name is "" (the broker resolves the id at every read).
PartitionKey = tuple[uuid.UUID, str, int]


class PartitionAnswer(Protocol):
    """What a fetch tells the client of a partition: a FetchResponse.PartitionData, or the
    ReplicaManager's read result it is built from (so an unchanged partition needs no answer)."""

    @property
    def error_code(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def records(self) -> object: ...


@dataclass(slots=True)
class CachedPartition:
    """One partition of a fetch: what the client asked for, and what it was last told."""

    topic_id: uuid.UUID
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1
    high_watermark: int = UNKNOWN
    last_stable_offset: int = UNKNOWN
    log_start_offset: int = UNKNOWN
    quiet: QuietMark | None = None  # while set and holding, incremental fetches skip it

    @classmethod
    def from_request(
        cls, topic: FetchRequest.FetchTopic, partition: FetchRequest.FetchPartition
    ) -> CachedPartition:
        return cls(
            topic.topic_id,
            topic.topic,
            partition.partition,
            partition.fetch_offset,
            partition.partition_max_bytes,
            partition.current_leader_epoch,
            partition.last_fetched_epoch,
        )

    @property
    def key(self) -> PartitionKey:
        return (self.topic_id, self.topic, self.partition)

    def update_request(self, partition: FetchRequest.FetchPartition) -> None:
        self.release()
        self.fetch_offset = partition.fetch_offset
        self.partition_max_bytes = partition.partition_max_bytes
        self.current_leader_epoch = partition.current_leader_epoch
        self.last_fetched_epoch = partition.last_fetched_epoch

    def release(self) -> None:
        """End the partition's quiet mark (replication/quiet.py), if it has one."""
        if self.quiet is not None:
            self.quiet.release()
            self.quiet = None

    def must_respond(self, data: PartitionAnswer) -> bool:
        """Whether an incremental response must carry `data`; remembers what the client is told."""
        if data.error_code != ErrorCode.NONE:
            self.high_watermark = self.last_stable_offset = self.log_start_offset = UNKNOWN
            return True
        told = (data.high_watermark, data.last_stable_offset, data.log_start_offset)
        changed = told != (self.high_watermark, self.last_stable_offset, self.log_start_offset)
        self.high_watermark, self.last_stable_offset, self.log_start_offset = told
        return changed or bool(data.records)


@dataclass(slots=True)
class FetchSession:
    session_id: int
    privileged: bool
    uses_topic_ids: bool
    last_used_ms: int
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    epoch: int = 1
    clock: FetchClock = field(default_factory=FetchClock)  # a follower's quiet partitions rest on it

    def update(
        self, topics: Iterable[FetchRequest.FetchTopic], forgotten: Iterable[FetchRequest.ForgottenTopic]
    ) -> None:
        """An incremental request's changes: add or update its partitions, then drop the forgotten."""
        for topic in topics:
            for partition in topic.partitions:
                cached = self.partitions.get((topic.topic_id, topic.topic, partition.partition))
                if cached is None:
                    cached = CachedPartition.from_request(topic, partition)
                    self.partitions[cached.key] = cached
                else:
                    cached.update_request(partition)
        for gone in forgotten:
            for index in gone.partitions:
                cached = self.partitions.pop((gone.topic_id, gone.topic, index), None)
                if cached is not None:
                    cached.release()

    def move_to_end(self, partition: CachedPartition) -> None:
        self.partitions[partition.key] = self.partitions.pop(partition.key)


class FetchSessionCache:
    """The broker's fetch sessions by id, at most `max_entries` of them; see the module docstring."""

    def __init__(
        self,
        max_entries: int,
        clock: Clock,
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.Random()
        self._sessions: dict[int, FetchSession] = {}  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        """The partitions all sessions hold (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(session.partitions) for session in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            log.debug("Closed fetch session %d", session_id)
        return session

    def incremental(
        self,
        session_id: int,
        epoch: int,
        uses_topic_ids: bool,
        topics: Iterable[FetchRequest.FetchTopic],
        forgotten: Iterable[FetchRequest.ForgottenTopic],
    ) -> FetchSession | int:
        """The session an incremental request continues, updated and moved to its next epoch, or
        the error code answering the request (the session is then left as it was)."""
        session = self._sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        session.update(topics, forgotten)
        session.epoch = next_epoch(epoch)
        self._touch(session)
        return session

    def maybe_create(
        self, partitions: Iterable[CachedPartition], privileged: bool, uses_topic_ids: bool
    ) -> int:
        """A new session over `partitions` (as the full response told them), if a slot is free or
        can be freed by eviction; its id, or INVALID_SESSION_ID when none was created."""
        cached = {partition.key: partition for partition in partitions}
        now = self._clock.monotonic_ms()
        if len(self._sessions) >= self.max_entries and not self._evict_for(privileged, len(cached), now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now, cached)
        self._sessions[session.session_id] = session
        log.debug(
            "Created fetch session %d: %d partitions, %s",
            session.session_id,
            len(cached),
            "follower" if privileged else "consumer",
        )
        return session.session_id

    def _touch(self, session: FetchSession) -> None:
        session.last_used_ms = self._clock.monotonic_ms()
        self._sessions[session.session_id] = self._sessions.pop(session.session_id)

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        """Free a slot for a new session (rules 1 and 2 of the module docstring); whether it did."""
        victim = next(iter(self._sessions.values()), None)
        if victim is None or now - victim.last_used_ms < self._eviction_ms:
            consumers = (session for session in self._sessions.values() if not session.privileged)
            victim = min(consumers, key=lambda session: len(session.partitions), default=None)
            if victim is None or not (privileged or size > len(victim.partitions)):
                return False
        del self._sessions[victim.session_id]
        log.debug("Evicted fetch session %d (%d partitions)", victim.session_id, len(victim.partitions))
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, INT32_MAX)
            if session_id not in self._sessions:
                return session_id
