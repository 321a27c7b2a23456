"""Offset checkpoint files at the root of a log dir, in Kafka's text format.

Owns `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` (and any other per-partition
offset file of the same shape):

    0                      <- format version
    2                      <- number of entries
    my-topic 0 1234        <- topic, partition, offset
    my-topic 1 99

Invariants: a checkpoint is replaced atomically (write `<name>.tmp`, fsync, rename, fsync the dir), so
a reader sees the old or the new file, never a mix. A file that does not parse is reported and read
as empty, which only costs a longer recovery (recovery points default to 0).

`write_entries` / `entry_lines` are the framing alone (version line, count line, entries), shared
with the per-partition `leader-epoch-checkpoint` (`leader_epoch`), whose entries are `epoch offset`.

Callers: `LogManager`; replication for `replication-offset-checkpoint`; the log cleaner for
`cleaner-offset-checkpoint`; `leader_epoch` for the framing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from odradek.durable_file import write_atomically
from odradek.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CHECKPOINT_VERSION = 0


def write_checkpoint(
    path: Path, offsets: Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]
) -> None:
    write_entries(
        path, [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    )


def write_entries(path: Path, entries: list[str], sync_dir: bool = True) -> None:
    """Replace the file at `path` atomically with Kafka's checkpoint framing around `entries`: the
    version line, the count line, one line per entry (also the leader-epoch checkpoint's format)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *entries]
    write_atomically(path, ("\n".join(lines) + "\n").encode(), sync_dir)


def entry_lines(text: str) -> list[str]:
    """The entry lines of a checkpoint file's `text`; ValueError when the version or count is wrong."""
    lines = text.splitlines()
    if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError("missing or unknown version line")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
    return lines[2:]


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The entries of the checkpoint at `path`; empty when it is missing or malformed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        return _parse(entry_lines(text))
    except ValueError as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


def _parse(lines: list[str]) -> dict[TopicPartition, int]:
    offsets = {}
    for line in lines:
        topic, partition, offset = line.split(" ")
        offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets
