"""Durable small-file writes (temp file, fsync, rename, fsync of the directory) and directory fsyncs.

Invariant: after `write_atomically` returns, the file holds either its old or its new content in full,
across a crash at any point. When it raises (ENOSPC...) the file is unchanged and no temp file is
left. A leaf module (imports nothing of odradek), so every layer may use it.
Callers: controller (metadata JSON, meta.properties, producer id blocks), storage (offset
checkpoints, leader-epoch checkpoints, the clean shutdown marker; `fsync_dir` after segment renames
and the cleaner's swaps), the Spark pipeline's table loads.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes, sync_dir: bool = True) -> None:
    """Replace `path` with `data`. With `sync_dir=False` the rename is durable only once the
    caller fsyncs the directory (a log's flush does it once for all its renames)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        _write_synced(tmp, data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half-written temp file taking its space
        raise
    if sync_dir:
        fsync_dir(path.parent)


def _write_synced(path: Path, data: bytes) -> None:
    """Write all of `data` (a short write on a filling disk is continued until it raises) and fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries (files created, renamed or deleted in it) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
