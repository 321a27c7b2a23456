"""Share-partitions on their partition leader (Kafka's SharePartitionManager, KIP-932): what the
ShareFetch and ShareAcknowledge handlers call (`broker.share_partitions`).

Owns the `SharePartition`s (coordinator/share_partition.py) of the (group, topic partition) pairs
fetched from partitions this broker leads, the share sessions (server/share_session.py) and the
way both reach the durable state (the share coordinator, coordinator/share_coordinator.py, in
process, or by request to
the broker leading the state's `__share_group_state` partition: server/share_persister.py).

- A share-partition is built on its first fetch here, or again when its partition's leader epoch
  moved (a share-partition moves with its partition's leadership): its state is read from the share
  coordinator; without one (deviation: Kafka 4.4's leader fails the fetch until its group
  coordinator has initialized the state), its start offset follows the group's `share.auto.offset.reset`
  (`group_config`, "latest" until group configs are wired: the high watermark; "earliest": the log
  start offset) and is written as the initial state.
- Fetch: per partition, locks past their deadline are released, offsets below the log start offset
  leave the window, and the log is read from the first AVAILABLE offset (else the window's end)
  through the ReplicaManager's `fetch_messages` (the Fetch handler's reads and its long poll in the
  fetch purgatory: max_wait_ms, min_bytes, max_bytes) up to the high watermark (read_committed: the
  last stable offset, `share.isolation.level`); the batches read are parsed for their offsets only
  (their 61-byte headers, read with pread), the acquirable records acquired for the member, and the
  batches holding them served as file ranges, untouched. Acquisition is not written (Kafka's). A
  read_committed group's aborted batches and transaction markers are archived, never acquired
  (`skipped_batches`); a read_uncommitted group acquires markers too, which its consumers
  acknowledge as gaps, as Kafka's do.
- Acquisition locks: a wake-up at each share-partition's earliest lock deadline (the broker's
  scheduler) releases the expired locks and writes the new state, so redeliveries and the archiving
  of records at the delivery count limit do not wait for the next request of the partition.
- Acknowledge: applied to a copy of the in-memory state, the new state written to the share
  coordinator (acks=-1) and only then kept and answered; a failed write keeps the old state and
  answers the write's error as Kafka's leader does (`state_error`: a share coordinator loading or
  moving is COORDINATOR_NOT_AVAILABLE, a newer leader epoch NOT_LEADER_OR_FOLLOWER; a failed read
  of the state the same). The persister has retried those first (server/share_persister.py).
  Lock expiries and releases on session close are written the same way.

The API of the share group side (membership, share-group offsets admin, group deletion):
- `group_config: Callable[[str], ShareGroupConfig]` (replace it to read group configs);
- `async initialize_state(group_id, topic_id, partition, start_offset) -> int` (error code): the
  state started at `start_offset` unless there is one (what Kafka's group coordinator does for the
  partitions it assigns; without it the leader starts the state itself at the first fetch);
- `async read_start_offsets(group_id, partitions=None) -> dict[TopicIdPartition, int]`: the start
  offset of each partition with state (`partitions` None: every state the local share coordinator
  keeps for the group);
- `async alter_start_offset(group_id, topic_id, partition, start_offset) -> int` (error code): a new
  state epoch starting there, the cached share-partition dropped;
- `async delete_state(group_id, partitions) -> dict[TopicIdPartition, int]` (error codes);
- `async has_state(group_id, topic_id, partition) -> bool`;
- `async member_left(group_id, member_id)`: its share session closes and its records are released.

Callers: the ShareFetch / ShareAcknowledge handlers, the broker, the share group side, tests.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from odradek.clock import Clock
from odradek.coordinator.config import ConfigValues
from odradek.coordinator.runtime import TimerHandle, Timers
from odradek.coordinator.share_partition import Acquired, SharePartition, ShareSettings
from odradek.coordinator.share_records import StateKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import FileSlice
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.types import FetchPartitionRequest, FetchPartitionResult
from odradek.server.share_persister import SharePersister
from odradek.server.share_session import ShareSessionCache
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# Where a record batch's header fields lie (the on-disk format is the wire format)
_HEADER = struct.Struct(">qi")  # base offset, batch length
_LOG_OVERHEAD = 12
_ATTRIBUTES, _ATTRIBUTES_AT = struct.Struct(">h"), 21
_LAST_DELTA, _LAST_DELTA_AT = struct.Struct(">i"), 23
_PRODUCER_ID, _PRODUCER_ID_AT = struct.Struct(">q"), 43
_HEADER_SIZE = 61
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """A share group's own settings (group configs): share.auto.offset.reset, share.isolation.level."""

    auto_offset_reset: str = "latest"
    isolation_level: int = READ_UNCOMMITTED


@dataclass(slots=True)
class _Entry:
    key: tuple[str, str, int]  # (group, topic, partition)
    partition: SharePartition
    leader_epoch: int
    lock: asyncio.Lock
    expiry: TimerHandle | None = None  # the wake-up at the earliest acquisition lock deadline


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a ShareFetch answer."""

    error: int
    records: tuple[FileSlice, ...] = ()
    acquired: tuple[Acquired, ...] = ()
    leader_id: int = -1
    leader_epoch: int = -1


def share_settings(config: ConfigValues) -> ShareSettings:
    return ShareSettings(
        config["group.share.record.lock.duration.ms"],
        config["group.share.delivery.count.limit"],
        config["group.share.partition.max.record.locks"],
    )


class SharePartitionManager:
    def __init__(
        self,
        config: ConfigValues,
        clock: Clock,
        replicas: ReplicaManager,
        persister: SharePersister,
        timers: Timers,
    ) -> None:
        self.settings = share_settings(config)
        self.max_fetch_records = config["share.fetch.max.fetch.records"]
        self._clock = clock
        self._replicas = replicas
        self.persister = persister
        self.sessions = ShareSessionCache(config["group.share.max.share.sessions"])
        self.group_config: Callable[[str], ShareGroupConfig] = lambda group_id: ShareGroupConfig()
        self._entries: dict[tuple[str, str, int], _Entry] = {}
        self._topic_ids: dict[tuple[str, str, int], uuid.UUID] = {}
        self._timers = timers
        self._expiring: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Stop the lock-expiry wake-ups (broker shutdown)."""
        for entry in self._entries.values():
            if entry.expiry is not None:
                entry.expiry.cancel()
        await cancel_and_wait(*self._expiring)

    # -- acquisition lock expiry -----------------------------------------------------------------

    def _arm_expiry(self, entry: _Entry) -> None:
        """Wake up at the share-partition's earliest lock deadline (unless a wake-up is armed)."""
        if entry.expiry is not None:
            return
        deadline = entry.partition.next_deadline()
        if deadline is not None:
            entry.expiry = self._timers.at("share-lock-expiry", deadline, lambda: self._on_expiry(entry))

    def _on_expiry(self, entry: _Entry) -> None:
        entry.expiry = None
        if self._entries.get(entry.key) is not entry:
            return  # dropped (leadership moved, state altered)
        task = asyncio.get_running_loop().create_task(self._expire(entry))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _expire(self, entry: _Entry) -> None:
        """Release the locks past their deadline and keep the new state (delivery counts that
        reached the limit archive their records), then wait for the next deadline."""
        group_id, topic, index = entry.key
        async with entry.lock:
            if not self._still_leader(entry):
                self._entries.pop(entry.key, None)  # leadership moved: the new leader owns the state
                return
            await self._tidy(group_id, topic, index, entry)
            self._arm_expiry(entry)

    def _still_leader(self, entry: _Entry) -> bool:
        _, topic, index = entry.key
        hosted = self._replicas.partition(topic, index)
        return (
            hosted is not None
            and self._replicas.serves_as_leader(topic, index)
            and hosted.leader_epoch == entry.leader_epoch
        )

    # -- share-partitions ---------------------------------------------------------------------------

    async def _entry(
        self, group_id: str, topic: str, topic_id: uuid.UUID, index: int
    ) -> tuple[int, _Entry | None]:
        """The share-partition of `group_id` on a partition led here (built if need be), or the error."""
        hosted = self._replicas.partition(topic, index)
        if hosted is None or not self._replicas.serves_as_leader(topic, index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        key = (group_id, topic, index)
        entry = self._entries.get(key)
        if entry is not None and entry.leader_epoch == hosted.leader_epoch:
            return ErrorCode.NONE, entry
        state_key = StateKey(group_id, topic_id, index)
        error, state = await self.persister.read_state(state_key)
        if error:
            return state_error(error), None
        entry = self._entries.get(key)  # built meanwhile by another request
        if entry is not None and entry.leader_epoch == hosted.leader_epoch:
            return ErrorCode.NONE, entry
        if state is None:
            start = self._reset_offset(group_id, hosted.log_start_offset, hosted.high_watermark)
            error = await self.persister.initialize_state(state_key, 0, start)
            if error:
                return state_error(error), None
            share = SharePartition(self.settings, start)
        else:
            share = SharePartition.from_state(
                self.settings, state.start_offset, state.batches, state.state_epoch
            )
        entry = _Entry(key, share, hosted.leader_epoch, asyncio.Lock())
        self._entries[key] = entry
        self._topic_ids[key] = topic_id
        return ErrorCode.NONE, entry

    def _reset_offset(self, group_id: str, log_start: int, high_watermark: int) -> int:
        reset = self.group_config(group_id).auto_offset_reset
        return log_start if reset == "earliest" else high_watermark

    async def _persist(
        self, group_id: str, topic: str, index: int, entry: _Entry, saved: SharePartition
    ) -> int:
        """Write the share-partition's state; on failure it goes back to `saved`, and when the
        state moved on without it (its state epoch altered, a newer leader) it is dropped, to be
        read again at the next request."""
        share = entry.partition
        topic_id = self._topic_ids[(group_id, topic, index)]
        error = await self.persister.write_state(
            StateKey(group_id, topic_id, index),
            share.state_epoch,
            entry.leader_epoch,
            share.start_offset,
            share.state_batches(),
        )
        if error:
            log.warning(
                "Writing the state of share-partition %s:%s-%d failed: %s", group_id, topic, index, error
            )
            share.restore(saved)
            if error in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                if self._entries.get((group_id, topic, index)) is entry:
                    del self._entries[(group_id, topic, index)]
        return state_error(error)

    async def _tidy(self, group_id: str, topic: str, index: int, entry: _Entry) -> None:
        """Expired locks released and offsets below the log start dropped (written if changed)."""
        share = entry.partition
        hosted = self._replicas.partition(topic, index)
        saved = share.copy()
        changed = share.expire_locks(self._clock.monotonic_ms())
        if hosted is not None and hosted.log_start_offset > share.start_offset:
            share.skip_below(hosted.log_start_offset)
            changed = True
        if changed:
            await self._persist(group_id, topic, index, entry, saved)

    # -- ShareFetch -----------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        partitions: Sequence[tuple[str, uuid.UUID, int]],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
    ) -> list[PartitionFetch]:
        """One answer per (topic, topic id, partition), in order."""
        answers: list[PartitionFetch | None] = [None] * len(partitions)
        reads: list[FetchPartitionRequest] = []
        readers: list[tuple[int, _Entry]] = []
        for i, (topic, topic_id, index) in enumerate(partitions):
            error, entry = await self._entry(group_id, topic, topic_id, index)
            if entry is None:
                answers[i] = self._failed(topic, index, error)
                continue
            async with entry.lock:
                await self._tidy(group_id, topic, index, entry)
                if not entry.partition.can_acquire():
                    answers[i] = PartitionFetch(ErrorCode.NONE)
                    continue
                offset = entry.partition.next_fetch_offset()
            reads.append(FetchPartitionRequest(topic, index, offset, max_bytes))
            readers.append((i, entry))
        if reads:
            isolation = self.group_config(group_id).isolation_level
            results = await self._replicas.fetch_messages(reads, min_bytes, max_bytes, max_wait_ms, isolation)
            budget = min(max_records if max_records > 0 else 1 << 31, self.max_fetch_records)
            for (i, entry), result in zip(readers, results, strict=True):
                if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # the log start moved meanwhile
                    answers[i] = PartitionFetch(ErrorCode.NONE)  # the next fetch skips below it
                    continue
                if result.error_code:
                    answers[i] = self._failed(result.topic, result.partition, result.error_code)
                    continue
                answer = await self._acquire(member_id, entry, result, budget, isolation == READ_COMMITTED)
                budget -= sum(a.last_offset - a.first_offset + 1 for a in answer.acquired)
                answers[i] = answer
        return [a if a is not None else PartitionFetch(ErrorCode.UNKNOWN_SERVER_ERROR) for a in answers]

    def _failed(self, topic: str, index: int, error: int) -> PartitionFetch:
        hosted = self._replicas.partition(topic, index)
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER and hosted is not None:
            return PartitionFetch(error, leader_id=hosted.leader_id, leader_epoch=hosted.leader_epoch)
        return PartitionFetch(error)

    async def _acquire(
        self, member_id: str, entry: _Entry, result: FetchPartitionResult, budget: int, committed: bool
    ) -> PartitionFetch:
        slices = result.records
        if not slices or budget <= 0:
            return PartitionFetch(ErrorCode.NONE)
        # no offset at or past the window's start plus its record locks, nor past its end plus the
        # records still wanted, can be acquired now: the batches from there on are not read (a read
        # of 1 MiB of small records holds thousands)
        share = entry.partition
        below = min(share.start_offset + share.settings.max_record_locks, share.next_offset + budget)
        batches = await asyncio.to_thread(batch_spans, slices, below)
        skipped: set[int] = set()
        if committed:
            aborted = [(txn.producer_id, txn.first_offset) for txn in result.aborted_transactions or ()]
            skipped = skipped_batches(batches, aborted)
        async with entry.lock:
            acquired = entry.partition.acquire(
                member_id, [(b.base, b.last) for b in batches], budget, self._clock.monotonic_ms(), skipped
            )
            self._arm_expiry(entry)
        if not acquired:
            return PartitionFetch(ErrorCode.NONE)
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        served: list[FileSlice] = []
        for base, last_offset, fd, position, size, *_ in batches:
            if last_offset < first or base > last or base in skipped:
                continue
            if served and served[-1].fd == fd and served[-1].offset + served[-1].length == position:
                served[-1] = FileSlice(fd, served[-1].offset, served[-1].length + size)
            else:
                served.append(FileSlice(fd, position, size))
        return PartitionFetch(ErrorCode.NONE, tuple(served), tuple(acquired))

    # -- ShareAcknowledge -----------------------------------------------------------------------

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        topic_id: uuid.UUID,
        index: int,
        batches: Sequence[tuple[int, int, Sequence[int]]],
    ) -> int:
        error, entry = await self._entry(group_id, topic, topic_id, index)
        if entry is None:
            return error
        async with entry.lock:
            await self._tidy(group_id, topic, index, entry)
            saved = entry.partition.copy()
            error = entry.partition.acknowledge(member_id, batches, self._clock.monotonic_ms())
            if error:
                return error
            return await self._persist(group_id, topic, index, entry, saved)

    async def release(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """The member's records of `partitions` go back (its share session closed)."""
        for topic, index in partitions:
            entry = self._entries.get((group_id, topic, index))
            if entry is None:
                continue
            async with entry.lock:
                saved = entry.partition.copy()
                if self._still_leader(entry) and entry.partition.release_member(member_id):
                    await self._persist(group_id, topic, index, entry, saved)

    async def close_session(self, group_id: str, member_id: str) -> None:
        session = self.sessions.close((group_id, member_id))
        if session is None:
            return
        names = [(self._replicas.topic_name(topic_id), index) for topic_id, index in session.partitions]
        await self.release(group_id, member_id, [(n, i) for n, i in names if n is not None])

    # -- the share group side's API -------------------------------------------------------------

    async def member_left(self, group_id: str, member_id: str) -> None:
        await self.close_session(group_id, member_id)

    async def read_start_offsets(
        self, group_id: str, partitions: Iterable[TopicIdPartition] | None = None
    ) -> dict[TopicIdPartition, int]:
        if partitions is None:
            states = self.persister.local_states(group_id)
            return {TopicIdPartition(k.topic_id, k.partition): s.start_offset for k, s in states.items()}
        found: dict[TopicIdPartition, int] = {}
        for topic_id, index in partitions:
            _, state = await self.persister.read_state(StateKey(group_id, topic_id, index))
            if state is not None:
                found[TopicIdPartition(topic_id, index)] = state.start_offset
        return found

    async def has_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        return await self.persister.has_state(StateKey(group_id, topic_id, partition))

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int
    ) -> int:
        """Start the share-partition's state at `start_offset` unless it has one (Kafka's group
        coordinator initializes a partition it assigns first); the error code."""
        key = StateKey(group_id, topic_id, partition)
        error, state = await self.persister.read_state(key)
        if error or state is not None:
            return error
        return await self.persister.initialize_state(key, 0, start_offset)

    async def alter_start_offset(
        self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int
    ) -> int:
        key = StateKey(group_id, topic_id, partition)
        _, state = await self.persister.read_state(key)
        epoch = state.state_epoch + 1 if state is not None else 0
        self._forget(group_id, topic_id, partition)
        return await self.persister.initialize_state(key, epoch, start_offset)

    async def delete_state(
        self, group_id: str, partitions: Iterable[TopicIdPartition]
    ) -> dict[TopicIdPartition, int]:
        errors: dict[TopicIdPartition, int] = {}
        for topic_id, index in partitions:
            self._forget(group_id, topic_id, index)
            errors[TopicIdPartition(topic_id, index)] = await self.persister.delete_state(
                StateKey(group_id, topic_id, index)
            )
        return errors

    def _forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        for key, known in list(self._topic_ids.items()):
            if key[0] == group_id and key[2] == partition and known == topic_id:
                self._entries.pop(key, None)
                self._topic_ids.pop(key, None)


def state_error(error: int) -> int:
    """What a share client is answered for a failed read or write of the state (Kafka's
    SharePartition): a share coordinator still loading or moving is COORDINATOR_NOT_AVAILABLE, a
    newer leader epoch NOT_LEADER_OR_FOLLOWER; other codes as they are."""
    if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error == ErrorCode.FENCED_LEADER_EPOCH:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return error


class BatchSpan(NamedTuple):
    """What a share fetch needs of a batch read from the log: its offsets, where it lies, and
    whether it is transactional or a control batch (a marker) and of which producer."""

    base: int
    last: int
    fd: int
    position: int
    size: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


def batch_spans(slices: Sequence[FileSlice], below: int = 1 << 63) -> list[BatchSpan]:
    """Each whole batch of `slices` before the first that starts at or above `below`, and at least
    the first (worker thread: a pread of each batch's 61-byte header)."""
    spans: list[BatchSpan] = []
    for piece in slices:
        position, end = piece.offset, piece.offset + piece.length
        while position + _HEADER_SIZE <= end:
            head = os.pread(piece.fd, _HEADER_SIZE, position)
            if len(head) < _HEADER_SIZE:
                break
            base, length = _HEADER.unpack_from(head)
            size = _LOG_OVERHEAD + length
            if position + size > end:
                break
            if spans and base >= below:
                return spans
            (attributes,) = _ATTRIBUTES.unpack_from(head, _ATTRIBUTES_AT)
            (last_delta,) = _LAST_DELTA.unpack_from(head, _LAST_DELTA_AT)
            (producer_id,) = _PRODUCER_ID.unpack_from(head, _PRODUCER_ID_AT)
            spans.append(
                BatchSpan(
                    base,
                    base + last_delta,
                    piece.fd,
                    position,
                    size,
                    producer_id,
                    bool(attributes & _TRANSACTIONAL),
                    bool(attributes & _CONTROL),
                )
            )
            position += size
    return spans


def skipped_batches(batches: Sequence[BatchSpan], aborted: Sequence[tuple[int, int]]) -> set[int]:
    """The base offsets of the batches a read_committed share group never sees: control batches
    (transaction markers) and the batches of aborted transactions (`aborted`: (producer id, first
    offset) of each, as the log's transaction index lists them for the range read), as Kafka's
    read_committed consumers skip them."""
    starts = sorted(aborted, key=lambda txn: txn[1])
    ongoing: set[int] = set()
    skipped: set[int] = set()
    for batch in batches:
        while starts and starts[0][1] <= batch.base:
            ongoing.add(starts.pop(0)[0])
        if batch.control:
            skipped.add(batch.base)
            ongoing.discard(batch.producer_id)
        elif batch.transactional and batch.producer_id in ongoing:
            skipped.add(batch.base)
    return skipped
