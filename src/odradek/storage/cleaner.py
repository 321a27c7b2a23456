"""The log cleaner: compaction of the logs whose cleanup.policy contains `compact` (Kafka's LogCleaner).

Owns `cleaner-offset-checkpoint` at the root of each log dir (Kafka's format, see `checkpoint`): per
partition the first dirty offset, below which the log is clean (no key appears twice). One pass of
`LogCleaner.clean_logs(now)` repeats, until no log qualifies (or `shutdown`):
1. Choice: of the compacted logs, the one with the largest dirty ratio (dirty bytes / inactive bytes)
   above min.cleanable.dirty.ratio; a log whose first dirty segment is older than
   max.compaction.lag.ms, or whose retained tombstones' delete horizon has passed, qualifies at any
   ratio. The dirty section runs from the checkpoint (reset to the log start offset when outside the
   log) to the first uncleanable offset: the active segment's base offset, the base offset of the
   first dirty segment holding a timestamp newer than min.compaction.lag.ms, or that of the segment
   holding the log's first unstable offset (Kafka never cleans past it: an open transaction may
   still abort). The active segment is never touched.
2. Offset map: key -> offset of its latest record over the dirty section. It holds at most
   log.cleaner.dedupe.buffer.size / log.cleaner.threads / 24 * log.cleaner.io.buffer.load.factor
   entries (Kafka's 24-byte entries: a 16-byte key hash and an 8-byte offset); when a batch would not
   fit, the map ends before it and that offset becomes the next first dirty offset.
3. Copy: the inactive segments below the map's end, in groups of consecutive segments whose sizes add
   up to at most segment.bytes (merged as Kafka does), are copied batch by batch into
   `<base>.log.cleaned` (plus `.index.cleaned` / `.timeindex.cleaned`, rebuilt from the copy), keeping
   a record when it has a key, no later offset for that key is in the map, and it is not a tombstone
   whose batch's delete horizon has passed. The batches of aborted transactions (found through the
   transaction indexes, `Log.collect_aborted_transactions`) are dropped whole and never enter the
   offset map, as in Kafka. Offsets never change: a rewritten batch keeps its base
   offset, lastOffsetDelta, partitionLeaderEpoch, producer id/epoch/base sequence and attributes
   (the compression codec included: the kept records are compressed again with it); records keep
   their offsets, so gaps appear. A batch that keeps every record is copied byte for byte.
   A batch that keeps nothing is dropped, except one of its producer's last batches (the ones the
   producer state retains), which stays as an empty batch so the producer's sequence survives a
   reload, as in Kafka.
   Transaction markers (Kafka's CleanedTransactionMetadata, walked over the whole log in offset
   order): a marker with a batch of its transaction before it in this pass stays as it is; one
   without (its transaction's data went on an earlier pass) is rewritten with a delete horizon as in
   step 4, and a pass after that horizon removes it, or empties it when it is its producer's last
   record (the producer state holds no batch of the producer and the marker has its epoch). The
   copy's `.txnindex` holds the aborted transactions whose ABORT marker stayed with a batch of
   theirs before it: an aborted transaction leaves the index in the pass that finds none of its data.
   An emptied marker changes no producer state when replayed (loading, followers), as in Kafka.
4. Tombstones (KIP-534): a batch holding a tombstone is rewritten the first time it is cleaned with
   the delete horizon flag (attribute bit 6) and baseTimestamp = now + delete.retention.ms (record
   timestamps stay exact: their deltas are relative to it); a later pass after that horizon drops
   the tombstones (and the markers, step 3). The earliest retained horizon per log brings the log
   back to step 1.
5. Swap, crash-safe and atomic for readers: the copy and its indexes are fsynced, then under the
   log's lock (`Log.replace_segments`) renamed to `.swap` (and the directory fsynced, so the swap is
   durable before the old segments go), the old segments deleted (their fds stay open for
   file.delete.delay.ms, so FileSlices handed out stay valid), the `.swap` files renamed into place
   and the segment list replaced in one assignment; the directory fsync of those last renames is
   left to the log's next flush (a crash before it finishes the swap at load). A crash before the
   `.swap` rename leaves `.cleaned` leftovers that the loader deletes; after it, the loader finishes
   the swap. The checkpoint moves to the map's end once every group is swapped.

The cleaner reads segments through duplicated fds (`Log.dup_inactive_segments`), so retention,
truncation or deletion may run meanwhile; a group whose segments are no longer in the log is
dropped and the checkpoint left alone. Appends and fetches never wait for cleaning, only for the
renames of a swap.

Callers: `LogManager` (the broker runs `clean_logs` every log.cleaner.backoff.ms in the cleaner lane).
One pass at a time: log.cleaner.threads > 1 runs one thread all the same (the map budget is still
divided by it, as Kafka divides the dedupe buffer between threads); 0 disables cleaning.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.durable_file import fsync_dir
from odradek.protocol.records.batch import (
    COMPRESSION_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
)
from odradek.protocol.records.builder import pack_batch
from odradek.protocol.records.compression import CompressionType, compress
from odradek.protocol.records.control import EndTransactionMarker, read_end_txn_marker
from odradek.protocol.records.record import RecordColumns, decode_batch_into, encode_record
from odradek.storage.checkpoint import TopicPartition, read_checkpoint, write_checkpoint
from odradek.storage.config import INT_MAX, LONG_MAX, LogConfig
from odradek.storage.loader import CLEANED_SUFFIX, SWAP_SUFFIX
from odradek.storage.log import Log
from odradek.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    RECOVERY_CHUNK,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_name,
    iter_file_batches,
    pwrite_all,
)
from odradek.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_HORIZON_MASK = 0x40
OFFSET_MAP_ENTRY_BYTES = 24
WRITE_BUFFER_BYTES = 1024 * 1024
_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (topic-level ones live in `LogConfig`)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000

    @property
    def enabled(self) -> bool:
        return self.enable and self.threads > 0

    @property
    def max_map_entries(self) -> int:
        per_thread = self.dedupe_buffer_size // max(self.threads, 1)
        return max(int(per_thread // OFFSET_MAP_ENTRY_BYTES * self.io_buffer_load_factor), 1)


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's dirty section as of one choice."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """What one log's cleaning did."""

    end_offset: int = 0
    map_entries: int = 0
    segments_read: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    swapped: bool = True


class OffsetMap:
    """Key -> offset of its latest record, bounded to `capacity` keys. Keys are held as given (a
    dict), not as hashes: no collisions, and the bound counts entries like Kafka's map does."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def has_room_for(self, count: int) -> bool:
        return len(self.entries) + count <= self.capacity


class CleanerAbortedError(Exception):
    """The cleaner was shut down in the middle of a log; nothing was swapped in."""


class UncleanableLogError(Exception):
    """A log the cleaner cannot compact (a batch holds more keys than the offset map)."""


class LogCleaner:
    """Compacts the logs `logs()` returns, one at a time (see the module docstring)."""

    def __init__(self, log_dirs: list[Path], logs: Callable[[], list[Log]], config: CleanerConfig) -> None:
        self.config = config
        self._log_dirs = log_dirs
        self._logs = logs
        self._run_lock = threading.Lock()
        self._stopped = threading.Event()
        self._checkpoints: dict[TopicPartition, int] = {}
        self._checkpoint_dirs: dict[TopicPartition, Path] = {}
        for directory in log_dirs:
            for key, offset in read_checkpoint(directory / CLEANER_OFFSET_CHECKPOINT).items():
                self._checkpoints[key] = offset
                self._checkpoint_dirs[key] = directory
        self._delete_horizons: dict[TopicPartition, int] = {}

    # -- the loop ------------------------------------------------------------------------------

    def clean_logs(self, now_ms: int) -> int:
        """Clean the filthiest log until none qualifies (each at most once); return how many."""
        if not self.config.enabled:
            return 0
        cleaned = 0
        with self._run_lock:
            done: set[TopicPartition] = set()
            while not self._stopped.is_set():
                chosen = self.grab_filthiest_log(now_ms, done)
                if chosen is None:
                    break
                done.add(_key(chosen.log))
                try:
                    cleaned += self.clean(chosen, now_ms).swapped
                except CleanerAbortedError:
                    break
                except (OSError, UncleanableLogError) as exc:
                    log.warning("Cannot clean %s: %s", chosen.log.dir.name, exc)
        return cleaned

    def shutdown(self) -> None:
        """Stop: a pass in progress is abandoned at the next batch (its `.cleaned` files removed)."""
        self._stopped.set()
        with self._run_lock:
            pass

    def forget(self, topic: str, partition: int) -> None:
        """A deleted log: drop its checkpoint entry (written with the next cleaning of its dir)."""
        key = TopicPartition(topic, partition)
        self._checkpoints.pop(key, None)
        self._checkpoint_dirs.pop(key, None)
        self._delete_horizons.pop(key, None)

    # -- choosing ------------------------------------------------------------------------------

    def grab_filthiest_log(
        self, now_ms: int, skip: set[TopicPartition] | frozenset = frozenset()
    ) -> LogToClean | None:
        best: LogToClean | None = None
        for candidate in self._logs():
            if not candidate.config.compact_enabled or _key(candidate) in skip:
                continue
            to_clean = self.log_to_clean(candidate, now_ms)
            if not self._qualifies(to_clean, now_ms):
                continue
            if best is None or to_clean.cleanable_ratio > best.cleanable_ratio:
                best = to_clean
        return best

    def _qualifies(self, to_clean: LogToClean, now_ms: int) -> bool:
        horizon = self._delete_horizons.get(_key(to_clean.log))
        if horizon is not None and horizon <= now_ms:
            return True
        if to_clean.cleanable_bytes <= 0:
            return False
        return (
            to_clean.need_compaction_now
            or to_clean.cleanable_ratio > to_clean.log.config.min_cleanable_dirty_ratio
        )

    def log_to_clean(self, target: Log, now_ms: int) -> LogToClean:
        config, segments = target.config, target.segments
        inactive, active = segments[:-1], segments[-1]
        first_dirty = self._checkpoints.get(_key(target), target.log_start_offset)
        if not target.log_start_offset <= first_dirty <= target.log_end_offset:
            first_dirty = target.log_start_offset
        first_uncleanable = active.base_offset
        dirty = [segment for segment in inactive if segment.next_offset > first_dirty]
        if config.min_compaction_lag_ms > 0:
            for segment in dirty:
                if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                    first_uncleanable = segment.base_offset
                    break
        first_unstable = target.first_unstable_offset
        if first_unstable >= 0:
            holding = next(s for s in segments if s.next_offset > first_unstable or s is active)
            first_uncleanable = min(first_uncleanable, holding.base_offset)
        first_uncleanable = max(first_uncleanable, first_dirty)
        dirty = [segment for segment in dirty if segment.base_offset < first_uncleanable]
        clean_bytes = sum(segment.size for segment in inactive if segment.next_offset <= first_dirty)
        cleanable_bytes = sum(segment.size for segment in dirty)
        need_now = False
        if dirty and config.max_compaction_lag_ms < LONG_MAX:
            first_timestamp = dirty[0].rolling_timestamp
            if first_timestamp < 0:
                first_timestamp = dirty[0].largest_timestamp
            need_now = now_ms - first_timestamp > config.max_compaction_lag_ms
        return LogToClean(target, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, need_now)

    # -- cleaning one log ----------------------------------------------------------------------

    def clean(self, to_clean: LogToClean, now_ms: int) -> CleanerStats:
        """Compact one log's inactive segments below the map's end (steps 2-5)."""
        target = to_clean.log
        pinned = target.dup_inactive_segments()
        fds = {id(segment): fd for segment, fd in pinned}
        try:
            segments = [segment for segment, _ in pinned]
            offset_map = OffsetMap(self.config.max_map_entries)
            aborted = _AbortedTxns(
                target.collect_aborted_transactions(
                    target.log_start_offset, to_clean.first_uncleanable_offset
                )
            )
            end = self._build_offset_map(to_clean, segments, fds, offset_map, aborted)
            stats = CleanerStats(end_offset=end, map_entries=len(offset_map))
            retained = _RetainedProducerBatches(target)
            txns = _CleanedTxns(aborted.transactions)
            horizon = LONG_MAX
            for group in _group_by_size(
                [segment for segment in segments if segment.base_offset < end], target.config
            ):
                copier = _GroupCopier(target, group, fds, offset_map, txns, now_ms, retained, self._stopped)
                stats.swapped &= copier.copy_and_swap(stats)
                horizon = min(horizon, copier.earliest_delete_horizon)
        finally:
            for _, fd in pinned:
                os.close(fd)
        self._after_clean(target, stats, horizon)
        return stats

    def _build_offset_map(
        self,
        to_clean: LogToClean,
        segments: list[LogSegment],
        fds: dict[int, int],
        offset_map: OffsetMap,
        aborted: _AbortedTxns,
    ) -> int:
        """Fill `offset_map` from the dirty section; return where it ends (the next first dirty offset)."""
        first_dirty, end = to_clean.first_dirty_offset, to_clean.first_uncleanable_offset
        for segment in segments:
            if segment.next_offset <= first_dirty or segment.base_offset >= end:
                continue
            for header, columns in _batches(fds[id(segment)], segment.size, self._stopped):
                if header.last_offset < first_dirty or header.is_control or aborted.holds(header):
                    continue
                if not offset_map.has_room_for(header.records_count):
                    if header.base_offset <= first_dirty:
                        raise UncleanableLogError(
                            f"a batch of {header.records_count} records exceeds the offset map"
                        )
                    return header.base_offset
                entries = offset_map.entries
                for offset, key in zip(columns.offsets, columns.keys, strict=True):
                    if key is not None and offset >= first_dirty:
                        entries[key] = offset
        return end

    def _after_clean(self, target: Log, stats: CleanerStats, horizon: int) -> None:
        key = _key(target)
        if horizon < LONG_MAX:
            self._delete_horizons[key] = horizon
        else:
            self._delete_horizons.pop(key, None)
        if stats.swapped:
            self._checkpoints[key] = stats.end_offset
            self._checkpoint_dirs[key] = target.dir.parent
            self._write_checkpoint(target.dir.parent)
        log.info(
            "Cleaned %s up to offset %d: %d segments (%d bytes) into %d (%d bytes), %d of %d records kept",
            target.dir.name,
            stats.end_offset,
            stats.segments_read,
            stats.bytes_read,
            stats.segments_written,
            stats.bytes_written,
            stats.records_retained,
            stats.records_read,
        )

    def _write_checkpoint(self, directory: Path) -> None:
        """Write the entries of `directory`'s logs, loaded or not (deleted ones were forgotten)."""
        entries = {
            key: offset
            for key, offset in self._checkpoints.items()
            if self._checkpoint_dirs.get(key) == directory
        }
        write_checkpoint(directory / CLEANER_OFFSET_CHECKPOINT, entries)


class _GroupCopier:
    """Copies one group of segments into a `.cleaned` segment and swaps it in."""

    def __init__(
        self,
        target: Log,
        group: list[LogSegment],
        fds: dict[int, int],
        offset_map: OffsetMap,
        txns: _CleanedTxns,
        now_ms: int,
        retained: _RetainedProducerBatches,
        stopped: threading.Event,
    ) -> None:
        self.target = target
        self.group = group
        self.fds = fds
        self.offset_map = offset_map
        self.txns = txns
        self.now_ms = now_ms
        self.new_horizon = now_ms + target.config.delete_retention_ms
        self.retained = retained
        self.stopped = stopped
        self.base_offset = group[0].base_offset
        self.earliest_delete_horizon = LONG_MAX

    def copy_and_swap(self, stats: CleanerStats) -> bool:
        directory = self.target.dir
        fd = os.open(
            directory / _cleaned(self.base_offset, LOG_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644
        )
        self.txns.kept_aborted = []
        try:
            size = self._copy(fd, stats)
        except BaseException:
            os.close(fd)
            _remove_cleaned(directory, self.base_offset)
            raise
        segment = LogSegment.adopt(
            directory,
            self.base_offset,
            fd,
            self.target.files,
            self.target.config,
            self.now_ms,
            size,
            log_path=directory / _cleaned(self.base_offset, LOG_SUFFIX),
        )
        try:
            segment.offset_index.path = directory / _cleaned(self.base_offset, INDEX_SUFFIX)
            segment.time_index.path = directory / _cleaned(self.base_offset, TIME_INDEX_SUFFIX)
            segment.txn_index.path = directory / _cleaned(self.base_offset, TXN_INDEX_SUFFIX)
            segment.recover()
            for aborted in self.txns.kept_aborted:
                segment.txn_index.append(aborted)
            segment.txn_index_stale = False
            segment.on_become_inactive()
            segment.flush()
        except BaseException:
            segment.close()
            _remove_cleaned(directory, self.base_offset)
            raise
        if self.target.replace_segments(self.group, _prepare_swap(self.base_offset), _install(segment)):
            stats.segments_written += 1
            stats.bytes_written += segment.size
            return True
        segment.close()
        _remove_cleaned(self.target.dir, self.base_offset)
        return False

    def _copy(self, fd: int, stats: CleanerStats) -> int:
        """Write the kept batches of the group to `fd`; return the bytes written."""
        out, position = bytearray(), 0
        for segment in self.group:
            stats.segments_read += 1
            stats.bytes_read += segment.size
            for header, data in _raw_batches(self.fds[id(segment)], segment.size, self.stopped):
                kept = self._filter(header, data, stats)
                if kept is not None:
                    out += kept
                if len(out) >= WRITE_BUFFER_BYTES:
                    position += pwrite_all(fd, out, position)
                    out.clear()
        return position + pwrite_all(fd, out, position)

    def _filter(self, header: BatchHeader, data: bytes, stats: CleanerStats) -> bytes | None:
        """The batch as it stays in the log: unchanged, rewritten with fewer records, empty, or gone."""
        if header.is_control:
            return self._filter_marker(header, data)
        if self.txns.on_batch(header):  # the data of an aborted transaction
            stats.records_read += header.records_count
            return self._dropped(header)
        columns = decode_batch_into(data, 0, header, RecordColumns())
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
        latest = self.offset_map.entries.get
        kept = [
            index
            for index, (offset, key, value) in enumerate(
                zip(columns.offsets, columns.keys, columns.values, strict=True)
            )
            if key is not None
            and latest(key, -1) <= offset
            and not (value is None and horizon is not None and horizon <= self.now_ms)
        ]
        stats.records_read += len(columns.offsets)
        stats.records_retained += len(kept)
        has_tombstone = any(columns.values[index] is None for index in kept)
        if has_tombstone:
            horizon = self.new_horizon if horizon is None else horizon
            self.earliest_delete_horizon = min(self.earliest_delete_horizon, horizon)
        if len(kept) == len(columns.offsets) and (
            not has_tombstone or header.attributes & DELETE_HORIZON_MASK
        ):
            return data
        if kept:
            return _rebuild_batch(header, columns, kept, horizon if has_tombstone else None)
        return self._dropped(header)

    def _filter_marker(self, header: BatchHeader, data: bytes) -> bytes | None:
        """A transaction marker as it stays (Kafka's rule, KIP-534): once no batch of its
        transaction remains before it, it is rewritten with a delete horizon (now +
        delete.retention.ms) and, on a pass after that horizon, removed; a marker the producer
        state retains (the producer's last record) stays as an empty batch instead."""
        marker = read_end_txn_marker(data, 0, header) if header.records_count else None
        removable = self.txns.on_marker(header, marker)
        retained = self.retained.holds_marker(header)
        if marker is None:  # a marker already emptied: its records went on an earlier pass
            return data if retained else None
        if not removable:
            return data
        if header.attributes & DELETE_HORIZON_MASK:
            horizon = header.base_timestamp
            if horizon <= self.now_ms:
                return _empty_batch(header) if retained else None
            self.earliest_delete_horizon = min(self.earliest_delete_horizon, horizon)
            return data
        self.earliest_delete_horizon = min(self.earliest_delete_horizon, self.new_horizon)
        columns = decode_batch_into(data, 0, header, RecordColumns())
        return _rebuild_batch(header, columns, list(range(len(columns.offsets))), self.new_horizon)

    def _dropped(self, header: BatchHeader) -> bytes | None:
        """Nothing of the batch stays: it goes, unless the producer state retains it (then empty)."""
        if self.retained.holds_batch(header):
            return _empty_batch(header)
        return None


class _AbortedTxns:
    """The offset ranges of aborted transactions by producer id: which data batches they hold."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self.transactions = aborted
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted:
            self._ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def holds(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control or not self._ranges:
            return False
        ranges = self._ranges.get(header.producer_id, ())
        return any(first <= header.base_offset <= last for first, last in ranges)


class _CleanedTxns:
    """The transactions met while the cleaner walks the log in offset order, across its groups
    (Kafka's CleanedTransactionMetadata): which data batches belong to an aborted transaction, and
    which markers no longer have a batch of their transaction before them in this pass.

    A transactional data batch belongs to an aborted transaction when its producer has one begun
    at or before it (from the transaction indexes) whose marker was not yet met; otherwise it
    belongs to a committed (or still open) one. An ABORT marker whose transaction had a batch in
    this pass stays, with its aborted transaction recorded in `kept_aborted` (the new segment's
    transaction index); a COMMIT marker whose transaction had a batch stays too. Any other marker
    is removable."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(set(aborted), key=lambda txn: txn.first_offset)
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (txn, batch seen)
        self._committed: set[int] = set()  # producers with a batch of a non-aborted transaction
        self.kept_aborted: list[AbortedTxn] = []

    def _begin_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._aborted.setdefault(txn.producer_id, (txn, False))
            self._next += 1

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch read; whether it belongs to an aborted transaction."""
        self._begin_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            self._aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTransactionMarker | None) -> bool:
        """A marker read (None: an emptied one); whether it may be removed."""
        self._begin_up_to(header.last_offset)
        if marker is None:
            return True
        if marker.is_commit:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        ended = self._aborted.pop(header.producer_id, None)
        if ended is not None and ended[1]:
            self.kept_aborted.append(ended[0])
            return False
        return True


class _RetainedProducerBatches:
    """The batches the producer state still needs, kept (emptied if need be) when cleaning would
    remove them (Kafka's lastRecordsOfActiveProducers): each retained data batch of a producer,
    and the markers at the epoch of a producer that has no retained data batch (a marker was its
    last record: it carries the epoch that fences)."""

    def __init__(self, target: Log) -> None:
        producers = target.producer_state.producers
        self._batches = {
            (producer_id, batch.last_offset)
            for producer_id, entry in producers.items()
            for batch in entry.batches
        }
        self._markers = {
            (producer_id, entry.producer_epoch)
            for producer_id, entry in producers.items()
            if not entry.batches
        }

    def holds_batch(self, header: BatchHeader) -> bool:
        return (header.producer_id, header.last_offset) in self._batches

    def holds_marker(self, header: BatchHeader) -> bool:
        return (header.producer_id, header.producer_epoch) in self._markers


# -- batches ---------------------------------------------------------------------------------------


def _raw_batches(fd: int, size: int, stopped: threading.Event) -> Iterator[tuple[BatchHeader, bytes]]:
    for position, header in iter_file_batches(fd, 0, size, chunk_size=RECOVERY_CHUNK):
        if stopped.is_set():
            raise CleanerAbortedError("the log cleaner is shutting down")
        yield header, os.pread(fd, header.size_in_bytes, position)


def _batches(fd: int, size: int, stopped: threading.Event) -> Iterator[tuple[BatchHeader, RecordColumns]]:
    for header, data in _raw_batches(fd, size, stopped):
        yield header, decode_batch_into(data, 0, header, RecordColumns())


def _rebuild_batch(
    header: BatchHeader, columns: RecordColumns, kept: list[int], horizon: int | None
) -> bytes:
    """A batch with only the records at `kept`, offsets, producer fields and codec unchanged."""
    timestamps = columns.timestamps
    base_timestamp = timestamps[kept[0]] if horizon is None else horizon
    base_offset = header.base_offset
    section = b"".join(
        encode_record(
            columns.offsets[index] - base_offset,
            timestamps[index] - base_timestamp,
            columns.keys[index],
            columns.values[index],
            columns.headers[index],
        )
        for index in kept
    )
    codec = header.attributes & COMPRESSION_MASK
    if codec != CompressionType.NONE:
        section = compress(CompressionType(codec), section)
    if header.attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(timestamps[index] for index in kept)
    attributes = header.attributes | (DELETE_HORIZON_MASK if horizon is not None else 0)
    return pack_batch(
        header._replace(
            attributes=attributes,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            records_count=len(kept),
        ),
        section,
    )


def _empty_batch(header: BatchHeader) -> bytes:
    """The header of a batch whose records all went: it keeps the producer's sequence (Kafka's rule)."""
    attributes = header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK)
    horizon = header.attributes & DELETE_HORIZON_MASK
    base_timestamp = header.max_timestamp if horizon else header.base_timestamp
    emptied = header._replace(attributes=attributes, base_timestamp=base_timestamp, records_count=0)
    return pack_batch(emptied, b"")


# -- segments and files ----------------------------------------------------------------------------


def _group_by_size(segments: list[LogSegment], config: LogConfig) -> list[list[LogSegment]]:
    """Consecutive segments merged while their sizes add up to at most segment.bytes and their
    offsets stay within 2**31 - 1 of the group's base offset."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(member.size for member in group) + segment.size
            if size <= config.segment_bytes and segment.next_offset - 1 - group[0].base_offset <= INT_MAX:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def _cleaned(base_offset: int, suffix: str) -> str:
    return file_name(base_offset, suffix) + CLEANED_SUFFIX


def _prepare_swap(base_offset: int) -> Callable[[Path], None]:
    def prepare(directory: Path) -> None:
        for suffix in _SUFFIXES:
            name = file_name(base_offset, suffix)
            _rename_if_written(directory / (name + CLEANED_SUFFIX), directory / (name + SWAP_SUFFIX), suffix)
        fsync_dir(directory)

    return prepare


def _install(segment: LogSegment) -> Callable[[Path], LogSegment]:
    def install(directory: Path) -> LogSegment:
        for suffix in _SUFFIXES:
            name = file_name(segment.base_offset, suffix)
            _rename_if_written(directory / (name + SWAP_SUFFIX), directory / name, suffix)
        segment.move_to(directory)
        return segment

    return install


def _rename_if_written(source: Path, target: Path, suffix: str) -> None:
    """Rename `source`; an empty segment has no index files (see `LogSegment.persist_indexes`)."""
    try:
        os.rename(source, target)
    except FileNotFoundError:
        if suffix == LOG_SUFFIX:
            raise


def _remove_cleaned(directory: Path, base_offset: int) -> None:
    for suffix in _SUFFIXES:
        (directory / _cleaned(base_offset, suffix)).unlink(missing_ok=True)


def _key(target: Log) -> TopicPartition:
    return TopicPartition(target.topic, target.partition)
