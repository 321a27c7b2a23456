"""The state of one share-partition on its partition leader (Kafka's SharePartition, KIP-932):
which records of a topic partition a share group has in flight, who holds them, and how often
they were delivered.

Owns, for one (group, topic partition), the in-flight window [start offset (SPSO), next offset):
every offset in it has a `RecordState` (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), a delivery
count and, while ACQUIRED, the member holding it and the deadline of its acquisition lock. Offsets
at or above `next_offset` were never acquired (Kafka's end offset is `next_offset - 1`).

Rules (Kafka's):
- `acquire` takes the AVAILABLE offsets of the window and the new offsets past it that a read of
  the log returned (as batch spans), bumping each delivery count, up to `max_records` and while
  the records in flight stay below `group.share.partition.max.record.locks`; batches a
  read_committed group must not see (aborted transactions, markers) are ARCHIVED instead, and so
  are the offsets a read skips over (removed by compaction);
- an acquisition lock expires at `group.share.record.lock.duration.ms`: the record becomes
  AVAILABLE again, or ARCHIVED once its delivery count reached `group.share.delivery.count.limit`;
- acknowledgements apply to records the member holds: ACCEPT(1) -> ACKNOWLEDGED, RELEASE(2) ->
  AVAILABLE (ARCHIVED at the delivery limit), REJECT(3) -> ARCHIVED, RENEW(4) extends the lock, GAP
  (0) -> ARCHIVED; anything else about the range (not in flight, not ACQUIRED, held by another
  member) is INVALID_RECORD_STATE and nothing of the request's batches changes;
- the start offset moves over a prefix of ACKNOWLEDGED/ARCHIVED offsets, and over offsets below the
  log start offset (`skip_below`);
- what is kept durably (`state_batches`, Kafka's persisted state batches): the window as runs of
  equal (state, delivery count), an ACQUIRED offset written as AVAILABLE (a lock does not outlive
  the leader).

Pure and synchronous: time comes in as `now_ms`; the caller (server/share_partitions.py) serializes
the calls on one partition and persists, taking a `copy` before each change to `restore` if the write
fails. Records are immutable (`InFlight`; those no member holds are shared through `settled`), so a
copy is a copy of one dict; `lock_floor_ms` lets `expire_locks` skip the records until a lock may
have expired. Callers: that module, the share coordinator's tests.
"""

from __future__ import annotations

import enum
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids, as written in the share coordinator's state batches."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
NO_LOCK = 1 << 62


class InFlight(NamedTuple):
    """One offset of the window. Immutable: a transition puts a new one in `records`, so a copy of the
    partition is a copy of that dict alone."""

    state: RecordState
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


_SETTLED: dict[tuple[RecordState, int], InFlight] = {}


def settled(state: RecordState, delivery_count: int) -> InFlight:
    """The record of an offset no member holds: one shared per (state, delivery count), records
    being immutable (delivery counts stay under `group.share.delivery.count.limit`)."""
    record = _SETTLED.get((state, delivery_count))
    if record is None:
        record = _SETTLED[(state, delivery_count)] = InFlight(state, delivery_count)
    return record


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one state and delivery count (Kafka's PersisterStateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acquired:
    """An AcquiredRecords range of a ShareFetch answer."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSettings:
    lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


@dataclass(slots=True)
class SharePartition:
    settings: ShareSettings
    start_offset: int
    next_offset: int = -1
    records: dict[int, InFlight] = field(default_factory=dict)
    state_epoch: int = 0
    lock_floor_ms: int = NO_LOCK  # at or below every acquisition lock's deadline: none expires before

    def __post_init__(self) -> None:
        self.next_offset = max(self.next_offset, self.start_offset)

    @classmethod
    def from_state(
        cls, settings: ShareSettings, start_offset: int, batches: Iterable[StateBatch], state_epoch: int = 0
    ) -> SharePartition:
        """The share-partition a read of its durable state gives back."""
        partition = cls(settings, start_offset, state_epoch=state_epoch)
        for batch in sorted(batches, key=lambda b: b.first_offset):
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = RecordState(batch.delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                partition.records[offset] = settled(state, batch.delivery_count)
            partition.next_offset = max(partition.next_offset, batch.last_offset + 1)
        for offset in range(start_offset, partition.next_offset):  # gaps in the runs: nothing to deliver
            partition.records.setdefault(offset, settled(RecordState.ARCHIVED, 0))
        partition.advance()
        return partition

    # -- reading --------------------------------------------------------------------------------

    def in_flight_count(self) -> int:
        return self.next_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where a read of the log starts: the first AVAILABLE offset, else the window's end."""
        for offset in range(self.start_offset, self.next_offset):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.next_offset

    def can_acquire(self) -> bool:
        return (
            self.next_fetch_offset() < self.next_offset
            or self.in_flight_count() < self.settings.max_record_locks
        )

    # -- transitions ----------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        spans: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        skipped: Container[int] = (),
    ) -> list[Acquired]:
        """Acquire for `member` the acquirable offsets of `spans` ((base, last) offsets of the
        batches a read returned, in order); the AcquiredRecords ranges. The batches whose base
        offset is in `skipped` (aborted or control batches of a read_committed group) are archived
        instead: never delivered."""
        deadline = now_ms + self.settings.lock_duration_ms
        taken: list[int] = []
        budget = max_records if max_records > 0 else 1 << 62
        for base, last in spans:
            if base > self.next_offset:  # the offsets between were removed by compaction
                self._archive(self.next_offset, base - 1)
            if base in skipped:
                self._archive(base, last)
                continue
            for offset in range(max(base, self.start_offset), min(last + 1, self.next_offset)):
                if len(taken) >= budget:
                    return self._ranges(taken)
                if self._take(offset, member, deadline):
                    taken.append(offset)
            first_new = max(base, self.next_offset)  # the window's end, from here on
            wanted = last + 1 - first_new
            if wanted > 0:
                locks_left = self.settings.max_record_locks - self.in_flight_count()
                count = max(0, min(wanted, locks_left, budget - len(taken)))
                self._take_new(count, member, deadline)
                taken.extend(range(first_new, first_new + count))
                if count < wanted:
                    return self._ranges(taken)  # nothing past here may be taken
        return self._ranges(taken)

    def _take(self, offset: int, member: str, deadline_ms: int) -> bool:
        """Acquire `offset` of the window for `member` if it is AVAILABLE: whether it was."""
        record = self.records[offset]
        if record.state is not RecordState.AVAILABLE:
            return False
        self.records[offset] = InFlight(RecordState.ACQUIRED, record.delivery_count + 1, member, deadline_ms)
        self.lock_floor_ms = min(self.lock_floor_ms, deadline_ms)
        return True

    def _take_new(self, count: int, member: str, deadline_ms: int) -> None:
        """Acquire for `member` the `count` offsets past the window's end (one record shared by all)."""
        if count <= 0:
            return
        acquired = InFlight(RecordState.ACQUIRED, 1, member, deadline_ms)
        self.records.update(dict.fromkeys(range(self.next_offset, self.next_offset + count), acquired))
        self.next_offset += count
        self.lock_floor_ms = min(self.lock_floor_ms, deadline_ms)

    def _archive(self, base: int, last: int) -> None:
        for offset in range(max(base, self.start_offset), last + 1):
            if offset < self.next_offset:
                record = self.records[offset]
                if record.state is RecordState.AVAILABLE:
                    self.records[offset] = settled(RecordState.ARCHIVED, record.delivery_count)
            elif offset == self.next_offset:
                self.records[offset] = settled(RecordState.ARCHIVED, 0)
                self.next_offset += 1
        self.advance()

    def _ranges(self, offsets: list[int]) -> list[Acquired]:
        """`offsets` (ascending) as runs of consecutive offsets of one delivery count."""
        ranges: list[Acquired] = []
        first = last = count = -1
        for offset in offsets:
            delivered = self.records[offset].delivery_count
            if offset != last + 1 or delivered != count:
                if first >= 0:
                    ranges.append(Acquired(first, last, count))
                first, count = offset, delivered
            last = offset
        if first >= 0:
            ranges.append(Acquired(first, last, count))
        return ranges

    def acknowledge(self, member: str, batches: Sequence[tuple[int, int, Sequence[int]]], now_ms: int) -> int:
        """Apply (first offset, last offset, acknowledge types) batches of `member`: the error
        code (nothing changes unless every batch is valid)."""
        for first, last, types in batches:
            error = self._check(member, first, last, types)
            if error:
                return error
        for first, last, types in batches:
            if len(types) == 1:
                self._apply(first, last, AcknowledgeType(types[0]), now_ms)
                continue
            for offset, kind in enumerate(types, first):
                self._apply(offset, offset, AcknowledgeType(kind), now_ms)
        self.advance()
        return ErrorCode.NONE

    def _check(self, member: str, first: int, last: int, types: Sequence[int]) -> int:
        if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(kind not in AcknowledgeType.__members__.values() for kind in types):
            return ErrorCode.INVALID_REQUEST
        if first < self.start_offset or last >= self.next_offset:
            return ErrorCode.INVALID_RECORD_STATE
        for offset in range(first, last + 1):
            record = self.records[offset]
            if record.state is not RecordState.ACQUIRED or record.member != member:
                kind = types[0] if len(types) == 1 else types[offset - first]
                if kind == AcknowledgeType.GAP and record.state in DONE:
                    continue
                return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def _apply(self, first: int, last: int, kind: AcknowledgeType, now_ms: int) -> None:
        """`kind` applied to each held record of [first, last] (the others are gaps already done)."""
        records = self.records
        held = [(offset, records[offset]) for offset in range(first, last + 1)]
        held = [(offset, record) for offset, record in held if record.state is RecordState.ACQUIRED]
        if kind is AcknowledgeType.RENEW:
            deadline_ms = now_ms + self.settings.lock_duration_ms
            records.update((offset, record._replace(deadline_ms=deadline_ms)) for offset, record in held)
        elif kind is AcknowledgeType.RELEASE:
            records.update(
                (offset, settled(self._released_state(record), record.delivery_count))
                for offset, record in held
            )
        else:  # ACCEPT: ACKNOWLEDGED; REJECT, GAP: ARCHIVED
            state = RecordState.ACKNOWLEDGED if kind is AcknowledgeType.ACCEPT else RecordState.ARCHIVED
            records.update((offset, settled(state, record.delivery_count)) for offset, record in held)

    def _released_state(self, record: InFlight) -> RecordState:
        limit = self.settings.delivery_count_limit
        return RecordState.ARCHIVED if record.delivery_count >= limit else RecordState.AVAILABLE

    def release_member(self, member: str) -> bool:
        """Every record `member` holds goes back (its share session closed); whether any did."""
        held = self._acquired()
        return self._release([offset for offset, record in held if record.member == member])

    def expire_locks(self, now_ms: int) -> bool:
        """Locks past their deadline are released; whether any was. Without a look at the records
        while the earliest deadline is still ahead."""
        if now_ms < self.lock_floor_ms:
            return False
        held = self._acquired()
        expired = [offset for offset, record in held if record.deadline_ms <= now_ms]
        self.lock_floor_ms = min((r.deadline_ms for _, r in held if r.deadline_ms > now_ms), default=NO_LOCK)
        return self._release(expired)

    def next_deadline(self) -> int | None:
        deadlines = [record.deadline_ms for _, record in self._acquired()]
        return min(deadlines) if deadlines else None

    def _acquired(self) -> list[tuple[int, InFlight]]:
        return [(o, r) for o, r in self.records.items() if r.state is RecordState.ACQUIRED]

    def _release(self, offsets: list[int]) -> bool:
        for offset in offsets:
            record = self.records[offset]
            self.records[offset] = settled(self._released_state(record), record.delivery_count)
        if offsets:
            self.advance()
        return bool(offsets)

    def advance(self) -> None:
        """Move the start offset over the done prefix of the window."""
        while self.start_offset < self.next_offset and self.records[self.start_offset].state in DONE:
            del self.records[self.start_offset]
            self.start_offset += 1

    def skip_below(self, log_start_offset: int) -> None:
        """Offsets below the log start offset are gone from the log: out of the window."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.next_offset)):
            del self.records[offset]
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self.advance()

    # -- durable form ---------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        runs: list[StateBatch] = []
        for offset in range(self.start_offset, self.next_offset):
            record = self.records[offset]
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            last = runs[-1] if runs else None
            if last is not None and (last.delivery_state, last.delivery_count) == (
                state,
                record.delivery_count,
            ):
                runs[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                runs.append(StateBatch(offset, offset, state, record.delivery_count))
        return runs

    def copy(self) -> SharePartition:
        """A copy to `restore`: the records are immutable, so only their dict is copied."""
        records = dict(self.records)
        return SharePartition(
            self.settings, self.start_offset, self.next_offset, records, self.state_epoch, self.lock_floor_ms
        )

    def restore(self, saved: SharePartition) -> None:
        """Back to `saved` (a write of the new state failed)."""
        self.start_offset, self.next_offset = saved.start_offset, saved.next_offset
        self.records, self.state_epoch = saved.records, saved.state_epoch
        self.lock_floor_ms = saved.lock_floor_ms
