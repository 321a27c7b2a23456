"""The per-segment transaction index `.txnindex` (Kafka's TransactionIndex): the aborted transactions
whose ABORT marker lies in the segment.

File format (Kafka's, big-endian, fixed 34-byte entries, no header), one entry per aborted
transaction, in the order of their markers:

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

`firstOffset` is the transaction's first offset (possibly in an older segment), `lastOffset` the
offset of its ABORT marker, `lastStableOffset` the partition's last stable offset once it completed.

Size policy as for the other indexes (`index`): the entries live in memory, the file is written by
`persist` (flush, roll, close: only the entries not yet on disk) and fsynced by `sync`; a new
segment writes no file until it holds an entry. A crash may lose unpersisted entries: recovery
rebuilds the index of every segment past the recovery point from the log's markers.

Invariants: entries are ordered by lastOffset; `truncate_to` drops every entry whose marker is at or
past the truncation offset.

Callers: `storage.segment` (its files), `storage.producer_state` (appends, rebuilds), `storage.log`
(fetches collecting aborted transactions), `storage.cleaner` (carrying entries into a cleaned segment).
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from odradek.storage.index import IndexCorruptError, IndexFile

TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex(IndexFile):
    """The aborted transactions of one segment, in memory, backed by its `.txnindex`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entries: list[AbortedTxn] = []
        self._persisted = 0
        self._file_entries = -1  # no file written yet

    @property
    def written(self) -> bool:
        return self._file_entries >= 0

    def append(self, aborted: AbortedTxn) -> None:
        if self.entries and aborted.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted txn ending at {aborted.last_offset} is out of order")
        self.entries.append(aborted)

    def load(self) -> None:
        """Read the file (a missing one is empty); IndexCorruptError when it does not parse."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) % TXN_INDEX_ENTRY.size:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of the entry size")
        entries = []
        for version, *fields in TXN_INDEX_ENTRY.iter_unpack(data):
            if version != TXN_INDEX_VERSION:
                raise IndexCorruptError(f"{self.path}: unknown entry version {version}")
            entries.append(AbortedTxn(*fields))
        self.entries = entries
        self._persisted = len(entries)
        self._file_entries = len(entries) if data else -1

    def reset(self) -> None:
        self.entries = []
        self._persisted = 0

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past `offset` (a new list: readers keep the old)."""
        keep = bisect_left([entry.last_offset for entry in self.entries], offset)
        self.entries = self.entries[:keep]
        self._persisted = min(self._persisted, keep)

    def persist(self, fsync: bool) -> None:
        """Write the entries not yet on disk (and trim a truncated file); fsync when asked."""
        count = len(self.entries)
        if self._persisted != count or self._file_entries not in (-1, count):
            pack = TXN_INDEX_ENTRY.pack
            tail = b"".join(pack(TXN_INDEX_VERSION, *entry) for entry in self.entries[self._persisted :])
            self._write_tail(tail, self._persisted * TXN_INDEX_ENTRY.size, count * TXN_INDEX_ENTRY.size)
            self._persisted = self._file_entries = count
        if fsync:
            self.sync()
