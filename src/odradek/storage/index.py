"""The sparse per-segment indexes: `.index` (offset -> file position) and `.timeindex`.

File formats (big-endian, fixed-size entries, no header):
- `.index`: relative offset int32 | position int32. The offset is the *base offset* of a batch (Kafka
  indexes last offsets; either works because a lookup returns the entry at or before the wanted
  offset and the reader then scans batch headers forward). Relative offsets and positions strictly
  increase.
- `.timeindex`: timestamp int64 | relative offset int32. Entry (T, o) means: every batch of the
  segment below offset o has maxTimestamp <= T. Timestamps strictly increase, offsets never decrease.
  When a segment stops being active a last entry (segment max timestamp, segment next offset) is
  added, so a closed segment's largest timestamp is its time index's last entry.

Size policy: the files grow by appends instead of being preallocated and trimmed like Kafka's mmaps.
The entries live in memory (`array`s, searched with bisect); the file is only written on `persist()`
(flush, roll, close), which writes the entries not yet on disk, and fsynced by `sync()`, which a
log's flush calls outside the log's lock. No index fd is held open between those calls. A crash can
lose unpersisted entries: that is harmless because recovery rebuilds the indexes of every segment
past the recovery point, and a segment below it was persisted when flushed. `max_entries`
(segment.index.bytes / entry size) makes the log roll when an index is full, as in Kafka.

Invariants: an index never holds an entry past its segment's data (truncate trims it); a loaded file
that fails `sanity_check` is rebuilt from the log by the caller.

Callers: `storage.segment`; `storage.txn_index` builds on `IndexFile`.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from odradek.storage.errors import KafkaStorageError

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """An index file that fails its sanity check; the caller rebuilds it from the log."""


class IndexFile:
    """A file of fixed-size entries whose in-memory copy is written by appended tails under the
    log's lock (`_write_tail`) and fsynced apart (`sync`, which may run outside it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writes = 0
        self._synced_writes = 0

    def _write_tail(self, tail: bytes, position: int, size: int) -> None:
        """Write `tail` at `position` and cut the file to `size` bytes (creating it if needed)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, tail, position)
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write index {self.path}: {exc}") from exc
        self._writes += 1

    def sync(self) -> None:
        """fsync what was written (nothing to do if nothing was written since the last sync; a file
        deleted meanwhile needs nothing)."""
        writes = self._writes
        if self._synced_writes == writes:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise KafkaStorageError(f"cannot open index {self.path}: {exc}") from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot fsync index {self.path}: {exc}") from exc
        finally:
            os.close(fd)
        self._synced_writes = writes


class _SparseIndex(IndexFile):
    """Two parallel sorted columns (`keys`, `values`) backed by a file of fixed-size entries."""

    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes // self.ENTRY.size, 1)
        self.keys = array(self.KEY_TYPE)
        self.values = array(self.VALUE_TYPE)
        self._persisted = 0
        self._file_entries = -1  # no file written yet: the first persist creates it

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def written(self) -> bool:
        """Whether the file was loaded or written (a new segment's index has no file yet)."""
        return self._file_entries >= 0

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def load(self) -> None:
        """Read the file into memory; raise IndexCorruptError when its size is not whole entries."""
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % self.ENTRY.size:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of the entry size")
        keys, values = zip(*self.ENTRY.iter_unpack(data), strict=True) if data else ((), ())
        self.keys, self.values = array(self.KEY_TYPE, keys), array(self.VALUE_TYPE, values)
        self._persisted = self._file_entries = len(self.keys)

    def reset(self) -> None:
        self.keys, self.values = array(self.KEY_TYPE), array(self.VALUE_TYPE)
        self._persisted = 0

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries (new arrays: a concurrent lookup keeps the old ones)."""
        self.keys, self.values = self.keys[:count], self.values[:count]
        self._persisted = min(self._persisted, count)

    def persist(self, fsync: bool) -> None:
        """Write the entries not yet on disk (and trim a truncated file); fsync when asked.

        Writing happens under the owning log's lock; `sync` (the fsync alone) may run outside it."""
        count = len(self.keys)
        if self._persisted != count or self._file_entries != count:
            pack, keys, values = self.ENTRY.pack, self.keys, self.values
            tail = b"".join(pack(keys[i], values[i]) for i in range(self._persisted, count))
            self._write_tail(tail, self._persisted * self.ENTRY.size, count * self.ENTRY.size)
            self._persisted = self._file_entries = count
        if fsync:
            self.sync()


class OffsetIndex(_SparseIndex):
    """Batch base offset (relative to the segment) -> byte position of that batch in the `.log`."""

    ENTRY = OFFSET_ENTRY
    KEY_TYPE = "i"
    VALUE_TYPE = "i"

    def append(self, offset: int, position: int) -> None:
        self.keys.append(offset - self.base_offset)
        self.values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`, else (base offset, 0)."""
        slot = bisect_right(self.keys, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[slot], self.values[slot]

    def lookup_position(self, position: int) -> int:
        """The last indexed position at or below `position`, else 0 (positions are batch starts)."""
        slot = bisect_right(self.values, position) - 1
        return self.values[slot] if slot >= 0 else 0

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for offsets >= `offset`."""
        self.truncate_entries(bisect_left(self.keys, offset - self.base_offset))

    def sanity_check(self, next_offset: int, log_size: int) -> None:
        """Raise IndexCorruptError unless entries increase and stay inside the segment's data."""
        _check_increasing(self.path, self.keys, strict=True)
        _check_increasing(self.path, self.values, strict=True)
        if self.keys and (self.keys[0] < 0 or self.base_offset + self.keys[-1] >= next_offset):
            raise IndexCorruptError(f"{self.path}: entry offset outside the segment")
        if self.values and (self.values[0] < 0 or self.values[-1] >= log_size):
            raise IndexCorruptError(f"{self.path}: entry position beyond the end of the log")


class TimeIndex(_SparseIndex):
    """Max timestamp so far -> relative offset below which no batch has a larger timestamp."""

    ENTRY = TIME_ENTRY
    KEY_TYPE = "q"
    VALUE_TYPE = "i"

    @property
    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) when `timestamp` is larger than the last entry's."""
        if timestamp > self.last_timestamp:
            self.keys.append(timestamp)
            self.values.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """An offset below which every batch's maxTimestamp is < `timestamp` (the base offset if none)."""
        slot = bisect_left(self.keys, timestamp) - 1
        return self.base_offset + self.values[slot] if slot >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries claiming anything about offsets >= `offset`."""
        self.truncate_entries(bisect_right(self.values, offset - self.base_offset))

    def sanity_check(self, next_offset: int) -> None:
        _check_increasing(self.path, self.keys, strict=True)
        _check_increasing(self.path, self.values, strict=False)
        if self.values and (self.values[0] < 0 or self.base_offset + self.values[-1] > next_offset):
            raise IndexCorruptError(f"{self.path}: entry offset beyond the end of the segment")


def _check_increasing(path: Path, column: array, strict: bool) -> None:
    for previous, current in zip(column, column[1:], strict=False):
        if current < previous or (strict and current == previous):
            raise IndexCorruptError(f"{path}: entries out of order")
