"""The leader epoch cache of one partition: which leader epoch wrote which offsets.

Owns `<topic>-<partition>/leader-epoch-checkpoint`, Kafka's text format:

    0          <- format version
    2          <- number of entries
    0 0        <- leader epoch, start offset (the first offset written in that epoch)
    3 1200

Entry `(epoch, start_offset)` covers the offsets from its start offset up to the next entry's start
offset; the last entry covers everything up to the log end offset.

Invariants:
- Entries strictly increase in epoch and in start offset. `assign` of an epoch that is not newer, or
  of a start offset not past the last one, drops the entries it would contradict first (as Kafka's
  cache does), so the list stays monotonic.
- Changes are made in memory at once and written by `flush`, which `Log.flush` calls in a worker
  thread before it moves the recovery point (and `Log.close` at shutdown): temp file, fsync, rename,
  then the flush's one directory fsync, never on the event loop and never under the log's lock.
  (Kafka writes on every `assign` and defers only truncations; deferring both is safe because the
  loader does not trust the file after a crash, see `loader` step 5.) Flushes are serialised by the
  cache's own lock and each writes the entries as they are when it starts, so an older snapshot
  never overwrites a newer one. After a clean shutdown the file is exact; after a crash it may lag
  the log in both directions, and the loader trims what the log contradicts and rescans the batches
  that may open newer epochs, so the recovered cache never claims an epoch the log does not have.
- Lookups take no lock: the entries are one tuple replaced by one assignment. Mutations are made
  under the owning `Log`'s lock.

Callers: `Log` (append, truncation, retention), `loader.load_leader_epoch_cache` (start-up, rebuild
from the batches when the file is missing or damaged), `Partition` (a new leader epoch starts at the
log end offset; ListOffsets epochs; OffsetForLeaderEpoch end offsets).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.storage.checkpoint import entry_lines, write_entries

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochEndOffset(NamedTuple):
    """An OffsetForLeaderEpoch answer: the epoch found and the offset where it ended."""

    leader_epoch: int
    end_offset: int


UNDEFINED_END_OFFSET = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class LeaderEpochFileCache:
    """Leader epoch -> start offset entries of one partition, mirrored to its checkpoint file."""

    def __init__(self, directory: Path, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._entries: tuple[EpochEntry, ...] = tuple(entries)
        # A plain attribute, not a property: the append path compares against it per batch.
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH
        self.dirty = False
        self._flush_lock = threading.Lock()

    @classmethod
    def read(cls, directory: Path) -> LeaderEpochFileCache | None:
        """The cache stored in `directory`; None when the file is missing or damaged."""
        path = directory / LEADER_EPOCH_CHECKPOINT
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            return cls(directory, _parse(text))
        except ValueError as exc:
            log.warning("%s is damaged (%s); rebuilding it from the log", path, exc)
            return None

    # -- lookups (no lock) -----------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    def epoch_for(self, offset: int) -> int:
        """The epoch that wrote `offset` (the entry starting at or before it), or UNDEFINED_EPOCH."""
        entries = self._entries
        index = bisect_right(entries, offset, key=_start_offset) - 1
        return entries[index].epoch if index >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's OffsetForLeaderEpoch answer for `epoch`.

        The latest epoch ends at the log end offset. An older epoch ends where the first newer epoch
        starts, answered with the newest known epoch at or below the one asked for (or the one asked
        for when every known epoch is newer: its data is gone). Undefined for UNDEFINED_EPOCH and for
        an epoch newer than every entry.
        """
        entries = self._entries
        if epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_END_OFFSET
        if epoch == entries[-1].epoch:
            return EpochEndOffset(epoch, log_end_offset)
        higher = bisect_right(entries, epoch, key=_epoch)
        if higher == len(entries):
            return UNDEFINED_END_OFFSET
        found = entries[higher - 1].epoch if higher > 0 else epoch
        return EpochEndOffset(found, entries[higher].start_offset)

    # -- changes (under the log's lock) ----------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
            return False
        kept = list(entries)
        dropped = []
        while kept and (kept[-1].epoch >= epoch or kept[-1].start_offset >= start_offset):
            dropped.append(kept.pop())
        if len(dropped) > 1 or (dropped and dropped[0].start_offset != start_offset):
            log.warning("%s: epoch %d at %d drops the entries %s", self.path, epoch, start_offset, dropped)
        kept.append(EpochEntry(epoch, start_offset))
        self._replace(kept)
        return True

    def assign_if_newer(self, epoch: int, start_offset: int) -> None:
        """`assign` when `epoch` is newer than the latest: a batch opening a new epoch (appends and
        rescans meet every batch, and only the first of an epoch changes the cache)."""
        if epoch > self.latest_epoch:
            self.assign(epoch, start_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget the epochs starting at or after `end_offset` (the log was cut there)."""
        kept = [entry for entry in self._entries if entry.start_offset < end_offset]
        return self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget what lies below `start_offset` (the log start offset moved): the epoch holding it
        now starts there."""
        entries = self._entries
        first_kept = bisect_right(entries, start_offset, key=_start_offset) - 1
        if first_kept < 0:
            return False
        kept = [EpochEntry(entries[first_kept].epoch, start_offset), *entries[first_kept + 1 :]]
        return self._replace(kept)

    def clear(self) -> bool:
        """Forget every entry (the log was emptied)."""
        return self._replace([])

    def _replace(self, entries: list[EpochEntry]) -> bool:
        new = tuple(entries)
        if new == self._entries:
            return False
        self._entries = new
        self.latest_epoch = new[-1].epoch if new else UNDEFINED_EPOCH
        self.dirty = True
        return True

    # -- the file (worker threads) ---------------------------------------------------------------

    def flush(self, sync_dir: bool = True) -> bool:
        """Write the entries to the checkpoint file if they changed since the last flush; True if
        written (with `sync_dir=False` the caller then fsyncs the directory).

        A directory deleted meanwhile (the log was deleted) needs nothing."""
        with self._flush_lock:
            if not self.dirty:
                return False
            self.dirty = False
            lines = [f"{epoch} {start_offset}" for epoch, start_offset in self._entries]
            try:
                write_entries(self.path, lines, sync_dir)
            except FileNotFoundError:
                if self.path.parent.exists():
                    self.dirty = True
                    raise
                return False
            except BaseException:
                self.dirty = True
                raise
            return True


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start_offset(entry: EpochEntry) -> int:
    return entry.start_offset


def _parse(text: str) -> list[EpochEntry]:
    entries: list[EpochEntry] = []
    for line in entry_lines(text):
        epoch, start_offset = (int(field) for field in line.split(" "))
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"negative entry {line!r}")
        if entries and (epoch <= entries[-1].epoch or start_offset <= entries[-1].start_offset):
            raise ValueError(
                f"entry {line!r} does not follow ({entries[-1].epoch}, {entries[-1].start_offset})"
            )
        entries.append(EpochEntry(epoch, start_offset))
    return entries
