"""How many Produce requests one socket read brings, and how many of them write a partition that an
earlier request of the same read writes too: what one append per partition per read could save.

One odradek broker process (single node), its connections counted from inside: the broker is started
with a `sitecustomize` (in a temporary directory put first on its PYTHONPATH) that wraps
`Connection._enqueue`, the step that hands the frames cut from one read to the connection's worker,
and parses each Produce frame's topics and partition indexes (no records are decoded). Per read
holding a Produce it counts the Produce requests, the partitions they name and the distinct ones; a
partition named again within one read is an append that one write per partition per read would
fold into an earlier one. The broker dumps and resets its counts on SIGUSR1, so each rate gets its
own. The traffic is bench/latency.py's keyed shape (one topic of 100 partitions, 1 KiB records keyed
over 1,000,000 keys, acks=all, linger.ms 1, a librdkafka producer and consumer in their own
processes), whose producer sends one partition per Produce.

Run `python bench/produce_reads.py [--rates 5,10,20,max] [--seconds 10] [--partitions 100]` from the
repository root. The parsing costs the broker a few microseconds per request, so its latency figures
(printed too) are not the uninstrumented broker's. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import latency  # bench/latency.py

from odradek.protocol.primitives import ProtocolDecodeError, read_tagged_fields, read_unsigned_varint
from odradek.testing.broker import BrokerProcess

BENCH = Path(__file__).resolve().parent
STATS_ENV = "ODRADEK_PRODUCE_READS_OUT"
PRODUCE = 0
FLEXIBLE_VERSION = 9  # Produce v9+: compact strings and arrays, tagged fields, request header v2

SITECUSTOMIZE = f"""\
import os, sys
if os.environ.get({STATS_ENV!r}) and "serve" in getattr(sys, "orig_argv", ()):
    sys.path.insert(0, {str(BENCH)!r})
    import produce_reads
    produce_reads.install(os.environ[{STATS_ENV!r}])
"""


# -- inside the broker ---------------------------------------------------------------------------


class _Reader:
    """Reads a Produce frame's fields in order, skipping what is not counted."""

    def __init__(self, frame: bytes | bytearray | memoryview, flexible: bool) -> None:
        self.frame, self.pos, self.flexible = frame, 0, flexible

    def int(self, size: int) -> int:
        value = int.from_bytes(self.frame[self.pos : self.pos + size], "big", signed=True)
        self.pos += size
        return value

    def uvarint(self) -> int:
        value, self.pos = read_unsigned_varint(self.frame, self.pos)
        return value

    def length(self, classic_size: int) -> int:
        """A string's, bytes' or array's length (-1 for null)."""
        return self.uvarint() - 1 if self.flexible else self.int(classic_size)

    def string(self) -> bytes:
        size = max(self.length(2), 0)
        value = bytes(self.frame[self.pos : self.pos + size])
        self.pos += size
        return value

    def skip(self, size: int) -> None:
        self.pos += max(size, 0)

    def skip_tags(self) -> None:
        if self.flexible:
            self.pos = read_tagged_fields(self.frame, self.pos)[1]


def produce_partitions(frame: bytes | bytearray | memoryview) -> list[tuple[bytes, int]] | None:
    """The (topic, partition) pairs a Produce frame writes, or None for another request."""
    if int.from_bytes(frame[0:2], "big") != PRODUCE:
        return None
    reader = _Reader(frame, int.from_bytes(frame[2:4], "big") >= FLEXIBLE_VERSION)
    reader.pos = 8  # api key, version, correlation id
    reader.skip(reader.int(2))  # client id: a classic nullable string in every header
    reader.skip_tags()
    reader.string()  # transactional id
    reader.pos += 6  # acks, timeout_ms
    written = []
    for _ in range(reader.length(4)):
        topic = reader.string()
        for _ in range(reader.length(4)):
            written.append((topic, reader.int(4)))
            reader.skip(reader.length(4))  # the records
            reader.skip_tags()
        reader.skip_tags()
    return written


def install(out: str) -> None:
    """Wrap the broker's `Connection._enqueue` to count each read's Produce requests; SIGUSR1 writes
    the counts to `out` (one JSON line) and starts them again."""
    from odradek.server import socket_server

    counts: Counter[str] = Counter()
    per_read: Counter[int] = Counter()
    enqueue = socket_server.Connection._enqueue

    def counting(self: socket_server.Connection, frames: list[bytearray], held: bool = False) -> None:
        try:
            written = [pair for frame in frames for pair in produce_partitions(frame) or ()]
        except (IndexError, ProtocolDecodeError):  # a frame misread is counted, never fails the read
            counts["unparsed reads"] += 1
            written = []
        if written:
            counts["reads"] += 1
            counts["requests"] += sum(1 for frame in frames if frame[0:2] == b"\x00\x00")
            counts["partitions"] += len(written)
            counts["distinct"] += len(set(written))
            per_read[len(written)] += 1
        enqueue(self, frames, held)

    def dump(signum: int, frame: object) -> None:
        with open(out, "a") as file:
            file.write(json.dumps({**counts, "per_read": sorted(per_read.items())}) + "\n")
        counts.clear()
        per_read.clear()

    socket_server.Connection._enqueue = counting  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, dump)


# -- the bench -----------------------------------------------------------------------------------


def read_counts(broker: BrokerProcess, out: Path) -> dict[str, object]:
    """Ask the broker for its counts since the last call, and read them."""
    lines = len(out.read_text().splitlines()) if out.exists() else 0
    os.kill(broker.pid or 0, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        written = out.read_text().splitlines() if out.exists() else []
        if len(written) > lines:
            return json.loads(written[-1])
        time.sleep(0.05)
    raise RuntimeError("the broker wrote no counts")


def describe(rate: float, counts: dict[str, object]) -> str:
    reads, partitions, distinct = (int(counts.get(name, 0)) for name in ("reads", "partitions", "distinct"))  # type: ignore[call-overload]
    if not reads:
        return f"target {rate or 'max'}: no Produce read"
    per_read = dict(counts["per_read"])  # type: ignore[call-overload]
    single = per_read.get(1, 0) / reads
    return (
        f"target {rate or 'max'!s:>4} MB/s: {reads:,} reads with a Produce, {partitions:,} partition "
        f"writes, {partitions / reads:.1f} per read (at most {max(per_read)}; {single:.0%} of reads hold "
        f"one); {distinct:,} distinct partitions per read summed: {1 - distinct / partitions:.1%} of the "
        "writes name a partition an earlier request of the same read writes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="5,10,20,max", help="MB/s, or max")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--key-space", type=int, default=1_000_000)
    args = parser.parse_args()
    options = argparse.Namespace(
        partitions=args.partitions,
        seconds=args.seconds,
        acks_only=False,
        keyed=True,
        key_space=args.key_space,
    )
    with tempfile.TemporaryDirectory(prefix="odradek-produce-reads-") as root:
        (Path(root) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        out = Path(root) / "counts.jsonl"
        paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), STATS_ENV: str(out)}
        overrides = latency.metrics_listener()
        broker = BrokerProcess(
            Path(root) / "data", output_path=Path(root) / "broker.out", overrides=overrides, env=env
        )
        with broker:
            print(
                f"{args.partitions} partitions, keyed, 1 KiB records, {args.seconds:g} s per rate", flush=True
            )
            for index, rate in enumerate(0.0 if r == "max" else float(r) for r in args.rates.split(",")):
                topic = f"produce-reads-{index}-{time.time_ns()}"
                latency.create_topic(broker.bootstrap, topic, args.partitions, 1)
                read_counts(broker, out)  # drop what topic creation counted
                metrics = [f"{overrides['http.listeners']}/metrics"]
                result = latency.measure((broker.bootstrap, [broker.pid or 0], metrics), topic, rate, options)
                print(describe(rate, read_counts(broker, out)), flush=True)
                print(
                    f"  {result.line() if isinstance(result, latency.LatencyResult) else result}", flush=True
                )


if __name__ == "__main__":
    main()
