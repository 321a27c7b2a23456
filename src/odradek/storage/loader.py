"""Opening a partition directory: leftovers, segment loading and crash recovery.

Owns the start-up procedure for one log directory:
1. Leftovers: `*.deleted` and `*.cleaned` files are removed (a deletion or a cleaning that did not
   finish); a `*.log.swap` (a finished cleaning not yet swapped in) replaces the segments whose base
   offsets fall in its offset range and its indexes are rebuilt; index files without a `.log` go.
2. Segments below the recovery point are trusted: their indexes (`.txnindex` included) are loaded
   and sanity-checked (whole entries, increasing, nothing past the end of the data), and rebuilt
   from the log if not.
3. Without a clean shutdown, every segment from the one holding the recovery point on is rescanned
   batch by batch (header sanity + CRC32C). The first bad batch ends the log: the file is cut there,
   its indexes rebuilt, and every later segment deleted, so offsets stay dense. A segment whose base
   offset overlaps the previous one's data is treated the same way. A rescanned segment's
   `.txnindex` is emptied and marked stale: `ProducerStateManager.load` rebuilds it while replaying
   the segment's transaction markers (Kafka's recoverSegment does the same with a producer state).
4. Recovered segments are fsynced, so the recovery point can move to the log end offset; each is
   reported to the caller's `on_recovered` with its size (the start-up progress, `load_progress`).
5. The leader epoch cache (`leader_epoch`) is read from `leader-epoch-checkpoint` and trimmed to the
   recovered log. Its file is written by flushes, so after a crash it may lag the log both ways:
   it may lack the newest epochs (assigned in memory, not yet written) and may still hold entries
   a truncation removed. So, without a clean shutdown, an entry that a batch of an *older* epoch at
   or after its start offset contradicts is dropped with every later one, and the batch headers
   from the first segment whose last batch carries a newer epoch than the file's latest are
   rescanned (epochs never decrease along a log, so newer epochs can only start there); the file
   then never claims an epoch the log does not hold. A missing or damaged file is rebuilt from the
   headers of every batch (and written by the next flush).

Invariants: the result is a non-empty list of segments sorted by base offset whose offsets do not
overlap; everything on disk past the returned log end offset has been removed.

Callers: `Log.__init__` only (`load_segments`, then `load_leader_epoch_cache`).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from odradek.protocol.records.batch import BatchHeader
from odradek.storage.config import LogConfig
from odradek.storage.file_cache import FileCache
from odradek.storage.index import IndexCorruptError
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    LogSegment,
    file_name,
    iter_file_batches,
)

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def load_segments(
    directory: Path,
    files: FileCache,
    config: LogConfig,
    now_ms: int,
    recovery_point: int,
    clean_shutdown: bool,
    on_recovered: Callable[[int], None] = lambda _size: None,
) -> list[LogSegment]:
    """The segments of `directory`, recovered as the module docstring describes."""
    names = os.listdir(directory)
    if _remove_leftovers(directory, names) or _complete_swaps(directory, names):
        names = os.listdir(directory)
    segments = [LogSegment.open(directory, base, files, config, now_ms) for base in _segment_bases(names)]
    if not segments:
        return []
    bases = [segment.base_offset for segment in segments]
    first_unsafe = len(segments) if clean_shutdown else max(bisect_right(bases, recovery_point) - 1, 0)
    kept: list[LogSegment] = []
    for position, segment in enumerate(segments):
        if kept and segment.base_offset < kept[-1].next_offset:
            _drop(segments[position:])
            break
        if position < first_unsafe:
            truncated = _load_or_rebuild(segment, on_recovered)
        else:
            truncated = _recover(segment, on_recovered)
        kept.append(segment)
        if truncated:
            log.warning(
                "%s: truncated %d bytes of a torn or corrupt tail", segment.path(LOG_SUFFIX), truncated
            )
            _drop(segments[position + 1 :])
            break
    return kept


def load_leader_epoch_cache(
    directory: Path,
    segments: list[LogSegment],
    clean_shutdown: bool,
    log_start_offset: int,
    log_end_offset: int,
) -> LeaderEpochFileCache:
    """The partition's leader epoch cache, made consistent with the loaded `segments` (step 5)."""
    cache = LeaderEpochFileCache.read(directory)
    if cache is None:
        cache = LeaderEpochFileCache(directory)
        _assign_batch_epochs(cache, segments)
    else:
        cache.truncate_from_end(log_end_offset)
        if not clean_shutdown:
            _drop_contradicted_entries(cache, segments)
            _assign_batch_epochs(cache, segments[_first_segment_after_epoch(segments, cache.latest_epoch) :])
    cache.truncate_from_start(log_start_offset)
    return cache


def _drop_contradicted_entries(cache: LeaderEpochFileCache, segments: list[LogSegment]) -> None:
    """Forget the first entry (and every later one) that a batch of an older epoch at or after its
    start offset contradicts: the file is older than a truncation that removed that epoch."""
    bases = [segment.base_offset for segment in segments]
    for epoch, start_offset in cache.entries:
        index = bisect_right(bases, start_offset) - 1
        if index < 0:
            continue
        header = _first_batch_from(segments[index:], start_offset)
        if header is not None and header.partition_leader_epoch < epoch:
            log.warning("%s: epoch %d at %d is not in the log; dropping it", cache.path, epoch, start_offset)
            cache.truncate_from_end(start_offset)
            return


def _first_batch_from(segments: list[LogSegment], offset: int) -> BatchHeader | None:
    for segment in segments:
        header = segment.batch_holding(offset)
        if header is not None:
            return header
    return None


def _first_segment_after_epoch(segments: list[LogSegment], epoch: int) -> int:
    """The index of the first segment whose last batch has an epoch newer than `epoch`: epochs never
    decrease along a log, so every batch of a newer epoch lies in it or after it."""
    low, high = 0, len(segments)
    while low < high:
        middle = (low + high) // 2
        last = segments[middle].batch_holding(segments[middle].next_offset - 1)
        if last is not None and last.partition_leader_epoch > epoch:
            high = middle
        else:
            low = middle + 1
    return low


def _assign_batch_epochs(cache: LeaderEpochFileCache, segments: list[LogSegment]) -> None:
    """Assign the epoch of every batch of `segments` that opens a newer one."""
    for segment in segments:
        for _, header in segment.iter_batches():
            cache.assign_if_newer(header.partition_leader_epoch, header.base_offset)


def _recover(segment: LogSegment, on_recovered: Callable[[int], None]) -> int:
    truncated = segment.recover()
    segment.flush()
    on_recovered(segment.size + truncated)
    return truncated


def _load_or_rebuild(segment: LogSegment, on_recovered: Callable[[int], None]) -> int:
    try:
        segment.load()
    except IndexCorruptError as exc:
        log.warning("rebuilding the indexes of %s: %s", segment.path(LOG_SUFFIX), exc)
        return _recover(segment, on_recovered)
    return 0


def _drop(segments: list[LogSegment]) -> None:
    for segment in segments:
        log.warning("deleting %s: it follows a corruption point", segment.path(LOG_SUFFIX))
        segment.delete(0)


def _segment_bases(names: list[str]) -> list[int]:
    """The base offsets of the `.log` files among the directory entry `names`."""
    bases = []
    for name in names:
        stem, suffix = os.path.splitext(name)
        if suffix == LOG_SUFFIX and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _remove_leftovers(directory: Path, names: list[str]) -> bool:
    """Remove the leftovers among `names` (the directory's entries); True if any went."""
    logs = {name[: -len(LOG_SUFFIX)] for name in names if name.endswith(LOG_SUFFIX)}
    removed = False
    for name in names:
        stem, suffix = os.path.splitext(name)
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)) or (suffix in INDEX_SUFFIXES and stem not in logs):
            (directory / name).unlink()
            removed = True
    return removed


def _complete_swaps(directory: Path, names: list[str]) -> bool:
    """Finish the swaps whose `.log.swap` is among `names`; True if there was any."""
    swaps = sorted(name for name in names if name.endswith(LOG_SUFFIX + SWAP_SUFFIX))
    for name in swaps:
        swap = directory / name
        base = int(name[: -len(LOG_SUFFIX + SWAP_SUFFIX)])
        next_offset = _scan_next_offset(swap, base)
        for other in _segment_bases(os.listdir(directory)):
            if base <= other < next_offset:
                for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
                    (directory / file_name(other, suffix)).unlink(missing_ok=True)
        for suffix in INDEX_SUFFIXES:
            (directory / file_name(base, suffix + SWAP_SUFFIX)).unlink(missing_ok=True)
            (directory / file_name(base, suffix)).unlink(missing_ok=True)
        os.rename(swap, directory / file_name(base, LOG_SUFFIX))
        log.info("%s: swapped in a finished cleaning", swap)
    return bool(swaps)


def _scan_next_offset(path: Path, base: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        next_offset = base
        for _, header in iter_file_batches(fd, 0, os.fstat(fd).st_size):
            next_offset = header.next_offset
        return next_offset
    finally:
        os.close(fd)
