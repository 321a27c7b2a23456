"""Producer state of one partition: what idempotent and transactional producers last wrote, and the
transactions still open (Kafka's ProducerStateManager).

Owns, per producer id: its producer epoch, the metadata of its last 5 batches (first and last
sequence, first and last offset, timestamp), the timestamp of its last batch or marker, the epoch of
the coordinator that wrote its last transaction marker and the first offset of its ongoing
transaction (`current_txn_first_offset`, -1 when none). Per partition: the ongoing transactions
ordered by first offset, the completed transactions whose marker is not yet below the high watermark
(Kafka's unreplicated transactions), the first unstable offset they make, the map end offset (every
batch below it is reflected in the state) and the snapshot files `<dir>/%020d.snapshot` named by the
map end offset they capture.

Rules applied to a client's batch carrying a producer id (Kafka 3.9's):
- a batch whose producer epoch and first/last sequence equal one of the last 5 batches of that
  producer is a duplicate (a retry): nothing is appended and the append answers with the original
  batch's offsets;
- a producer epoch older than the known one: INVALID_PRODUCER_EPOCH (47; Kafka answers produce with
  it since 2.7, not PRODUCER_FENCED);
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45); it replaces the
  retained batches;
- the same epoch must continue at last sequence + 1, wrapping from 2**31 - 1 to 0, else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer id (never seen, or expired) is accepted at any sequence: since KIP-360 Kafka
  no longer answers UNKNOWN_PRODUCER_ID for it, the producer's state may simply have been removed;
- a producer id with a negative base sequence is refused (INVALID_RECORD), as Kafka's validator does;
- a transactional batch (attributes bit 4) of a producer with no ongoing transaction begins one at
  the batch's first offset; a non-transactional batch of a producer whose transaction is ongoing is
  refused with INVALID_TXN_STATE (48).
A transaction marker (a control batch, see `records.control`) written by the coordinator through
the partition leader (`prepare_marker`) is refused with INVALID_PRODUCER_EPOCH when its producer
epoch is older than the producer's, TRANSACTION_COORDINATOR_FENCED (52) when its coordinator epoch
is older than the last marker's; otherwise it ends the producer's transaction (a marker of a producer
with no ongoing transaction ends nothing), takes its producer epoch (a newer one drops the retained
batches) and coordinator epoch. The completed transaction leaves the ongoing set; an ABORT adds an
`AbortedTxn` (producer id, first offset, marker offset, the last stable offset once it completed:
the first offset of the oldest other ongoing transaction, else the marker offset + 1) to the
transaction index of the segment holding the marker.
Batches and markers replayed from the log (loading, follower appends) are applied without checks.
`first_unstable_offset` is the first offset of the oldest ongoing transaction or completed one
whose marker is not yet below the high watermark (`on_high_watermark_updated` forgets those), -1
when there is none; the partition's last stable offset is min(it, high watermark).
A producer whose last batch or marker timestamp is producer.id.expiration.ms or more in the past is
removed by `remove_expired_producers` (as in Kafka, the batch's maxTimestamp is the clock that
counts), unless its transaction is ongoing.

Snapshot format (big-endian), written to `<name>.tmp` and renamed so a reader sees a whole file:

    version int16 (2) | crc uint32 (CRC32C of everything after it) | producer count int32
    per producer: producer_id int64 | producer_epoch int16 | coordinator_epoch int32
                  current_txn_first_offset int64 | last_timestamp int64 | batch count int8 (0-5)
        per batch (oldest first): first_seq int32 | last_seq int32 | first_offset int64
                                  last_offset int64 | timestamp int64

Version 1 snapshots (no transactions: no coordinator epoch, transaction or last timestamp fields, at
least one batch) are still read. The ongoing transactions are rebuilt from the producers' first
offsets; the unreplicated ones are not kept (a snapshot's markers are below the recovery point).
A snapshot that does not parse or fails its CRC is deleted and the next older one is used. Unlike
Kafka's (which keeps only each producer's last batch), a snapshot keeps all 5 retained batches, so
every retained duplicate is still detected after a restart.

Loading (`load`) rebuilds the transaction index of every segment the loader rescanned
(`txn_index_stale`): it replays from the newest snapshot at or below the first such segment.

Invariants: the state reflects exactly the batches below `map_end_offset`; a snapshot named N holds
the state of the batches below offset N; `prepare_append` and `prepare_marker` change nothing (a
failed write leaves the state as it was) and `commit` / `complete_marker` apply what they prepared.

Callers: `storage.log.Log`, which makes every change under its lock; `first_unstable_offset` is
also read without it (by the partition on every fetch, and by the log cleaner).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.control import EndTransactionMarker, read_end_txn_marker
from odradek.protocol.records.errors import InvalidRecordError
from odradek.storage.config import INT_MAX
from odradek.storage.errors import KafkaStorageError, StorageError
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 2

_SNAPSHOT_HEADER = struct.Struct(">hIi")
_PRODUCER_V1 = struct.Struct(">qhb")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_CRC_START = 6  # version int16 + crc uint32


class InvalidProducerEpochError(StorageError):
    """A batch from an older producer epoch than the partition knows: INVALID_PRODUCER_EPOCH."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(StorageError):
    """A batch whose first sequence does not follow the producer's last: OUT_OF_ORDER_SEQUENCE_NUMBER."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidTxnStateError(StorageError):
    """A non-transactional batch of a producer whose transaction is ongoing: INVALID_TXN_STATE."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A marker from an older coordinator epoch than the last one: TRANSACTION_COORDINATOR_FENCED."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one batch of a producer landed; `timestamp` is its maxTimestamp as stored."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """One producer's epoch, its last batches (oldest first; none when only a marker of this epoch
    is known), the timestamp of its last batch or marker, the coordinator epoch of its last marker
    and the first offset of its ongoing transaction (-1: none)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def with_batch(
        self, producer_epoch: int, batch: BatchMetadata, transactional: bool
    ) -> ProducerStateEntry:
        """This producer after `batch`: a new epoch drops the batches of the old one; a transactional
        batch begins a transaction unless one is ongoing."""
        kept = self.batches[-(NUM_BATCHES_TO_RETAIN - 1) :] if producer_epoch == self.producer_epoch else ()
        txn_first_offset = self.current_txn_first_offset
        if transactional and txn_first_offset < 0:
            txn_first_offset = batch.first_offset
        return ProducerStateEntry(
            self.producer_id,
            producer_epoch,
            (*kept, batch),
            batch.timestamp,
            self.coordinator_epoch,
            txn_first_offset,
        )


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset, whether aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class PreparedMarker(NamedTuple):
    """What a marker will leave behind (see `ProducerStateManager.complete_marker`)."""

    entry: ProducerStateEntry
    completed: CompletedTxn | None


PreparedAppend = dict[int, ProducerStateEntry]
"""The entries an append will leave behind, by producer id (see `ProducerStateManager.commit`)."""


def last_sequence(header: BatchHeader) -> int:
    """The sequence of the batch's last record; sequences wrap from 2**31 - 1 to 0."""
    return (header.base_sequence + header.last_offset_delta) % (INT_MAX + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """The producer state of one partition directory (see the module docstring)."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.map_end_offset = 0
        # The map end offset of the newest snapshot on disk known to hold the current state.
        self.snapshot_offset = -1
        self._producers: dict[int, ProducerStateEntry] = {}
        # first offset -> producer id; transactions begin in offset order, so insertion order is it.
        self._ongoing: dict[int, int] = {}
        self._unreplicated: deque[CompletedTxn] = deque()  # in marker offset order
        self.first_unstable_offset = -1

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    @property
    def producer_count(self) -> int:
        return len(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """First offset -> producer id of every ongoing transaction, oldest first."""
        return dict(self._ongoing)

    # -- client appends ------------------------------------------------------------------------

    def prepare_append(
        self, headers: Iterable[BatchHeader], first_offset: int, log_append_time: int
    ) -> PreparedAppend | BatchMetadata:
        """Check a client's batches, to be appended from `first_offset`.

        Returns the duplicate's metadata when a batch repeats one already appended (nothing may be
        appended then), else the entries to `commit` once the batches are written. Raises
        InvalidProducerEpochError, OutOfOrderSequenceError or InvalidRecordError; changes nothing.
        """
        prepared: PreparedAppend = {}
        offset = first_offset
        for header in headers:
            next_offset = offset + header.last_offset_delta + 1
            if header.producer_id >= 0:
                last_seq = last_sequence(header)
                known = self._producers.get(header.producer_id)
                duplicate = (
                    None
                    if known is None
                    else known.find_duplicate(header.producer_epoch, header.base_sequence, last_seq)
                )
                if duplicate is not None:
                    return duplicate
                current = prepared.get(header.producer_id, known)
                _check(header, current, offset)
                timestamp = header.max_timestamp if log_append_time < 0 else log_append_time
                batch = BatchMetadata(header.base_sequence, last_seq, offset, next_offset - 1, timestamp)
                prepared[header.producer_id] = _updated(current, header.producer_id, header, batch)
            offset = next_offset
        return prepared

    def commit(self, prepared: PreparedAppend, map_end_offset: int) -> None:
        """Apply what `prepare_append` returned, once the batches were written below `map_end_offset`."""
        began = [
            (entry.current_txn_first_offset, producer_id)
            for producer_id, entry in prepared.items()
            if entry.current_txn_first_offset >= 0 and entry.current_txn_first_offset not in self._ongoing
        ]
        self._producers.update(prepared)
        if began:
            self._ongoing.update(sorted(began))
            self._update_first_unstable_offset()
        self.map_end_offset = map_end_offset

    # -- transaction markers -------------------------------------------------------------------

    def prepare_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTransactionMarker, offset: int, timestamp: int
    ) -> PreparedMarker:
        """Check a coordinator's marker, to be appended at `offset` (see the module docstring for the
        errors raised); changes nothing."""
        current = self._producers.get(producer_id)
        if current is not None and producer_epoch < current.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} of producer {producer_id} at offset {offset} is older "
                f"than its current epoch {current.producer_epoch}"
            )
        if current is not None and marker.coordinator_epoch < current.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"coordinator epoch {marker.coordinator_epoch} of the marker of producer {producer_id} "
                f"at offset {offset} is older than {current.coordinator_epoch}"
            )
        return _end_txn(current, producer_id, producer_epoch, marker, offset, timestamp)

    def complete_marker(
        self, prepared: PreparedMarker, txn_index: TransactionIndex, map_end_offset: int
    ) -> None:
        """Apply what `prepare_marker` returned once the marker was written to the segment of
        `txn_index`, below `map_end_offset`."""
        self._producers[prepared.entry.producer_id] = prepared.entry
        if prepared.completed is not None:
            self._complete_txn(prepared.completed, txn_index)
        self.map_end_offset = map_end_offset

    def _complete_txn(self, completed: CompletedTxn, txn_index: TransactionIndex | None) -> None:
        """End `completed`: an abort goes to `txn_index` (None: the index holds it already)."""
        if completed.is_aborted and txn_index is not None:
            txn_index.append(AbortedTxn(*completed[:3], self._last_stable_offset(completed)))
        self._ongoing.pop(completed.first_offset, None)
        self._unreplicated.append(completed)
        self._update_first_unstable_offset()

    def _last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset once `completed` ends: the first offset of the oldest ongoing
        transaction of another producer, else the offset after its marker."""
        for first_offset, producer_id in self._ongoing.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is now below `high_watermark`."""
        unreplicated = self._unreplicated
        if unreplicated and unreplicated[0].last_offset < high_watermark:
            while unreplicated and unreplicated[0].last_offset < high_watermark:
                unreplicated.popleft()
            self._update_first_unstable_offset()

    def _update_first_unstable_offset(self) -> None:
        candidates = [txn.first_offset for txn in self._unreplicated]
        if self._ongoing:
            candidates.append(next(iter(self._ongoing)))
        self.first_unstable_offset = min(candidates, default=-1)

    # -- replay --------------------------------------------------------------------------------

    def replay(
        self,
        header: BatchHeader,
        marker: EndTransactionMarker | None = None,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        """Apply a batch already in the log (loading, follower appends): no checks. `marker` is the
        control batch's marker; an abort it completes goes to `txn_index` unless that is None."""
        if header.producer_id >= 0:
            if marker is not None:
                self._replay_marker(header, marker, txn_index)
            elif not header.is_control:
                self._replay_batch(header)
            # else: a control batch the cleaner emptied; its transaction left the log (Kafka's rule)
        self.map_end_offset = header.next_offset

    def _replay_batch(self, header: BatchHeader) -> None:
        producer_id = header.producer_id
        batch = BatchMetadata(
            header.base_sequence,
            last_sequence(header),
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
        )
        entry = _updated(self._producers.get(producer_id), producer_id, header, batch)
        self._producers[producer_id] = entry
        first_offset = entry.current_txn_first_offset
        if first_offset >= 0 and first_offset not in self._ongoing:
            self._ongoing[first_offset] = producer_id
            self._update_first_unstable_offset()

    def _replay_marker(
        self, header: BatchHeader, marker: EndTransactionMarker, txn_index: TransactionIndex | None
    ) -> None:
        producer_id = header.producer_id
        current = self._producers.get(producer_id)
        entry, completed = _end_txn(
            current, producer_id, header.producer_epoch, marker, header.base_offset, header.max_timestamp
        )
        self._producers[producer_id] = entry
        if completed is not None:
            self._complete_txn(completed, txn_index)

    def load(self, segments: list[LogSegment], log_end_offset: int, now_ms: int) -> None:
        """Rebuild the state of `segments` ending at `log_end_offset`: the newest valid snapshot at or
        below it (newer ones are deleted) and at or below the first segment whose transaction index
        is stale, then every batch from there on, read by header only (markers whole), rebuilding
        the stale transaction indexes."""
        names = os.listdir(self.directory)
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                (self.directory / name).unlink()
        offsets = _snapshot_offsets(names)
        self._delete_snapshots([offset for offset in offsets if offset > log_end_offset])
        rebuild_from = next((s.base_offset for s in segments if s.txn_index_stale), log_end_offset)
        self._producers, self.map_end_offset = {}, segments[0].base_offset if segments else log_end_offset
        self.snapshot_offset = -1
        for offset in reversed([offset for offset in offsets if offset <= rebuild_from]):
            if self._read_snapshot(offset):
                self.snapshot_offset = offset
                break
        self._ongoing = dict(
            sorted(
                (entry.current_txn_first_offset, entry.producer_id)
                for entry in self._producers.values()
                if entry.current_txn_first_offset >= 0
            )
        )
        self._unreplicated.clear()
        self._update_first_unstable_offset()
        start = self.map_end_offset
        for segment in segments:
            if segment.next_offset > start:
                self._replay_segment(segment, start)
            segment.txn_index_stale = False
        self.map_end_offset = log_end_offset
        self.remove_expired_producers(now_ms)

    def _replay_segment(self, segment: LogSegment, start: int) -> None:
        txn_index = segment.txn_index if segment.txn_index_stale else None
        for position, header in segment.batches_from(start):
            if header.is_control and header.producer_id >= 0 and header.records_count:
                marker = read_end_txn_marker(segment.read_batch(position, header), 0, header)
                self.replay(header, marker, txn_index)
            else:
                self.replay(header)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and snapshot: the log now starts empty at `offset`."""
        self.delete_snapshots(lambda _: True)
        self._producers, self.map_end_offset = {}, offset
        self._ongoing = {}
        self._unreplicated.clear()
        self._update_first_unstable_offset()

    # -- expiration ----------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Drop the producers idle for producer.id.expiration.ms with no ongoing transaction; return
        how many went."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
            and entry.current_txn_first_offset < 0
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return _snapshot_offsets(os.listdir(self.directory))

    def take_snapshot(self) -> Path:
        """Write the state as `<map end offset>.snapshot` (temp file, then rename; no fsync: a torn
        snapshot fails its CRC and an older one, or a longer replay, takes its place)."""
        body = bytearray(_SNAPSHOT_HEADER.size)
        for entry in self._producers.values():
            body += _PRODUCER.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
                entry.last_timestamp,
                len(entry.batches),
            )
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset, batch.timestamp
                )
        _SNAPSHOT_HEADER.pack_into(body, 0, SNAPSHOT_VERSION, 0, len(self._producers))
        struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_START:]))
        path = self.directory / snapshot_file_name(self.map_end_offset)
        temporary = path.with_name(path.name + ".tmp")
        try:
            temporary.write_bytes(body)
            os.replace(temporary, path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write the producer snapshot {path}: {exc}") from exc
        self.snapshot_offset = self.map_end_offset
        return path

    def delete_snapshots(self, doomed: Callable[[int], bool]) -> None:
        """Delete the snapshots whose offset `doomed` accepts."""
        self._delete_snapshots([offset for offset in self.snapshot_offsets() if doomed(offset)])

    def _delete_snapshots(self, offsets: list[int]) -> None:
        for offset in offsets:
            (self.directory / snapshot_file_name(offset)).unlink(missing_ok=True)
            if offset == self.snapshot_offset:
                self.snapshot_offset = -1

    def _read_snapshot(self, offset: int) -> bool:
        """Load the snapshot named `offset`; a bad one is deleted and False returned."""
        path = self.directory / snapshot_file_name(offset)
        try:
            producers = _parse_snapshot(path.read_bytes())
        except (ValueError, struct.error) as exc:
            log.warning("deleting the unreadable producer snapshot %s: %s", path, exc)
            path.unlink(missing_ok=True)
            return False
        self._producers = {entry.producer_id: entry for entry in producers}
        self.map_end_offset = offset
        return True


def _snapshot_offsets(names: list[str]) -> list[int]:
    """The offsets of the snapshot files among the directory entry `names`, ascending."""
    offsets = []
    for name in names:
        stem, suffix = os.path.splitext(name)
        if suffix == SNAPSHOT_SUFFIX and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def _check(header: BatchHeader, current: ProducerStateEntry | None, offset: int) -> None:
    """Kafka's epoch and sequence rules for a client's batch (see the module docstring)."""
    if header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in a batch of producer {header.producer_id}"
        )
    if current is None:
        return
    if header.producer_epoch < current.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch {header.producer_epoch} of producer {header.producer_id} at offset {offset} is older "
            f"than its current epoch {current.producer_epoch}"
        )
    if header.producer_epoch > current.producer_epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"new epoch {header.producer_epoch} of producer {header.producer_id} at offset {offset} "
                f"starts at sequence {header.base_sequence}, not 0"
            )
    elif not in_sequence(current.last_seq, header.base_sequence):
        raise OutOfOrderSequenceError(
            f"out of order sequence number for producer {header.producer_id} at offset {offset}: "
            f"{header.base_sequence} (incoming), {current.last_seq} (current end sequence)"
        )
    if current.current_txn_first_offset >= 0 and not header.is_transactional:
        raise InvalidTxnStateError(
            f"expected a transactional write from producer {header.producer_id} at offset {offset}: its "
            f"transaction from offset {current.current_txn_first_offset} is ongoing"
        )


def _updated(
    current: ProducerStateEntry | None, producer_id: int, header: BatchHeader, batch: BatchMetadata
) -> ProducerStateEntry:
    if current is None:
        current = ProducerStateEntry(producer_id, header.producer_epoch, (), batch.timestamp)
    return current.with_batch(header.producer_epoch, batch, header.is_transactional)


def _end_txn(
    current: ProducerStateEntry | None,
    producer_id: int,
    producer_epoch: int,
    marker: EndTransactionMarker,
    offset: int,
    timestamp: int,
) -> PreparedMarker:
    """The producer after a marker at `offset`, and the transaction it completes (None when no
    transaction was ongoing: an empty transaction changes neither the LSO nor the index)."""
    if current is None:
        return PreparedMarker(
            ProducerStateEntry(producer_id, producer_epoch, (), timestamp, marker.coordinator_epoch), None
        )
    completed = None
    if current.current_txn_first_offset >= 0:
        completed = CompletedTxn(producer_id, current.current_txn_first_offset, offset, not marker.is_commit)
    batches = current.batches if producer_epoch == current.producer_epoch else ()
    entry = ProducerStateEntry(producer_id, producer_epoch, batches, timestamp, marker.coordinator_epoch)
    return PreparedMarker(entry, completed)


def _parse_snapshot(data: bytes) -> list[ProducerStateEntry]:
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version not in (1, SNAPSHOT_VERSION):
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise ValueError("CRC mismatch")
    producers, position = [], _SNAPSHOT_HEADER.size
    for _ in range(count):
        entry, position = _parse_producer(data, position, version)
        producers.append(entry)
    if position != len(data):
        raise ValueError(f"{len(data) - position} trailing bytes")
    return producers


def _parse_producer(data: bytes, position: int, version: int) -> tuple[ProducerStateEntry, int]:
    """The snapshot entry of one producer at `position`, and the position after it."""
    if version == 1:
        producer_id, producer_epoch, batch_count = _PRODUCER_V1.unpack_from(data, position)
        coordinator_epoch, txn_first_offset, last_timestamp = -1, -1, None
        position += _PRODUCER_V1.size
    else:
        fields = _PRODUCER.unpack_from(data, position)
        producer_id, producer_epoch, coordinator_epoch, txn_first_offset, last_timestamp, batch_count = fields
        position += _PRODUCER.size
    if not (1 if version == 1 else 0) <= batch_count <= NUM_BATCHES_TO_RETAIN:
        raise ValueError(f"producer {producer_id} has {batch_count} batches")
    batches = []
    for _ in range(batch_count):
        batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
        position += _BATCH.size
    timestamp = batches[-1].timestamp if last_timestamp is None else last_timestamp
    entry = ProducerStateEntry(
        producer_id, producer_epoch, tuple(batches), timestamp, coordinator_epoch, txn_first_offset
    )
    return entry, position
