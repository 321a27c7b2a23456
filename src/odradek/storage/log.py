"""The partition log: an ordered list of segments, appended to at the end, read by offset.

Owns one directory `<log.dir>/<topic>-<partition>/` (or, for a future log, the copy of a replica
being moved to another log dir, `<log.dir>/<topic>-<partition>.<unique id>-future/`: Kafka's names)
and its segments (see `segment`, `index`), the log end offset (LEO: the offset the next record
gets), the log start offset (the first offset a client may read), the recovery point (everything
below it is fsynced) and the flush policy.

Contracts:
- `append_as_leader(records, leader_epoch)` validates every batch first (all-or-nothing: size
  against max.message.bytes, magic, CRC32C, counts, every record's structure, CreateTime bounds and,
  on compacted topics, keys: `records.validation`), assigns dense offsets from the LEO and the
  leader epoch (plus maxTimestamp for LogAppendTime) by patching the request's own bytes when they
  are writable (the network layer hands over a view of its frame buffer; other callers' bytes are
  copied once), rolls if needed, and writes with one positional write. Compressed batches are
  stored as they came; their records are not walked here but by `check_records`, which the
  produce handler runs before the append (decompressing is slow work, which it may move to a
  worker thread). A failed write (ENOSPC...) raises KafkaStorageError with the log unchanged.
- `check_records(records, decompression_budget)`: every check of the leader append, compressed
  batches' records included, under this log's config; touches no state, so any thread may call it.
- `read(fetch_offset, max_bytes, max_offset_exclusive, min_one_message)` returns at most one
  `FileSlice` of whole batches from one segment: starting at the batch holding `fetch_offset`, ending
  at a batch boundary, within `max_bytes` (unless `min_one_message` and the first batch alone is
  larger), and holding no batch that reaches `max_offset_exclusive` (the high watermark). Fetching
  below the log start offset or past the LEO raises OffsetOutOfRangeError; at the LEO it is empty.
- A `FileSlice` handed out stays valid while it is sent: its fd is leased from the `FileCache` for
  the cache's lease span (file.delete.delay.ms by default), and fds of segments removed by
  retention, truncation or deletion stay open for file.delete.delay.ms (through the `FdReaper`).
  Truncating the active segment does shorten its file in place (as in Kafka).
- Retention never deletes the active segment.
- Idempotent producers (see `producer_state`): a client's batch carrying a producer id is checked
  against the partition's producer state before anything is written; a retry of one of a producer's
  last 5 batches is not appended and `append_as_leader` answers with the original batch's offsets
  (`LogAppendInfo.duplicate` is True, `record_count` 0). The state is rebuilt on open from the newest
  `<offset>.snapshot` plus the batch headers after it; snapshots are written when a segment rolls
  (if any producer is known) and on `close` (if the log is not empty), and deleted with retention
  (below the first segment) and truncation (past the new log end offset).
- Transactions (see `producer_state`, `txn_index`): a transactional batch opens its producer's
  transaction; `append_marker(producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch)`
  writes the coordinator's COMMIT/ABORT control batch as leader (epochs checked), and a follower's
  control batches are replayed alike; an abort is recorded in the `.txnindex` of the segment
  holding its marker. `first_unstable_offset` bounds the last stable offset (the partition takes
  min(it, HW) and reports HW moves through `on_high_watermark_updated`), and
  `collect_aborted_transactions` answers a read_committed fetch's aborted list.
- Leader epochs (see `leader_epoch`): an append whose leader epoch (the leader's, or a follower's
  batch's partitionLeaderEpoch) is newer than the cache's latest assigns it at the batch's base offset
  before the batch is written; truncation trims the cache from the end, retention from the start;
  `maybe_assign_epoch_start_offset` starts a new leader's epoch at the log end offset.

- Flush: nothing on the append path fsyncs. flush.messages / flush.ms make the append call
  `request_flush` (the LogManager submits the flush to the log-io lane); `flush` itself runs in
  worker threads and holds the log's lock only to list the segments and write index tails: the
  leader-epoch checkpoint, the fdatasyncs, the index fsyncs and the directory fsync run outside
  it, so appends continue while a rolled 1 GiB segment is synced. Flushes of one log are
  serialised by a second lock the loop never takes. The recovery point moves only after the sync.

Thread safety: mutations (append, roll, retention, truncation, close, the cleaner's
`replace_segments`, the bookkeeping steps of flush) hold the log's lock; `read` works on a
snapshot of the segment list and needs no lock (a segment deleted under it is retried).

Callers: `LogManager` creates logs; replication (`Partition`) appends and reads; the ListOffsets
handler uses the offset lookups.
"""

from __future__ import annotations

import os
import threading
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeGuard

from odradek.clock import Clock
from odradek.durable_file import fsync_dir
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.batch import NO_TIMESTAMP, BatchHeader, ValidatedRecords, assign_offsets
from odradek.protocol.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker,
    read_end_txn_marker,
)
from odradek.protocol.records.errors import InvalidRecordError
from odradek.protocol.records.record import record_times
from odradek.protocol.records.validation import validate_records
from odradek.storage.config import LONG_MAX, LogConfig
from odradek.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from odradek.storage.file_cache import FileCache, SegmentGoneError
from odradek.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from odradek.storage.loader import load_leader_epoch_cache, load_segments
from odradek.storage.producer_state import PRODUCER_ID_EXPIRATION_MS, BatchMetadata, ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn

_READ_ATTEMPTS = 3
FUTURE_DIR_SUFFIX = "-future"


class LogAppendInfo(NamedTuple):
    """What an append did. `log_append_time` is -1 for CreateTime topics; `offset_of_max_timestamp`
    is the last offset of the batch with the largest timestamp (the first offset for LogAppendTime).
    `duplicate`: nothing was appended, the batch repeats an idempotent producer's earlier one, whose
    offsets (and, for LogAppendTime, append time) these are.
    A NamedTuple, not a frozen dataclass: one is built per append and it costs a third as much."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch sits: segment base offset and byte position in that segment.
    This and `FetchDataInfo` are NamedTuples, not frozen dataclasses: one of each is built per read."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


class FetchDataInfo(NamedTuple):
    fetch_offset_metadata: LogOffsetMetadata
    records: list[FileSlice]
    total_bytes: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int


class Log:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig,
        clock: Clock,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        *,
        clean_shutdown: bool = False,
        files: FileCache | None = None,
        request_flush: Callable[[Log], None] | None = None,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        new: bool = False,
        on_segment_recovered: Callable[[int], None] = lambda _size: None,
    ) -> None:
        self.dir = Path(directory)
        self.topic, self.partition = parse_log_dir_name(self.dir.name)
        self.config = config
        self._clock = clock
        self._owns_files = files is None
        self.files = FileCache(clock) if files is None else files
        self._request_flush = request_flush
        self._flush_requested = False
        self._deleted = False
        self._truncations = 0
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        now = clock.time_ms()
        if new:
            try:
                self.dir.mkdir(parents=True)
            except FileExistsError:
                new = False
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
        segments = (
            []
            if new
            else load_segments(
                self.dir, self.files, config, now, recovery_point, clean_shutdown, on_segment_recovered
            )
        )
        if not segments:
            segments = [LogSegment.create(self.dir, log_start_offset, self.files, config, now, new)]
        self._set_segments(segments)
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = min(max(log_start_offset, segments[0].base_offset), self.log_end_offset)
        self.recovery_point = self.log_end_offset
        self.leader_epoch_cache = (
            LeaderEpochFileCache(self.dir)
            if new
            else load_leader_epoch_cache(
                self.dir, segments, clean_shutdown, self.log_start_offset, self.log_end_offset
            )
        )
        self._unflushed_messages = 0
        self.last_flush_ms = now
        self._dir_dirty = new or not clean_shutdown
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        if not new:
            self.producer_state.load(segments, self.log_end_offset, now)

    # -- state ---------------------------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def _segments(self) -> list[LogSegment]:
        return self._layout[0]

    def _set_segments(self, segments: list[LogSegment]) -> None:
        """Replace the segment list and its base offsets in one assignment, for lock-free readers."""
        self._layout = (segments, [segment.base_offset for segment in segments])

    @property
    def is_future(self) -> bool:
        """Whether this is a future log (a replica being moved to another log dir)."""
        return self.dir.name.endswith(FUTURE_DIR_SUFFIX)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self.active_segment.update_config(config)

    # -- append --------------------------------------------------------------------------------

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int) -> LogAppendInfo:
        """Assign offsets to the batches in `records` and append them (see the module docstring)."""
        config = self.config
        now = self._clock.time_ms()
        log_append_time = now if config.log_append_time else NO_TIMESTAMP
        validated = validate_records(
            records,
            config.max_message_bytes,
            timestamp_bounds=_create_time_bounds(config, now),
            require_key=config.compact_enabled,
            walk_compressed=False,
        )
        buf = records if _writable(records) else bytearray(records)
        idempotent = _has_producer_id(validated.headers)
        with self._lock:
            first_offset = self.log_end_offset
            prepared = (
                self.producer_state.prepare_append(validated.headers, first_offset, log_append_time)
                if idempotent
                else None
            )
            if isinstance(prepared, BatchMetadata):
                return self._duplicate_info(prepared)
            self.leader_epoch_cache.assign_if_newer(leader_epoch, first_offset)
            next_offset = assign_offsets(buf, validated, first_offset, leader_epoch, log_append_time)
            max_timestamp = validated.max_timestamp if log_append_time < 0 else log_append_time
            self._append(buf, validated, first_offset, next_offset, max_timestamp, log_append_time, now)
            if prepared is not None:
                self.producer_state.commit(prepared, next_offset)
            return LogAppendInfo(
                first_offset=first_offset,
                last_offset=next_offset - 1,
                max_timestamp=max_timestamp,
                offset_of_max_timestamp=_offset_of_max_timestamp(validated, first_offset, log_append_time),
                log_append_time=log_append_time,
                log_start_offset=self.log_start_offset,
                record_count=validated.record_count,
                valid_bytes=validated.size_in_bytes,
            )

    def check_records(self, records: memoryview, decompression_budget: int | None = None) -> None:
        """Validate `records` as a leader append would, walking compressed batches too (see
        `records.validation` for `decompression_budget`)."""
        config = self.config
        validate_records(
            records,
            config.max_message_bytes,
            timestamp_bounds=_create_time_bounds(config, self._clock.time_ms()),
            require_key=config.compact_enabled,
            decompression_budget=decompression_budget,
        )

    def _duplicate_info(self, original: BatchMetadata) -> LogAppendInfo:
        log_append_time = original.timestamp if self.config.log_append_time else NO_TIMESTAMP
        return LogAppendInfo(
            first_offset=original.first_offset,
            last_offset=original.last_offset,
            max_timestamp=original.timestamp,
            offset_of_max_timestamp=original.last_offset,
            log_append_time=log_append_time,
            log_start_offset=self.log_start_offset,
            record_count=0,
            valid_bytes=0,
            duplicate=True,
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches that already carry their offsets (a replica copying its leader)."""
        validated = validate_records(records, max(self.config.max_message_bytes, 1 << 30), from_client=False)
        headers = validated.headers
        markers = _end_txn_markers(records, validated)
        with self._lock:
            expected = self.log_end_offset
            for header in headers:
                if header.base_offset < expected:
                    raise InvalidRecordError(f"batch offset {header.base_offset} is below {expected}")
                expected = header.next_offset
            for header in headers:
                self.leader_epoch_cache.assign_if_newer(header.partition_leader_epoch, header.base_offset)
            now = self._clock.time_ms()
            self._append(records, validated, None, expected, validated.max_timestamp, NO_TIMESTAMP, now)
            self._replay(headers, markers)
            return LogAppendInfo(
                first_offset=headers[0].base_offset,
                last_offset=expected - 1,
                max_timestamp=validated.max_timestamp,
                offset_of_max_timestamp=_offset_of_max_timestamp(validated, None, NO_TIMESTAMP),
                log_append_time=NO_TIMESTAMP,
                log_start_offset=self.log_start_offset,
                record_count=validated.record_count,
                valid_bytes=validated.size_in_bytes,
            )

    def _replay(
        self, headers: tuple[BatchHeader, ...], markers: dict[int, EndTransactionMarker] | None
    ) -> None:
        """Apply appended batches that carry their offsets to the producer state; the aborts their
        `markers` (by batch index) complete go to the active segment's transaction index (one
        append never spans a roll)."""
        state = self.producer_state
        if markers is None:
            for header in headers:
                state.replay(header)
            return
        txn_index = self.active_segment.txn_index
        for index, header in enumerate(headers):
            state.replay(header, markers.get(index), txn_index)

    def append_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, leader_epoch: int
    ) -> LogAppendInfo:
        """Append a COMMIT or ABORT marker ending `producer_id`'s transaction (the coordinator's write
        through the leader, Kafka's appendAsLeader with origin Coordinator). Raises
        InvalidProducerEpochError or TransactionCoordinatorFencedError (see `producer_state`)."""
        now = self._clock.time_ms()
        log_append_time = now if self.config.log_append_time else NO_TIMESTAMP
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch
        )
        buf = bytearray(build_end_txn_marker(producer_id, producer_epoch, marker, now))
        validated = validate_records(buf, max(self.config.max_message_bytes, len(buf)), from_client=False)
        with self._lock:
            offset = self.log_end_offset
            prepared = self.producer_state.prepare_marker(producer_id, producer_epoch, marker, offset, now)
            self.leader_epoch_cache.assign_if_newer(leader_epoch, offset)
            next_offset = assign_offsets(buf, validated, offset, leader_epoch, log_append_time)
            self._append(buf, validated, offset, next_offset, now, log_append_time, now)
            self.producer_state.complete_marker(prepared, self.active_segment.txn_index, next_offset)
            return LogAppendInfo(
                first_offset=offset,
                last_offset=offset,
                max_timestamp=now,
                offset_of_max_timestamp=offset,
                log_append_time=log_append_time,
                log_start_offset=self.log_start_offset,
                record_count=1,
                valid_bytes=len(buf),
            )

    def _append(
        self,
        buf: bytes | bytearray | memoryview,
        validated: ValidatedRecords,
        first_offset: int | None,
        next_offset: int,
        max_timestamp: int,
        log_append_time: int,
        now: int,
    ) -> None:
        segment = self.active_segment
        if segment.should_roll(self.config, len(buf), max_timestamp, next_offset - 1, now):
            segment = self._roll(validated.headers[0].base_offset if first_offset is None else first_offset)
        segment.append(buf, validated, first_offset, log_append_time)
        self.log_end_offset = next_offset
        self._unflushed_messages += validated.record_count
        if self._request_flush is not None and not self._flush_requested and self.flush_due(now):
            self._flush_requested = True
            self._request_flush(self)

    def flush_due(self, now_ms: int) -> bool:
        """Whether flush.messages or flush.ms asks for a flush (performed in a worker thread)."""
        return self._unflushed_messages >= self.config.flush_messages or (
            self._unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms
        )

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at `start_offset` (this broker became leader at that LEO)."""
        with self._lock:
            self.leader_epoch_cache.assign(leader_epoch, start_offset)

    # -- segments ------------------------------------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (a no-op on an empty active segment)."""
        with self._lock:
            if self.active_segment.size == 0:
                return self.active_segment
            return self._roll(self.log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        self.active_segment.on_become_inactive()
        if self.producer_state.producer_count:
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot()
        segment = LogSegment.create(self.dir, base_offset, self.files, self.config, self._clock.time_ms())
        self._dir_dirty = True
        self._set_segments([*self._segments, segment])
        return segment

    def dup_inactive_segments(self) -> list[tuple[LogSegment, int]]:
        """The inactive segments, each with a duplicate of its fd for the caller to close: a reader
        that may outlive file.delete.delay.ms (the log cleaner) keeps the files open with it."""
        with self._lock:
            return [(segment, segment.dup_fd()) for segment in self._segments[:-1]]

    def replace_segments(
        self, old: list[LogSegment], prepare: Callable[[Path], None], install: Callable[[Path], LogSegment]
    ) -> bool:
        """Replace `old`, consecutive inactive segments, by one segment (the log cleaner's swap).

        Under the lock: unless `old` is still a run of inactive segments of this log (retention,
        truncation or deletion may have taken some), nothing happens and the answer is False; else
        `prepare(dir)` makes the new files durable as `.swap`, `old` is deleted (fds closed after
        file.delete.delay.ms), `install(dir)` moves the new files into place and returns their
        segment, and the segment list changes in one assignment (readers see old or new).
        """
        with self._lock:
            segments = self._segments
            start = next((i for i, segment in enumerate(segments) if segment is old[0]), -1)
            end = start + len(old)
            if start < 0 or end >= len(segments) or segments[start:end] != old:
                return False
            prepare(self.dir)
            self._delete_segments(old, self._clock.time_ms())
            self._set_segments([*segments[:start], install(self.dir), *segments[end:]])
            self._dir_dirty = True  # the renames of `install` become durable with the next flush
            return True

    # -- read ----------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from `fetch_offset` as one FileSlice (see the module docstring)."""
        for _ in range(_READ_ATTEMPTS - 1):
            try:
                return self._read(fetch_offset, max_bytes, max_offset_exclusive, min_one_message)
            except SegmentGoneError:
                continue  # retention, truncation or cleaning removed a segment of the list read
        return self._read(fetch_offset, max_bytes, max_offset_exclusive, min_one_message)

    def _read(
        self, fetch_offset: int, max_bytes: int, max_offset_exclusive: int | None, min_one_message: bool
    ) -> FetchDataInfo:
        log_end_offset = self.log_end_offset
        segments, bases = self._layout
        if fetch_offset < self.log_start_offset or fetch_offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.dir.name}: offset {fetch_offset} is outside "
                f"[{self.log_start_offset}, {log_end_offset}]"
            )
        max_offset = (
            log_end_offset if max_offset_exclusive is None else min(max_offset_exclusive, log_end_offset)
        )
        if fetch_offset < max_offset:
            for segment in segments[max(bisect_right(bases, fetch_offset) - 1, 0) :]:
                found = segment.read(fetch_offset, max_offset, max_bytes, min_one_message)
                if found is not None:
                    fd, position, length = found
                    metadata = LogOffsetMetadata(fetch_offset, segment.base_offset, position)
                    return FetchDataInfo(
                        metadata, [FileSlice(fd, position, length)] if length else [], length
                    )
        last = segments[-1]
        return FetchDataInfo(LogOffsetMetadata(fetch_offset, last.base_offset, last.size), [], 0)

    # -- transactions --------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int:
        """The first offset of the oldest transaction not yet stable, -1 if none (`producer_state`)."""
        return self.producer_state.first_unstable_offset

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below `high_watermark` stop holding the LSO back."""
        if self.producer_state.first_unstable_offset >= 0:  # else no transaction: nothing to forget
            with self._lock:
                self.producer_state.on_high_watermark_updated(high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the
        transaction indexes of the segment holding `start_offset` and the later ones, until an entry
        whose last stable offset reaches the upper bound (every later abort began after it), as
        Kafka's collectAbortedTransactions."""
        segments, bases = self._layout
        found: list[AbortedTxn] = []
        for segment in segments[max(bisect_right(bases, start_offset) - 1, 0) :]:
            for aborted in segment.txn_index.entries:
                if aborted.last_offset >= start_offset and aborted.first_offset < upper_bound_offset:
                    found.append(aborted)
                if aborted.last_stable_offset >= upper_bound_offset:
                    return found
        return found

    # -- offsets by timestamp ------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record at or after the log start offset with a timestamp >= `timestamp`."""
        start = self.log_start_offset
        return self._first_record(
            [s for s in self.segments if s.next_offset > start and s.max_timestamp >= timestamp],
            timestamp,
            lambda record_timestamp, offset: record_timestamp >= timestamp and offset >= start,
        )

    def earliest_offset(self) -> TimestampAndOffset:
        """ListOffsets -2 (EARLIEST)."""
        return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset)

    def latest_offset(self) -> TimestampAndOffset:
        """ListOffsets -1 (LATEST)."""
        return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset)

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """ListOffsets -3 (MAX_TIMESTAMP): the first record holding the largest timestamp."""
        start = self.log_start_offset
        candidates = [s for s in self.segments if s.next_offset > start and s.max_timestamp >= 0]
        if not candidates:
            return None
        target = max(segment.max_timestamp for segment in candidates)
        return self._first_record(
            [s for s in candidates if s.max_timestamp == target],
            target,
            lambda record_timestamp, offset: record_timestamp == target and offset >= start,
        )

    def _first_record(
        self, segments: list[LogSegment], timestamp: int, wanted: Callable[[int, int], bool]
    ) -> TimestampAndOffset | None:
        """The first record `wanted` in the batches of `segments` whose maxTimestamp >= `timestamp`
        (their records' timestamps are read in bounded pieces: this serves ListOffsets, not the fetch
        path)."""
        for segment in segments:
            for position, header in segment.batches_reaching(timestamp, self.log_start_offset):
                for record_timestamp, offset in record_times(segment.read_batch(position, header), header):
                    if wanted(record_timestamp, offset):
                        return TimestampAndOffset(record_timestamp, offset)
        return None

    # -- flush ---------------------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets below `up_to` (default: the LEO); move the recovery point.

        Called from worker threads (never the event loop). The log's lock is held only to take the
        list of segments and write their index tails (no fsync); the leader-epoch checkpoint, the
        fdatasyncs and the directory fsync run without it, so appends go on meanwhile. One flush of
        a log runs at a time."""
        with self._flush_lock:
            with self._lock:
                self._flush_requested = False
                if self._deleted:
                    return
                target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
                segments = [segment for segment in self._segments if segment.base_offset < target]
                for segment in segments:
                    segment.persist_indexes(fsync=False)
                # A directory holding only empty segments gains nothing from an fsync yet.
                dir_dirty = self._dir_dirty and any(segment.size for segment in segments)
                self._dir_dirty = self._dir_dirty and not dir_dirty
                unflushed = self._unflushed_messages if target == self.log_end_offset else 0
                truncations = self._truncations
            try:
                # The checkpoint's rename becomes durable with the directory fsync below.
                dir_dirty |= self.leader_epoch_cache.flush(sync_dir=False)
                synced = [(segment, segment.sync()) for segment in segments]
                if dir_dirty:
                    self._fsync_dir()
            except BaseException:
                self._dir_dirty = self._dir_dirty or dir_dirty
                raise
            with self._lock:
                for segment, (size, truncations) in synced:
                    segment.mark_flushed(size, truncations)
                if truncations == self._truncations:  # else offsets below `target` may be new data
                    self.recovery_point = max(self.recovery_point, target)
                if unflushed or target == self.log_end_offset:
                    self._unflushed_messages = max(self._unflushed_messages - unflushed, 0)
                    self.last_flush_ms = self._clock.time_ms()

    def _fsync_dir(self) -> None:
        try:
            fsync_dir(self.dir)
        except FileNotFoundError:
            if self.dir.exists():
                raise  # else the log was deleted meanwhile: nothing to make durable

    # -- retention and truncation --------------------------------------------------------------

    def delete_retention_segments(self, now_ms: int) -> int:
        """Delete the oldest non-active segments breaching retention.ms, retention.bytes or the log
        start offset; return how many were deleted."""
        with self._lock:
            config, inactive = self.config, self._segments[:-1]
            excess = self.size_in_bytes - config.retention_bytes if config.retention_bytes >= 0 else -1
            deletable = 0
            for segment in inactive:
                by_start = segment.next_offset <= self.log_start_offset
                by_time = (
                    config.delete_enabled
                    and config.retention_ms >= 0
                    and now_ms - segment.largest_timestamp > config.retention_ms
                )
                by_size = config.delete_enabled and excess - segment.size >= 0
                if not (by_start or by_time or by_size):
                    break
                excess -= segment.size
                deletable += 1
            if deletable:
                doomed = self._segments[:deletable]
                self._set_segments(self._segments[deletable:])
                self._delete_segments(doomed, now_ms)
                self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
                first_base = self._segments[0].base_offset
                self.producer_state.delete_snapshots(lambda offset: offset < first_base)
            return deletable

    def advance_start_offset(self, offset: int) -> int:
        """Move the log start offset up to `offset` (never past the log end, never down), as
        DeleteRecords does; the segments wholly below it go at the next retention pass. Returns the
        log start offset."""
        with self._lock:
            if offset > self.log_start_offset:
                self.log_start_offset = min(offset, self.log_end_offset)
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            return self.log_start_offset

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for producer.id.expiration.ms; return how many went."""
        with self._lock:
            return self.producer_state.remove_expired_producers(now_ms)

    def _delete_segments(self, segments: list[LogSegment], now_ms: int) -> None:
        deadline = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            segment.persist_indexes(fsync=False)
            try:
                segment.delete(deadline)
            except OSError as exc:
                raise KafkaStorageError(f"cannot delete {segment.base_offset} in {self.dir}: {exc}") from exc

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch reaching `offset` or beyond (a follower diverging from its leader).

        A batch straddling `offset` goes entirely, so the LEO may end below `offset`. Returns whether
        any batch was removed. At or past the LEO no batch goes, but epochs starting at the LEO do: a
        broker that became leader and appended nothing before losing leadership holds an epoch no
        batch carries, which its new leader never had, and the follower must drop it to stop
        diverging (Kafka's truncateTo does the same).
        """
        with self._lock:
            if offset >= self.log_end_offset:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            now = self._clock.time_ms()
            if offset <= self._segments[0].base_offset:
                self._truncate_fully_and_start_at(offset, now)
                return True
            keep = bisect_right(self._layout[1], offset - 1)
            dropped = self._segments[keep:]
            if dropped:
                self._set_segments(self._segments[:keep])
                self._delete_segments(dropped, now)
            self.active_segment.truncate_to(offset)
            self.log_end_offset = self.active_segment.next_offset
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self._truncations += 1
            self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            self.producer_state.load(self._segments, self.log_end_offset, now)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start an empty log at `offset` (a follower whose leader's log
        starts past this whole log)."""
        with self._lock:
            self._truncate_fully_and_start_at(offset, self._clock.time_ms())

    def _truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        self._delete_segments(self._segments, now_ms)
        segment = LogSegment.create(self.dir, offset, self.files, self.config, now_ms)
        self._dir_dirty = True
        self._set_segments([segment])
        self.log_end_offset = self.log_start_offset = self.recovery_point = offset
        self._truncations += 1
        self.producer_state.truncate_fully_and_start_at(offset)
        self.leader_epoch_cache.clear()

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Seal the active segment's time index, flush everything and close every file (shutdown:
        no fetch is in flight any more). Called from worker threads."""
        with self._lock:
            self.active_segment.on_become_inactive()
        self.flush()
        with self._lock:
            state = self.producer_state
            if state.snapshot_offset != self.log_end_offset and (
                state.producer_count or self.log_end_offset > self._segments[0].base_offset
            ):
                state.map_end_offset = self.log_end_offset
                state.take_snapshot()
            for segment in self._segments:
                segment.close()
            self._set_segments([])
            if self._owns_files:
                self.files.close_all()

    def rename_dir(self, directory: Path) -> None:
        """Move the partition directory (open fds are unaffected)."""
        with self._lock:
            os.rename(self.dir, directory)
            self.dir = directory
            self.producer_state.directory = directory
            self.leader_epoch_cache.path = directory / LEADER_EPOCH_CHECKPOINT
            for segment in self._segments:
                segment.move_to(directory)

    def delete(self) -> None:
        """Delete every segment and the directory; fds close after file.delete.delay.ms."""
        with self._lock:
            self._deleted = True
            self._delete_segments(self._segments, self._clock.time_ms())
            self._set_segments([])
            for leftover in self.dir.iterdir():
                leftover.unlink()
            self.dir.rmdir()


def _has_producer_id(headers: tuple[BatchHeader, ...]) -> bool:
    """Whether any batch comes from an idempotent producer (clients send one batch per partition, so
    the first header settles it without a generator)."""
    if headers[0].producer_id >= 0:
        return True
    return len(headers) > 1 and any(header.producer_id >= 0 for header in headers[1:])


def _end_txn_markers(
    records: bytes | bytearray | memoryview, validated: ValidatedRecords
) -> dict[int, EndTransactionMarker] | None:
    """The transaction markers among a follower's batches, by batch index (None when there is none);
    read before anything is written, so a control batch that is no marker refuses the whole append."""
    markers = {
        index: read_end_txn_marker(records, position, header)
        for index, (position, header) in enumerate(zip(validated.positions, validated.headers, strict=True))
        if header.is_control and header.producer_id >= 0 and header.records_count
    }
    return markers or None


def _offset_of_max_timestamp(
    validated: ValidatedRecords, first_offset: int | None, log_append_time: int
) -> int:
    if validated.max_timestamp_index < 0 and log_append_time < 0:
        return -1
    if log_append_time >= 0:
        return validated.headers[0].base_offset if first_offset is None else first_offset
    offset = first_offset
    for index, header in enumerate(validated.headers):
        base = header.base_offset if offset is None else offset
        if index == validated.max_timestamp_index:
            return base + header.last_offset_delta
        if offset is not None:
            offset += header.last_offset_delta + 1
    return -1


def parse_dir_name(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); ValueError if the name is not one."""
    topic, _, partition = name.rpartition("-")
    if not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


def dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's name of a future log's directory: `<topic>-<partition>.<unique id>-future`."""
    return f"{dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int]:
    """`<topic>-<partition>.<unique id>-future` -> (topic, partition); ValueError if not one."""
    stem, dot, unique_id = name.removesuffix(FUTURE_DIR_SUFFIX).rpartition(".")
    if not name.endswith(FUTURE_DIR_SUFFIX) or not dot or not unique_id:
        raise ValueError(f"{name!r} is not a future log directory name")
    return parse_dir_name(stem)


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """(topic, partition) of a current or a future log's directory."""
    return parse_future_dir_name(name) if name.endswith(FUTURE_DIR_SUFFIX) else parse_dir_name(name)


def _create_time_bounds(config: LogConfig, now: int) -> tuple[int, int] | None:
    """(lowest, highest) CreateTime a record may carry, or None when unbounded or LogAppendTime."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if config.log_append_time or (before >= LONG_MAX and after >= LONG_MAX):
        return None
    return now - before, now + after


def _writable(records: bytes | bytearray | memoryview) -> TypeGuard[bytearray | memoryview]:
    """Whether `records` may be patched in place: a bytearray, or a writable byte view of one."""
    if isinstance(records, memoryview):
        return not records.readonly and records.c_contiguous and records.itemsize == 1
    return isinstance(records, bytearray)
