"""One log segment: a `.log` file of batches plus its `.index`, `.timeindex` and `.txnindex`.

Owns: the files `<dir>/%020d.log|.index|.timeindex|.txnindex` named by the segment's base offset
(the transaction index, `txn_index`, holds the aborted transactions whose ABORT marker is in the
segment; `storage.producer_state` appends to it and rebuilds it); appending
already-patched batches with one positional write; translating an offset or timestamp to a file
position (index lookup, then a forward scan reading only batch headers with `os.pread`; the active
segment remembers where its last RECENT_BATCHES to 2 x RECENT_BATCHES appended batches start, in
memory, so a fetch at or near the end of the log reads no header from the file); the scan
that recovers a segment (header sanity + CRC32C per batch, truncating a torn or corrupt tail and
rebuilding both offset indexes and emptying the transaction index, which is then `txn_index_stale`
until the log's producer state replays the segment's markers); truncation (of the transaction index
too); flushing (`sync`, which a log runs outside its lock);
deletion.

Invariants:
- The `.log` holds whole batches with strictly increasing offsets, all >= the base offset and within
  2**31 - 1 of it; `size` and `next_offset` describe exactly what is on disk (a failed write is cut
  back off the file before the error propagates).
- The segment holds no fd of its own: its `.log` is opened on demand through the broker's
  `FileCache` (bounded, least recently used closed first), and every use of the fd is inside
  `opened()` (or the cache's acquire/release), so the cache never closes it under a read, a write
  or an fdatasync. `read` leases the fd for the `FileSlice` it makes; a deleted segment's fd is
  closed after file.delete.delay.ms (and its lease) by the `FdReaper`.
- The index files are not held open either, and a new segment creates none until it holds data.
- An index entry is added before a batch once more than index.interval.bytes were written since the
  previous entry (Kafka's rule), so the first batch of a segment is never indexed (position 0).

Callers: `storage.log` and `storage.loader`; the log cleaner reads segment files through
`iter_file_batches` and writes its copies with `pwrite_all`. Not thread-safe: `Log` serialises
mutations.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    ValidatedRecords,
)
from odradek.storage.config import INT_MAX, LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.file_cache import FileCache, FileHandle, SegmentGoneError
from odradek.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from odradek.storage.txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
DELETED_SUFFIX = ".deleted"
READ_CHUNK = 8 * 1024
RECOVERY_CHUNK = 1024 * 1024
# Appended batches whose positions an active segment keeps (up to twice as many: two arrays of at
# most 16 int64s, 256 bytes of data per partition).
RECENT_BATCHES = 8


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def pwrite_all(fd: int, buf: bytes | bytearray | memoryview, position: int) -> int:
    """Write all of `buf` at `position` (pwrite may write less than asked); return its length."""
    written = os.pwrite(fd, buf, position)
    if written < len(buf):
        with memoryview(buf) as view:
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
    return written


def iter_file_batches(
    fd: int, start: int, end: int, verify_crc: bool = False, chunk_size: int = READ_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in [start, end) of `fd`, stopping at the first bad one.

    Reads `chunk_size` bytes at a time and only the headers unless `verify_crc`; a batch is bad
    when torn, of the wrong magic, shorter than a header or (with `verify_crc`) failing its CRC32C.
    """
    position, chunk, chunk_start = start, b"", start
    while end - position >= RECORD_BATCH_OVERHEAD:
        at = position - chunk_start
        if at + RECORD_BATCH_OVERHEAD > len(chunk):
            chunk, chunk_start, at = os.pread(fd, min(chunk_size, end - position), position), position, 0
            if len(chunk) < RECORD_BATCH_OVERHEAD:
                return
        header = BatchHeader.unpack_from(chunk, at)
        size = header.batch_length + LOG_OVERHEAD
        if header.magic != CURRENT_MAGIC or header.batch_length < MIN_BATCH_LENGTH or position + size > end:
            return
        if verify_crc:
            if at + size > len(chunk):
                chunk, chunk_start, at = (
                    os.pread(fd, max(size, min(chunk_size, end - position)), position),
                    position,
                    0,
                )
                if len(chunk) < size:
                    return
            with memoryview(chunk) as view:
                if crc32c(view[at + ATTRIBUTES_OFFSET : at + size]) != header.crc:
                    return
        yield position, header
        position += size


class LogSegment:
    """A segment's files and what is known about them in memory."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        files: FileCache,
        config: LogConfig,
        now_ms: int,
        size: int | None = None,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.files = files
        self.handle = FileHandle(self.path(LOG_SUFFIX))
        self.size = os.stat(self.handle.path).st_size if size is None else size
        self.next_offset = base_offset
        self.offset_index = OffsetIndex(self.path(INDEX_SUFFIX), base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX), base_offset, config.segment_index_bytes)
        self.txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX))
        self.txn_index_stale = False
        self.index_interval_bytes = config.index_interval_bytes
        self.max_timestamp = -1
        self.rolling_timestamp = -1
        self.created_ms = now_ms
        self.flushed_size = self.size
        self.truncations = 0
        self._bytes_since_index = 0
        self._forget_recent()

    def path(self, suffix: str) -> Path:
        return self.directory / file_name(self.base_offset, suffix)

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        files: FileCache,
        config: LogConfig,
        now_ms: int,
        new_directory: bool = False,
    ) -> LogSegment:
        """A new empty segment (an existing file of that name is emptied, stale indexes removed,
        unless the directory was just made).

        The index files are written by the first `persist`; only the `.log` is created here."""
        try:
            for suffix in () if new_directory else INDEX_SUFFIXES:
                (directory / file_name(base_offset, suffix)).unlink(missing_ok=True)
            flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
            fd = os.open(directory / file_name(base_offset, LOG_SUFFIX), flags, 0o644)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create segment {base_offset} in {directory}: {exc}") from exc
        return cls.adopt(directory, base_offset, fd, files, config, now_ms, size=0)

    @classmethod
    def adopt(
        cls,
        directory: Path,
        base_offset: int,
        fd: int,
        files: FileCache,
        config: LogConfig,
        now_ms: int,
        size: int,
        log_path: Path | None = None,
    ) -> LogSegment:
        """A segment over `fd`, an open `.log` of `size` bytes (at `log_path` if not the usual name),
        handed to the file cache; it is marked unflushed."""
        segment = cls(directory, base_offset, files, config, now_ms, size)
        if log_path is not None:
            segment.handle.path = log_path
        files.adopt(segment.handle, fd)
        segment.flushed_size = -1
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, files: FileCache, config: LogConfig, now_ms: int
    ) -> LogSegment:
        """An existing segment, not yet loaded (call `load` or `recover`); its file opens on first use."""
        return cls(directory, base_offset, files, config, now_ms)

    def opened(self) -> AbstractContextManager[int]:
        """The `.log` fd for the duration of a `with` block (the cache does not close it meanwhile)."""
        return self.files.use(self.handle)

    def dup_fd(self) -> int:
        """A duplicate of the `.log` fd, for a reader that must keep the file past its deletion."""
        with self.opened() as fd:
            return os.dup(fd)

    def move_to(self, directory: Path) -> None:
        """The files now live in `directory` (renamed; an open fd is unaffected)."""
        self.directory = directory
        self.handle.path = self.path(LOG_SUFFIX)
        self.offset_index.path = self.path(INDEX_SUFFIX)
        self.time_index.path = self.path(TIME_INDEX_SUFFIX)
        self.txn_index.path = self.path(TXN_INDEX_SUFFIX)

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Trust the files (they were flushed): read the indexes and scan only the unindexed tail.

        Raises IndexCorruptError when an index is missing or fails its sanity check, or the tail does
        not scan cleanly; the caller then recovers the segment.
        """
        for index in (self.offset_index, self.time_index):
            if self.size and not index.path.exists():
                raise IndexCorruptError(f"{index.path} is missing")
            index.load()
        self.txn_index.load()
        _, start = self.offset_index.lookup(INT_MAX + self.base_offset)
        if self.offset_index.values and start >= self.size:
            raise IndexCorruptError(f"{self.offset_index.path}: entry position beyond the end of the log")
        end, next_offset, max_timestamp = start, self.base_offset, self.time_index.last_timestamp
        with self.opened() as fd:
            for position, header in iter_file_batches(fd, start, self.size, chunk_size=RECOVERY_CHUNK):
                end, next_offset = position + header.batch_length + LOG_OVERHEAD, header.next_offset
                max_timestamp = max(max_timestamp, header.max_timestamp)
            if end != self.size:
                raise IndexCorruptError(f"{self.path(LOG_SUFFIX)}: batches do not end at the end of the file")
            self.next_offset = next_offset
            self.offset_index.sanity_check(self.next_offset, self.size)
            self.time_index.sanity_check(self.next_offset)
            self.max_timestamp = max_timestamp
            self._bytes_since_index = self.size - start
            self._load_rolling_timestamp(fd)

    def recover(self) -> int:
        """Rescan every batch (sanity + CRC32C), rebuild the offset indexes, cut off a bad tail; the
        transaction index is emptied and left `txn_index_stale` for the producer state to rebuild.

        Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.txn_index_stale = True
        with self.opened() as fd:
            self.size = os.fstat(fd).st_size
            self.next_offset, self.max_timestamp, self._bytes_since_index = self.base_offset, -1, 0
            valid_end = 0
            for position, header in iter_file_batches(fd, 0, self.size, True, RECOVERY_CHUNK):
                if header.base_offset < self.next_offset or header.last_offset - self.base_offset > INT_MAX:
                    break
                self._index_batch(position, header.base_offset, header.size_in_bytes, header.max_timestamp)
                self.next_offset = header.next_offset
                valid_end = position + header.size_in_bytes
            truncated = self.size - valid_end
            if truncated:
                self._truncate_file(fd, valid_end)
            self._load_rolling_timestamp(fd)
        self.persist_indexes(fsync=False)
        self.flushed_size = -1
        return truncated

    def _load_rolling_timestamp(self, fd: int) -> None:
        first = next(iter_file_batches(fd, 0, self.size), None)
        self.rolling_timestamp = first[1].max_timestamp if first else -1

    # -- appending -----------------------------------------------------------------------------

    def append(
        self,
        buf: bytes | bytearray | memoryview,
        validated: ValidatedRecords,
        first_offset: int | None,
        log_append_time: int,
    ) -> None:
        """Write the patched batches in `buf` at the end of the file and index them.

        `first_offset` is the offset assigned to the first batch (None: the batches carry their
        offsets already, as on a follower). `log_append_time` >= 0 replaces every maxTimestamp.
        Raises KafkaStorageError after cutting a failed write back off the file.
        """
        position = self.size
        self._write(buf, position)
        offset = first_offset
        if not self._recent_lasts:
            self._recent_floor = self.next_offset - 1
        for relative, header in zip(validated.positions, validated.headers, strict=True):
            base = header.base_offset if offset is None else offset
            max_timestamp = header.max_timestamp if log_append_time < 0 else log_append_time
            self._index_batch(position + relative, base, header.batch_length + LOG_OVERHEAD, max_timestamp)
            self.next_offset = base + header.last_offset_delta + 1
            self._remember(position + relative, self.next_offset - 1)
            if offset is not None:
                offset = self.next_offset
        self.size = position + len(buf)

    def _index_batch(self, position: int, base_offset: int, size: int, max_timestamp: int) -> None:
        if position == 0:
            self.rolling_timestamp = max_timestamp
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp

    def _remember(self, position: int, last_offset: int) -> None:
        """Keep where an appended batch starts; past 2 x RECENT_BATCHES, the oldest half goes."""
        lasts, positions = self._recent_lasts, self._recent_positions
        if len(lasts) >= 2 * RECENT_BATCHES:
            self._recent_floor = lasts[RECENT_BATCHES - 1]
            del lasts[:RECENT_BATCHES], positions[:RECENT_BATCHES]
        lasts.append(last_offset)
        positions.append(position)

    def _forget_recent(self) -> None:
        """Drop the recent batch positions (the file changed under them, or the segment went
        inactive); the next append starts them again."""
        self._recent_lasts = array("q")
        self._recent_positions = array("q")
        self._recent_floor = INT_MAX

    def _recent_batch(self, offset: int, size: int) -> tuple[int, int, int] | None:
        """(position, last offset, size) of the first batch whose last offset is >= `offset`, if it
        is one of the recently appended batches (below `size`, the file size the reader took)."""
        lasts = self._recent_lasts
        if not lasts or offset <= self._recent_floor or offset > lasts[-1]:
            return None
        index = bisect_left(lasts, offset)
        positions = self._recent_positions
        position = positions[index]
        end = positions[index + 1] if index + 1 < len(positions) else self.size
        if end > size:
            return None  # appended after the reader took the file size
        return position, lasts[index], end - position

    def _write(self, buf: bytes | bytearray | memoryview, position: int) -> None:
        files, handle = self.files, self.handle
        fd = files.acquire(handle)  # acquire/release, not `opened()`: this is the append path
        try:
            pwrite_all(fd, buf, position)
        except OSError as exc:
            self._truncate_file(fd, position)
            raise KafkaStorageError(f"write to {self.path(LOG_SUFFIX)} failed: {exc}") from exc
        finally:
            files.release(handle)

    def _truncate_file(self, fd: int, size: int) -> None:
        try:
            os.ftruncate(fd, size)
        except OSError as exc:
            raise KafkaStorageError(f"cannot truncate {self.path(LOG_SUFFIX)}: {exc}") from exc
        self.size = size
        self.flushed_size = min(self.flushed_size, size)
        self.truncations += 1
        self._forget_recent()

    def should_roll(
        self, config: LogConfig, append_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's roll rules: size, segment.ms since the first batch, a full index, offset overflow."""
        if self.size == 0:
            return False
        waited = (
            max_timestamp - self.rolling_timestamp
            if self.rolling_timestamp >= 0
            else now_ms - self.created_ms
        )
        return (
            self.size > config.segment_bytes - append_size
            or waited > config.segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > INT_MAX
        )

    def update_config(self, config: LogConfig) -> None:
        self.index_interval_bytes = config.index_interval_bytes

    # -- reading -------------------------------------------------------------------------------

    def translate_offset(
        self, fd: int, offset: int, start: int = 0, end: int | None = None
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, else None."""
        _, position = self.offset_index.lookup(offset)
        for found in iter_file_batches(fd, max(position, start), self.size if end is None else end):
            if found[1].last_offset >= offset:
                return found
        return None

    def batch_holding(self, offset: int) -> BatchHeader | None:
        """The header of the first batch whose last offset is >= `offset`, else None."""
        with self.opened() as fd:
            found = self.translate_offset(fd, offset)
        return found[1] if found is not None else None

    def read(
        self, fetch_offset: int, max_offset: int, max_bytes: int, min_one_message: bool
    ) -> tuple[int, int, int] | None:
        """(fd, position, length) of whole batches from the one holding `fetch_offset`, else None.

        Stops before the first batch reaching `max_offset` and within `max_bytes`, except that with
        `min_one_message` the first batch is returned whole even when larger than `max_bytes`. The
        fd is leased (see `file_cache`): it stays open for the `FileSlice` made of it.
        """
        files, handle = self.files, self.handle
        fd = files.acquire(handle, files.lease_deadline())
        try:
            found = self._read_range(fd, fetch_offset, max_offset, max_bytes, min_one_message)
        finally:
            files.release(handle)
        return None if found is None else (fd, *found)

    def _read_range(
        self, fd: int, fetch_offset: int, max_offset: int, max_bytes: int, min_one_message: bool
    ) -> tuple[int, int] | None:
        size = self.size
        found = self._locate(fd, fetch_offset, 0, size)
        if found is None:
            return None
        start, first_last_offset, first_size = found
        if first_last_offset >= max_offset:
            return start, 0
        end = size
        if max_offset < self.next_offset:
            limit = self._locate(fd, max_offset, start, size)
            end = limit[0] if limit is not None else size
        if end - start > max_bytes:
            end = self._boundary_at_or_before(fd, start + max_bytes, start, end)
            if end == start and min_one_message:
                end = start + first_size
        return start, end - start

    def _locate(self, fd: int, offset: int, start: int, end: int) -> tuple[int, int, int] | None:
        """(position, last offset, size) of the first batch in [start, end) whose last offset is
        >= `offset`: from the recently appended batches when it is one of them (a reader at or near
        the end reads no header from the file), else by the index and a header scan."""
        recent = self._recent_batch(offset, end)
        if recent is not None and recent[0] >= start:
            return recent
        found = self.translate_offset(fd, offset, start, end)
        return None if found is None else (found[0], found[1].last_offset, found[1].size_in_bytes)

    def _boundary_at_or_before(self, fd: int, limit: int, start: int, end: int) -> int:
        positions = self._recent_positions
        if positions and positions[0] <= start:  # every batch from `start` on is remembered
            return max(positions[bisect_right(positions, limit) - 1], start)
        boundary = max(self.offset_index.lookup_position(limit), start)
        for position, header in iter_file_batches(fd, boundary, end):
            if position + header.batch_length + LOG_OVERHEAD > limit:
                break
            boundary = position + header.batch_length + LOG_OVERHEAD
        return boundary

    def batches_reaching(self, timestamp: int, min_offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch with maxTimestamp >= `timestamp` holding offsets at or
        past `min_offset`, starting where the time index says such batches can begin."""
        start_offset = max(self.time_index.lookup(timestamp), min_offset)
        _, position = self.offset_index.lookup(start_offset)
        with self.opened() as fd:
            for found in iter_file_batches(fd, position, self.size):
                if found[1].max_timestamp >= timestamp and found[1].last_offset >= min_offset:
                    yield found

    def batches_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from the one holding `offset` on."""
        with self.opened() as fd:
            found = self.translate_offset(fd, offset)
            if found is not None:
                yield from iter_file_batches(fd, found[0], self.size)

    def iter_batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from byte `start` on (headers only, large reads)."""
        with self.opened() as fd:
            yield from iter_file_batches(fd, start, self.size, chunk_size=RECOVERY_CHUNK)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        with self.opened() as fd:
            return os.pread(fd, header.batch_length + LOG_OVERHEAD, position)

    @property
    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's mtime when no batch has one (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        with self.opened() as fd:
            return os.fstat(fd).st_mtime_ns // 1_000_000

    # -- truncation, flush, lifecycle ----------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; return the bytes removed."""
        with self.opened() as fd:
            found = self.translate_offset(fd, offset)
            if found is None:
                return 0
            position = found[0]
            removed = self.size - position
            self._truncate_file(fd, position)
            self.offset_index.truncate_to_offset(found[1].base_offset)
            self.time_index.truncate_to_offset(found[1].base_offset)
            self.txn_index.truncate_to(found[1].base_offset)
            self._rescan_tail(fd)
        return removed

    def _rescan_tail(self, fd: int) -> None:
        _, start = self.offset_index.lookup(INT_MAX + self.base_offset)
        self.next_offset = self.base_offset
        self.max_timestamp = self.time_index.last_timestamp
        self._bytes_since_index = self.size - start
        for _, header in iter_file_batches(fd, start, self.size, chunk_size=RECOVERY_CHUNK):
            self.next_offset = header.next_offset
            self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        if self.size == 0:
            self.rolling_timestamp = -1

    def persist_indexes(self, fsync: bool) -> None:
        """Write (and with `fsync`, sync) the indexes; a new segment still empty needs no files."""
        if self.size == 0 and not (
            self.offset_index.written or self.time_index.written or self.txn_index.written
        ):
            return
        self.offset_index.persist(fsync)
        self.time_index.persist(fsync)
        self.txn_index.persist(fsync)

    def on_become_inactive(self) -> None:
        """Seal the time index with the segment's largest timestamp and write both indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.next_offset)
        self.persist_indexes(fsync=False)
        self._forget_recent()

    def flush(self) -> None:
        """fdatasync the data and fsync the indexes (a segment no one else touches: loading,
        cleaning). `Log.flush` splits this into `persist_indexes` under its lock and `sync` outside."""
        self.persist_indexes(fsync=False)
        self.mark_flushed(*self.sync())

    def sync(self) -> tuple[int, int]:
        """fdatasync the data and fsync the index files written so far, holding no lock but the
        file cache's use of the fd; returns (size, truncations) as they were before the sync, for
        `mark_flushed`. A segment deleted meanwhile needs nothing."""
        size, truncations = self.size, self.truncations
        if self.flushed_size != size:
            try:
                with self.opened() as fd:
                    os.fdatasync(fd)
            except SegmentGoneError:
                return -1, truncations
            except OSError as exc:
                raise KafkaStorageError(f"cannot flush {self.path(LOG_SUFFIX)}: {exc}") from exc
        self.offset_index.sync()
        self.time_index.sync()
        self.txn_index.sync()
        return size, truncations

    def mark_flushed(self, size: int, truncations: int) -> None:
        """The first `size` bytes are on disk, unless the file was truncated since (then unknown)."""
        if truncations == self.truncations and size > self.flushed_size:
            self.flushed_size = size

    def close(self) -> None:
        self.files.retire(self.handle, 0)

    def delete(self, deadline_ms: int) -> None:
        """Unlink the files (through a `.deleted` rename, so a crash leaves marked leftovers); the fd
        is closed after `deadline_ms` (and after any lease of a `FileSlice` made from it)."""
        renamed = []
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            path = self.path(suffix)
            if path.exists():
                target = path.with_name(path.name + DELETED_SUFFIX)
                os.rename(path, target)
                renamed.append(target)
        for path in renamed:
            path.unlink()
        self.files.retire(self.handle, deadline_ms)
