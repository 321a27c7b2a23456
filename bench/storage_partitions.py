"""Storage benchmark: the cost of many partitions, to create them and to load them at start.

Phases, each timed, with the peak number of open fds of the process (sampled from /proc/self/fd
every 2 ms by a side thread):
- create: LogManager.get_or_create_log for N new partitions from `--threads` worker threads, then
  one small batch appended to each (`--no-append` leaves them empty);
- shutdown: LogManager.shutdown (flush, close, checkpoints, clean shutdown marker);
- open: constructing a LogManager over the N partition directories;
- load (clean): loading every partition after the clean shutdown (`load_logs` with `--threads`);
- load (unclean): the same after removing the clean shutdown marker (recovery of each log from its
  recovery point, as after a crash).
`--max-open-files` sets the file cache's budget (default: the LogManager's own, half of
RLIMIT_NOFILE). The same script runs against a tree without `load_logs` (an older LogManager that
loads every log in its constructor): its "open" phase is then the load.

Usage: python bench/storage_partitions.py [--partitions 10000] [--threads 4] [--dir /tmp]
       [--max-open-files N] [--no-append]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.storage.config import LogConfig
from odradek.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

TOPIC = "bench"


class FdPeak:
    """Samples the process's open fd count in a thread while a phase runs."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> FdPeak:
        self.peak = len(os.listdir("/proc/self/fd"))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, len(os.listdir("/proc/self/fd")))

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, len(os.listdir("/proc/self/fd")))


def phase(name: str, partitions: int, action: Callable[[], object]) -> None:
    with FdPeak() as fds:
        start = time.perf_counter()
        action()
        elapsed = time.perf_counter() - start
    rate = f"{partitions / elapsed:10.0f} partitions/s" if partitions else " " * 23
    print(f"{name:<16} {elapsed:8.2f} s  {rate}  peak open fds {fds.peak}")


def make_manager(root: Path, max_open_files: int | None) -> LogManager:
    extra = {} if max_open_files is None else {"max_open_files": max_open_files}
    return LogManager([root], LogConfig(), SYSTEM_CLOCK, **extra)  # type: ignore[arg-type]


def create_all(manager: LogManager, partitions: int, threads: int, append: bool) -> None:
    batch = build_batch([SimpleRecord(b"v" * 100, b"k", (), 1_700_000_000_000)])

    def create(partition: int) -> None:
        log = manager.get_or_create_log(TOPIC, partition)
        if append:
            log.append_as_leader(batch, 0)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(partitions)))


def load_all(manager: LogManager, partitions: int, threads: int) -> None:
    if hasattr(manager, "load_logs"):
        loaded = sum(1 for _ in manager.load_logs([(TOPIC, p) for p in range(partitions)], threads))
    else:
        loaded = len(manager.all_logs())  # an older LogManager loaded everything when constructed
    assert loaded == partitions, loaded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--max-open-files", type=int, default=None)
    parser.add_argument("--no-append", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-partitions-", dir=args.dir))
    count, threads = args.partitions, args.threads
    print(f"{count} partitions, {threads} threads, in {root}")
    try:
        holder: dict[str, LogManager] = {}

        def construct() -> None:
            holder["manager"] = make_manager(root, args.max_open_files)

        phase("open (empty)", 0, construct)
        phase("create", count, lambda: create_all(holder["manager"], count, threads, not args.no_append))
        phase("shutdown", count, lambda: holder["manager"].shutdown())
        for name in ("clean", "unclean"):
            if name == "unclean":
                (root / CLEAN_SHUTDOWN_FILE).unlink()
            phase(f"open ({name})", count, construct)
            phase(f"load ({name})", count, lambda: load_all(holder["manager"], count, threads))
            phase("shutdown", count, lambda: holder["manager"].shutdown())
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
