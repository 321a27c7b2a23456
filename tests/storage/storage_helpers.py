"""Shared helpers for the storage tests: batches to append and reading FileSlices back."""

from __future__ import annotations

import os
from pathlib import Path

from odradek.clock import ManualClock
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.record import Record, decode_records
from odradek.storage.config import LogConfig
from odradek.storage.log import FetchDataInfo, Log


def batch(
    count: int = 1,
    value_size: int = 10,
    timestamp: int = 1_000,
    codec: CompressionType = CompressionType.NONE,
) -> bytes:
    return build_batch(
        [SimpleRecord(b"v" * value_size, b"k%d" % i, (), timestamp) for i in range(count)], codec
    )


def slice_bytes(info: FetchDataInfo) -> bytes:
    return b"".join(os.pread(part.fd, part.length, part.offset) for part in info.records)


def read_records(info: FetchDataInfo) -> list[Record]:
    return decode_records(slice_bytes(info))


def open_log(path: Path, clock: ManualClock | None = None, **config: int | str) -> Log:
    return Log(path / "topic-0", LogConfig(**config), clock or ManualClock())  # type: ignore[arg-type]
