"""Storage benchmark: Log.append_as_leader and Log.read against raw sequential file writes.

For 1 KiB and 16 KiB batches it measures, in the same run and directory:
- raw: os.write of the same bytes to a file, the ceiling for the append path;
- validate+patch: validate_records + the copy + assign_offsets, no I/O (the per-batch CPU cost);
- append: Log.append_as_leader (validation, CRC32C, copy, offset patch, one pwrite, index upkeep);
- read: Log.read of one batch at random offsets (index lookup + header scan), returning FileSlices.
Each figure is the median of 3 runs after a warm-up. Nothing is fsynced (Kafka's default flush policy).

Usage: python bench/storage_append.py [--mib 128] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.records.batch import assign_offsets
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.validation import validate_records
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

RUNS = 3


def make_batch(size: int) -> bytes:
    """An uncompressed batch of exactly `size` bytes holding records of ~100 bytes."""
    count, pad = max(size // 120, 1), 0
    while True:
        values = [os.urandom(80) for _ in range(count - 1)] + [os.urandom(80 + pad)]
        batch = build_batch(
            [SimpleRecord(v, b"key-%04d" % i, (), 1_700_000_000_000) for i, v in enumerate(values)]
        )
        if len(batch) == size:
            return batch
        pad += size - len(batch)


Case = Callable[[], tuple[float, int]]


def raw_write(directory: Path, batch: bytes, count: int) -> Case:
    def run() -> tuple[float, int]:
        fd = os.open(directory / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, batch)
        elapsed = time.perf_counter() - start
        os.close(fd)
        return elapsed, count

    return run


def validate_patch(batch: bytes, count: int) -> Case:
    def run() -> tuple[float, int]:
        view = memoryview(batch)
        start = time.perf_counter()
        for offset in range(count):
            validated = validate_records(view, 1 << 20)
            assign_offsets(bytearray(view), validated, offset, 0)
        return time.perf_counter() - start, count

    return run


def append(directory: Path, batch: bytes, count: int) -> Case:
    def run() -> tuple[float, int]:
        shutil.rmtree(directory / "bench-0", ignore_errors=True)
        log = Log(directory / "bench-0", LogConfig(), SYSTEM_CLOCK)
        view = memoryview(batch)
        start = time.perf_counter()
        for _ in range(count):
            log.append_as_leader(view, 0)
        elapsed = time.perf_counter() - start
        log.close()
        return elapsed, count

    return run


def read(directory: Path, batch: bytes, count: int, reads: int) -> Case:
    shutil.rmtree(directory / "read-0", ignore_errors=True)
    log = Log(directory / "read-0", LogConfig(segment_bytes=64 << 20), SYSTEM_CLOCK)
    for _ in range(count):
        log.append_as_leader(batch, 0)
    offsets = [random.randrange(log.log_end_offset) for _ in range(reads)]

    def run() -> tuple[float, int]:
        start = time.perf_counter()
        for offset in offsets:
            log.read(offset, len(batch))
        return time.perf_counter() - start, reads

    return run


def report(name: str, size: int, case: Case) -> None:
    case()  # warm-up
    results = [case() for _ in range(RUNS)]
    seconds = statistics.median(result[0] for result in results)
    rate = results[0][1] / seconds
    print(f"{name:<16} {size:>6} B  {rate:>12,.0f} ops/s  {rate * size / 1e6:>9,.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=128, help="bytes appended per run (MiB)")
    parser.add_argument("--dir", default=None, help="directory for the files (default: a temp dir)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    try:
        print(f"{args.mib} MiB per run, median of {RUNS} runs, in {directory}")
        for size in (1024, 16 * 1024):
            batch = make_batch(size)
            count = (args.mib << 20) // len(batch)
            report("raw os.write", len(batch), raw_write(directory, batch, count))
            report("validate+patch", len(batch), validate_patch(batch, count))
            report("append", len(batch), append(directory, batch, count))
            report("read (1 batch)", len(batch), read(directory, batch, min(count, 20_000), 20_000))
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
