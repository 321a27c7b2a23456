"""Opening a partition directory: leftovers, segment loading and crash recovery.

Owns the start-up procedure for one log directory:
1. Leftovers: `*.deleted` and `*.cleaned` files are removed (a deletion or a cleaning that did not
   finish); a `*.log.swap` (a finished cleaning not yet swapped in) replaces the segments whose base
   offsets fall in its offset range and its indexes are rebuilt; index files without a `.log` go.
2. Segments below the recovery point are trusted: their indexes are loaded and sanity-checked
   (whole entries, increasing, nothing past the end of the data), and rebuilt from the log if not.
3. Without a clean shutdown, every segment from the one holding the recovery point on is rescanned
   batch by batch (header sanity + CRC32C). The first bad batch ends the log: the file is cut there,
   its indexes rebuilt, and every later segment deleted, so offsets stay dense. A segment whose base
   offset overlaps the previous one's data is treated the same way.
4. Recovered segments are fsynced, so the recovery point can move to the log end offset.
5. The leader epoch cache (`leader_epoch`) is read from `leader-epoch-checkpoint` and trimmed to the
   recovered log; after a crash the batch headers of the rescanned segments add any newer epoch; a
   missing or damaged file is rebuilt from the headers of every batch and written again.

Invariants: the result is a non-empty list of segments sorted by base offset whose offsets do not
overlap; everything on disk past the returned log end offset has been removed.

Callers: `Log.__init__` only (`load_segments`, then `load_leader_epoch_cache`).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from odradek.storage.config import LogConfig
from odradek.storage.index import IndexCorruptError
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.reaper import FdReaper
from odradek.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    RECOVERY_CHUNK,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
    iter_file_batches,
)

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def load_segments(
    directory: Path, config: LogConfig, now_ms: int, recovery_point: int, clean_shutdown: bool
) -> list[LogSegment]:
    """The segments of `directory`, recovered as the module docstring describes."""
    _remove_leftovers(directory)
    _complete_swaps(directory)
    segments = [LogSegment.open(directory, base, config, now_ms) for base in _segment_bases(directory)]
    if not segments:
        return []
    bases = [segment.base_offset for segment in segments]
    first_unsafe = len(segments) if clean_shutdown else max(bisect_right(bases, recovery_point) - 1, 0)
    kept: list[LogSegment] = []
    for position, segment in enumerate(segments):
        if kept and segment.base_offset < kept[-1].next_offset:
            _drop(segments[position:])
            break
        truncated = _load_or_rebuild(segment) if position < first_unsafe else _recover(segment)
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
    recovery_point: int,
    clean_shutdown: bool,
    log_start_offset: int,
    log_end_offset: int,
) -> LeaderEpochFileCache:
    """The partition's leader epoch cache, made consistent with the loaded `segments` (step 5)."""
    cache = LeaderEpochFileCache.read(directory)
    rebuild = cache is None
    if cache is None:
        cache = LeaderEpochFileCache(directory)
    cache.truncate_from_end(log_end_offset)
    if rebuild or not clean_shutdown:
        _assign_batch_epochs(cache, segments, 0 if rebuild else recovery_point)
    cache.truncate_from_start(log_start_offset)
    if rebuild:
        cache.write()
    return cache


def _assign_batch_epochs(cache: LeaderEpochFileCache, segments: list[LogSegment], from_offset: int) -> None:
    """Assign the epoch of every batch that opens a newer one, in the segments holding offsets from
    `from_offset` on."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        for _, header in iter_file_batches(segment.fd, 0, segment.size, chunk_size=RECOVERY_CHUNK):
            cache.assign_if_newer(header.partition_leader_epoch, header.base_offset)


def _recover(segment: LogSegment) -> int:
    truncated = segment.recover()
    segment.flush()
    return truncated


def _load_or_rebuild(segment: LogSegment) -> int:
    try:
        segment.load()
    except IndexCorruptError as exc:
        log.warning("rebuilding the indexes of %s: %s", segment.path(LOG_SUFFIX), exc)
        return _recover(segment)
    return 0


def _drop(segments: list[LogSegment]) -> None:
    reaper = FdReaper()
    for segment in segments:
        log.warning("deleting %s: it follows a corruption point", segment.path(LOG_SUFFIX))
        segment.delete(reaper, 0)
    reaper.close_all()


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for path in directory.iterdir():
        if path.suffix == LOG_SUFFIX and path.stem.isdigit():
            bases.append(int(path.stem))
    return sorted(bases)


def _remove_leftovers(directory: Path) -> None:
    logs = {path.stem for path in directory.glob(f"*{LOG_SUFFIX}")}
    for path in list(directory.iterdir()):
        if path.name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
            path.unlink()
        elif path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and path.stem not in logs:
            path.unlink()


def _complete_swaps(directory: Path) -> None:
    for swap in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = int(swap.name[: -len(LOG_SUFFIX + SWAP_SUFFIX)])
        next_offset = _scan_next_offset(swap, base)
        for other in _segment_bases(directory):
            if base <= other < next_offset:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    (directory / file_name(other, suffix)).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / file_name(base, suffix + SWAP_SUFFIX)).unlink(missing_ok=True)
            (directory / file_name(base, suffix)).unlink(missing_ok=True)
        os.rename(swap, directory / file_name(base, LOG_SUFFIX))
        log.info("%s: swapped in a finished cleaning", swap)


def _scan_next_offset(path: Path, base: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        next_offset = base
        for _, header in iter_file_batches(fd, 0, os.fstat(fd).st_size):
            next_offset = header.next_offset
        return next_offset
    finally:
        os.close(fd)
