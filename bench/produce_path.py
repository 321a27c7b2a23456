"""In-process cost of the data path below the network: ReplicaManager appends and fetches.

For batches of 1, 16 and 256 records of 1 KiB (built once, reused), a ReplicaManager over a real
LogManager in a temporary directory appends N batches with acks=1 and acks=-1 (single replica: the
high watermark moves on append, so acks=-1 completes at once through the produce purgatory), then
fetches the whole log back from offset 0 in partition_max_bytes=1 MiB steps (max_wait_ms 0). Timed
with perf_counter after a warm-up; prints microseconds per call and MB/s of record bytes (for fetches
the bytes the returned file ranges cover: a fetch moves no data here, the network layer sendfiles it).
No sockets, no codec: this is what the broker adds per request on top of framing and decoding.

Run `python bench/produce_path.py [--batches N]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.channel import ControllerIdentity, leader_and_isr_request
from odradek.controller.metadata import PartitionState
from odradek.controller.waiters import wait_until
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.replication.partition import READ_UNCOMMITTED
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.types import FetchPartitionRequest
from odradek.server.metadata_cache import MetadataCache
from odradek.storage.config import LogConfig
from odradek.storage.manager import LogManager

RECORD = bytes(1024)
MIB = 1 << 20


async def measure(root: Path, records_per_batch: int, batches: int) -> str:
    log_manager = LogManager([root], LogConfig(), SYSTEM_CLOCK)
    manager = ReplicaManager(0, log_manager, MetadataCache(0), SYSTEM_CLOCK, checkpoint_interval_ms=0)
    manager.start()
    topics = {"bench": (uuid.uuid4(), {0: PartitionState(0, 0, (0,), (0,), 1, 0)})}
    manager.become_leader_or_follower(leader_and_isr_request(ControllerIdentity(0, 1), topics, []))
    await wait_until(lambda: manager.serves_as_leader("bench", 0), 30, manager.ready_changed)
    batch = memoryview(build_batch([SimpleRecord(RECORD)] * records_per_batch))
    key = ("bench", 0)
    for _ in range(batches // 4):  # warm up: first touch of fresh pages is much slower than reuse
        await manager.append_records({key: batch}, 1, 30_000)
    timings = []
    for acks in (1, -1):
        start = time.perf_counter()
        for _ in range(batches):
            await manager.append_records({key: batch}, acks, 30_000)
        timings.append(time.perf_counter() - start)
    fetches, offset, fetched = 0, 0, 0
    end = manager.partition(*key).high_watermark
    start = time.perf_counter()
    while offset < end:
        request = FetchPartitionRequest("bench", 0, offset, MIB)
        [result] = await manager.fetch_messages([request], 1, 50 * MIB, 0, READ_UNCOMMITTED)
        fetched += result.size
        offset += max(1, result.size // len(batch)) * records_per_batch
        fetches += 1
    fetch_s = time.perf_counter() - start
    await manager.shutdown()
    log_manager.shutdown()
    mb = batches * len(batch) / 1e6
    return (
        f"| {records_per_batch} x 1 KiB | {timings[0] / batches * 1e6:.1f} | {mb / timings[0]:,.0f} "
        f"| {timings[1] / batches * 1e6:.1f} | {mb / timings[1]:,.0f} "
        f"| {fetch_s / fetches * 1e6:.1f} | {fetched / 1e6 / fetch_s:,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000, help="batches per size and acks mode")
    args = parser.parse_args()
    print("| batch | acks=1 us/append | MB/s | acks=-1 us/append | MB/s | us/fetch | fetch MB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for records_per_batch in (1, 16, 256):
        with tempfile.TemporaryDirectory(prefix="odradek-produce-path-") as root:
            batches = max(10, args.batches // max(1, records_per_batch // 16))
            print(asyncio.run(measure(Path(root), records_per_batch, batches)))


if __name__ == "__main__":
    main()
