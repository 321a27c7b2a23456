"""Producer state of one partition: what idempotent producers last wrote (Kafka's ProducerStateManager).

Owns, per producer id: its producer epoch and the metadata of its last 5 batches (first and last
sequence, first and last offset, timestamp), the map end offset (every batch below it is reflected in
the state) and the snapshot files `<dir>/%020d.snapshot` named by the map end offset they capture.

Rules applied to a client's batch carrying a producer id (Kafka 3.9's, non-transactional part):
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
- a producer id with a negative base sequence is refused (INVALID_RECORD), as Kafka's validator does.
Batches replayed from the log (loading, follower appends) are applied without these checks.
A producer whose last batch timestamp is producer.id.expiration.ms or more in the past is removed by
`remove_expired_producers` (as in Kafka, the batch's maxTimestamp is the clock that counts).

Snapshot format (big-endian), written to `<name>.tmp` and renamed so a reader sees a whole file:

    version int16 (1) | crc uint32 (CRC32C of everything after it) | producer count int32
    per producer: producer_id int64 | producer_epoch int16 | batch count int8
        per batch (oldest first): first_seq int32 | last_seq int32 | first_offset int64
                                  last_offset int64 | timestamp int64

A snapshot that does not parse or fails its CRC is deleted and the next older one is used. Unlike
Kafka's (which keeps only each producer's last batch), a snapshot keeps all 5 retained batches, so
every retained duplicate is still detected after a restart.

Invariants: the state reflects exactly the batches below `map_end_offset`; a snapshot named N holds
the state of the batches below offset N; `prepare_append` changes nothing (a failed write leaves the
state as it was) and `commit` applies what it prepared.

Callers: `storage.log.Log` only, under its lock.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.errors import InvalidRecordError
from odradek.storage.config import INT_MAX
from odradek.storage.errors import KafkaStorageError, StorageError
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")
_PRODUCER = struct.Struct(">qhb")
_BATCH = struct.Struct(">iiqqq")
_CRC_START = 6  # version int16 + crc uint32


class InvalidProducerEpochError(StorageError):
    """A batch from an older producer epoch than the partition knows: INVALID_PRODUCER_EPOCH."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(StorageError):
    """A batch whose first sequence does not follow the producer's last: OUT_OF_ORDER_SEQUENCE_NUMBER."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


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
    """One producer's epoch and its last batches, oldest first (never empty)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def with_batch(self, producer_epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """This producer after `batch`: a new epoch drops the batches of the old one."""
        kept = self.batches[-(NUM_BATCHES_TO_RETAIN - 1) :] if producer_epoch == self.producer_epoch else ()
        return ProducerStateEntry(self.producer_id, producer_epoch, (*kept, batch))


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

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    @property
    def producer_count(self) -> int:
        return len(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

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
                prepared[header.producer_id] = _updated(current, header, batch)
            offset = next_offset
        return prepared

    def commit(self, prepared: PreparedAppend, map_end_offset: int) -> None:
        """Apply what `prepare_append` returned, once the batches were written below `map_end_offset`."""
        self._producers.update(prepared)
        self.map_end_offset = map_end_offset

    # -- replay --------------------------------------------------------------------------------

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch already in the log (loading, follower appends): no checks."""
        if header.producer_id >= 0:
            batch = BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
            current = self._producers.get(header.producer_id)
            self._producers[header.producer_id] = _updated(current, header, batch)
        self.map_end_offset = header.next_offset

    def load(self, segments: list[LogSegment], log_end_offset: int, now_ms: int) -> None:
        """Rebuild the state of `segments` ending at `log_end_offset`: the newest valid snapshot at or
        below it (newer ones are deleted), then every batch from there on, read by header only."""
        names = os.listdir(self.directory)
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                (self.directory / name).unlink()
        offsets = _snapshot_offsets(names)
        self._delete_snapshots([offset for offset in offsets if offset > log_end_offset])
        self._producers, self.map_end_offset = {}, segments[0].base_offset if segments else log_end_offset
        self.snapshot_offset = -1
        for offset in reversed([offset for offset in offsets if offset <= log_end_offset]):
            if self._read_snapshot(offset):
                self.snapshot_offset = offset
                break
        start = self.map_end_offset
        for segment in segments:
            if segment.next_offset <= start:
                continue
            for header in segment.batches_from(start):
                self.replay(header)
        self.map_end_offset = log_end_offset
        self.remove_expired_producers(now_ms)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and snapshot: the log now starts empty at `offset`."""
        self.delete_snapshots(lambda _: True)
        self._producers, self.map_end_offset = {}, offset

    # -- expiration ----------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Drop the producers idle for producer.id.expiration.ms; return how many went."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
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
            body += _PRODUCER.pack(entry.producer_id, entry.producer_epoch, len(entry.batches))
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


def _updated(
    current: ProducerStateEntry | None, header: BatchHeader, batch: BatchMetadata
) -> ProducerStateEntry:
    if current is None:
        return ProducerStateEntry(header.producer_id, header.producer_epoch, (batch,))
    return current.with_batch(header.producer_epoch, batch)


def _parse_snapshot(data: bytes) -> list[ProducerStateEntry]:
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise ValueError("CRC mismatch")
    producers, position = [], _SNAPSHOT_HEADER.size
    for _ in range(count):
        producer_id, producer_epoch, batch_count = _PRODUCER.unpack_from(data, position)
        position += _PRODUCER.size
        if not 0 < batch_count <= NUM_BATCHES_TO_RETAIN:
            raise ValueError(f"producer {producer_id} has {batch_count} batches")
        batches = []
        for _ in range(batch_count):
            batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
            position += _BATCH.size
        producers.append(ProducerStateEntry(producer_id, producer_epoch, tuple(batches)))
    if position != len(data):
        raise ValueError(f"{len(data) - position} trailing bytes")
    return producers
