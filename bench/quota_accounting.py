"""The cost of client quota accounting per request (server/client_quotas.py, the dispatcher's quota
stage), against the cost of a one-record Produce, and the memory of idle quota groups.

Three settings, each measured two ways:
- off: no quota set (the broker's default);
- one group: producer_byte_rate for client id `bench` (high enough never to throttle);
- 10,000 client ids: a default client-id producer_byte_rate (each client id a group of its own),
  the requests cycling through 10,000 client ids.
In process: the CPU time (time.thread_time_ns) of the quota stage for one Produce
(`ClientQuotas.record_request` as the dispatcher calls it), per call, median of --runs, the groups
made before the runs (a client id's first request, which makes its group, is measured on its own:
10,000 new client ids, one request each); and, with a
request_percentage quota set, what timing a handler step by step (`HandlingTimer`) adds to a bare
await. Against a broker process: the broker's CPU time (user + system, /proc/<pid>/stat) per
one-record Produce (acks=1, 100 bytes), sent pipelined on one connection (bench/metrics_overhead.py's
helpers), for each setting on a fresh broker; the difference to `off` is the accounting's cost.
Memory: the traced memory (tracemalloc) of 10,000 groups, then after their window has passed and
one more request swept them.

Run `python bench/quota_accounting.py [--calls 200000] [--requests 20000] [--runs 5]` from the
repository root. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from metrics_overhead import _SIZE, PIPELINE, TOPIC, cpu_seconds, frame, read_frames  # noqa: E402

from odradek.protocol.api_keys import ApiKey  # noqa: E402
from odradek.protocol.codec import encode_request  # noqa: E402
from odradek.protocol.headers import RequestHeader, encode_request_header  # noqa: E402
from odradek.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from odradek.protocol.messages.produce import ProduceRequest  # noqa: E402
from odradek.protocol.records.builder import SimpleRecord, build_batch  # noqa: E402
from odradek.security.principal import ANONYMOUS  # noqa: E402
from odradek.server.client_quotas import ClientQuotas, HandlingTimer, QuotaWindow  # noqa: E402
from odradek.testing.broker import BrokerProcess  # noqa: E402

CLIENT_IDS = 10_000
HIGH_RATE = 10**15  # never throttles
SETTINGS = ("off", "one group", "10,000 client ids")
QUOTA_OPTIONS = {
    "off": None,
    "one group": ("--entity-type", "clients", "--entity-name", "bench"),
    "10,000 client ids": ("--entity-type", "clients", "--entity-default"),
}


def quotas_for(setting: str) -> ClientQuotas:
    quotas = ClientQuotas(QuotaWindow())
    limits = {
        "off": {},
        "one group": {(("client-id", "bench"),): float(HIGH_RATE)},
        "10,000 client ids": {(("client-id", None),): float(HIGH_RATE)},
    }[setting]
    quotas.produce.set_limits(limits)
    return quotas


def contexts(setting: str) -> list[SimpleNamespace]:
    count = CLIENT_IDS if setting == "10,000 client ids" else 1
    return [
        SimpleNamespace(header=RequestHeader(ApiKey.PRODUCE, 9, 1, f"bench-{i}" if count > 1 else "bench"),
                        principal=ANONYMOUS)
        for i in range(count)
    ]  # fmt: skip


def stage_ns(quotas: ClientQuotas, ctxs: list[SimpleNamespace], calls: int) -> float:
    """CPU ns of the quota stage of one Produce (its bytes recorded, no request quota), cycling
    through `ctxs`."""
    count = len(ctxs)
    started = time.thread_time_ns()
    for i in range(calls):
        quotas.record_request(ctxs[i % count], 180, 0)  # type: ignore[arg-type]
    return (time.thread_time_ns() - started) / calls


def steady_stage_runs(setting: str, calls: int, runs: int) -> list[float]:
    """`stage_ns` runs on one ClientQuotas whose groups exist already (one warm-up call per client
    id first), as on a broker its clients keep sending to."""
    quotas, ctxs = quotas_for(setting), contexts(setting)
    for ctx in ctxs:
        quotas.record_request(ctx, 180, 0)  # type: ignore[arg-type]
    return [stage_ns(quotas, ctxs, calls) for _ in range(runs)]


def first_request_ns() -> float:
    """CPU ns of a new client id's first request under a default client-id quota: its level looked
    up and its group made (10,000 new client ids, one request each)."""
    setting = "10,000 client ids"  # a fresh ClientQuotas: every client id is new to it
    return stage_ns(quotas_for(setting), contexts(setting), CLIENT_IDS)


def timer_ns(calls: int) -> tuple[float, float]:
    """CPU ns per awaited trivial handler: bare, and through a HandlingTimer."""

    async def handler() -> int:
        return 1

    async def bare() -> None:
        for _ in range(calls):
            await handler()

    async def timed() -> None:
        for _ in range(calls):
            await HandlingTimer(handler())

    results = []
    for run in (bare, timed):
        started = time.thread_time_ns()
        asyncio.run(run())
        results.append((time.thread_time_ns() - started) / calls)
    return results[0], results[1]


def idle_memory() -> tuple[int, int, int]:
    """(traced bytes with 10,000 groups, after they were swept, groups left)."""
    quotas = quotas_for("10,000 client ids")
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(CLIENT_IDS):
        quotas.produce.record("ANONYMOUS", f"idle-{i}", 100, 0.0)
    full = tracemalloc.get_traced_memory()[0] - base
    quotas.produce.record("ANONYMOUS", "late", 100, QuotaWindow().total_ms + 1.0)
    swept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return full, swept, len(list(quotas.produce.groups()))


def broker_us(setting: str, requests: int) -> float:
    """Broker CPU us per one-record Produce with the setting's quota."""
    with tempfile.TemporaryDirectory() as root, BrokerProcess(Path(root) / "data") as broker:
        assert broker.pid is not None
        options = QUOTA_OPTIONS[setting]
        if options is not None:
            subprocess.run(
                [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", broker.bootstrap,
                 "--alter", "--add-config", f"producer_byte_rate={HIGH_RATE}", *options],
                check=True, capture_output=True,
            )  # fmt: skip
        with socket.create_connection((broker.host, broker.port)) as sock:
            topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
            sock.sendall(
                frame(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=10000), 1)
            )
            read_frames(sock, 1)
            frames = produce_frames([c.header.client_id for c in contexts(setting)])
            produce_cpu_us(sock, broker.pid, frames, requests // 10)  # warm-up
            return produce_cpu_us(sock, broker.pid, frames, requests)


def produce_cpu_us(sock: socket.socket, pid: int, frames: list[bytes], count: int) -> float:
    """Broker CPU us per request, sending `count` requests pipelined PIPELINE at a time, cycling
    through `frames`."""
    start = cpu_seconds(pid)
    for sent in range(0, count, PIPELINE):
        batch = min(PIPELINE, count - sent)
        sock.sendall(b"".join(frames[(sent + i) % len(frames)] for i in range(batch)))
        read_frames(sock, batch)
    return (cpu_seconds(pid) - start) / count * 1e6


def produce_frames(client_ids: list[str]) -> list[bytes]:
    """A one-record Produce frame (acks=1, 100 bytes) per client id."""
    batch = build_batch([SimpleRecord(bytes(100))])
    produce = ProduceRequest(
        acks=1,
        timeout_ms=10000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    body = encode_request(ApiKey.PRODUCE, 9, produce)
    framed = []
    for client_id in client_ids:
        data = encode_request_header(RequestHeader(ApiKey.PRODUCE, 9, 2, client_id)) + body
        framed.append(_SIZE.pack(len(data)) + data)
    return framed


def joined(runs: list[float], spec: str) -> str:
    return ", ".join(format(r, spec) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("quota stage of one Produce, in process (CPU ns per call, median of runs):")
    for setting in SETTINGS:
        runs = steady_stage_runs(setting, args.calls, args.runs)
        print(f"  {setting:>18}: {statistics.median(runs):8.0f} ns   runs: {joined(runs, '.0f')}")
    print(f"a new client id's first request (its group made): {first_request_ns():.0f} ns")
    bare, timed = timer_ns(args.calls)
    print(
        f"request_percentage on: a handler awaited bare {bare:.0f} ns, through HandlingTimer {timed:.0f} ns"
    )
    full, swept, left = idle_memory()
    print(
        f"10,000 idle groups: {full / 1024:.0f} KiB traced; after their window: {swept / 1024:.0f} KiB,",
        end="",
    )
    print(f" {left} left")
    print("broker CPU per one-record Produce (us, median of runs):")
    for setting in SETTINGS:
        runs = [broker_us(setting, args.requests) for _ in range(args.runs)]
        print(f"  {setting:>18}: {statistics.median(runs):7.1f} us   runs: {joined(runs, '.1f')}")


if __name__ == "__main__":
    main()
