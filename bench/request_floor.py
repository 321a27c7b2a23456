"""The machine's floor for one Produce request in Python, and odradek's CPU per request against it.

The floor: a bare asyncio server (this file run with `--role floor`, a process of its own) that speaks
just enough of the protocol for a confluent-kafka producer: ApiVersions and Metadata (one broker, one
topic of N partitions, encoded with odradek's codec: a handful of requests at the start), then for
each Produce frame (size-prefixed, as librdkafka sends it) it reads the header and the one
partition's position by hand (ApiVersions answers odradek's own list, so librdkafka sends the same
frames to both), appends that partition's batch to one file with one os.pwrite at the
file's end and writes a response prepared once per partition with the request's correlation id put
in. No decoding into objects, no CRC or record validation, no offsets, no purgatory, no metrics: what
any Python broker of this design (one event loop, asyncio transports) must do at least per request.

The workload, the same against each server: `--producers` confluent-kafka producer processes
(default 4; acks=all, linger.ms 0), each sending 1 KiB records keyed over 1,000,000 keys (as
bench/latency.py --keyed: librdkafka's default partitioner picks the partition) and waiting for each
record's acknowledgement (flush) before the next, so every Produce request holds one record, for
`--seconds` (default 5). Measured per server, in one run:
1. the floor: its CPU (user + system from /proc/<pid>/stat over the producers' run) / the Produce
   requests it answered;
2. odradek, one broker, the topic at replication factor 1: its CPU / the Produce requests it answered
   (its `/metrics` on `http.listeners`), as a multiple of the floor;
3. odradek again with a confluent-kafka consumer (bench/latency.py's) assigned every partition at
   the end, fetch.min.bytes 1, so Fetches return the records as they come, one or a few at a time:
   its CPU per Fetch, the CPU of this run less its Produce requests at step 2's CPU per Produce, as
   a multiple of the floor. This part is derived: it assumes a Produce costs the same with a reader.
Each line prints the requests, requests per second, CPU seconds and microseconds per request.
The machine's speed moves between runs (this 2-core machine has two speed states about 1.7x apart),
so `--rounds N` measures the floor and then odradek's Produce N times, alternating, and prints the
multiple of each round and their median (the Fetch part runs in the last round only).

Run `python bench/request_floor.py [--partitions 100] [--producers 4] [--seconds 5] [--rounds 1]` from the
repository root. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from latency import BROKERS, QUIET, RECORD, cpu_seconds, create_topic, requests_by_api  # bench/latency.py

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_request, encode_response
from odradek.protocol.headers import encode_response_header, parse_request_header, response_header_version
from odradek.protocol.messages.api_versions import ApiVersionsResponse
from odradek.protocol.messages.metadata import MetadataResponse
from odradek.protocol.messages.produce import ProduceResponse
from odradek.protocol.primitives import read_unsigned_varint
from odradek.server.handlers.api_versions import supported_versions

TOPIC = "floor"
KEY_SPACE = 1_000_000
FLEXIBLE_PRODUCE = 9
INT16, INT32, TWO_INT32 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">ii")


# -- the floor server ------------------------------------------------------------------------


class FloorState:
    """The log file, the prepared responses and the count of requests answered, by API key."""

    def __init__(self, path: str, partitions: int, port: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.end = 0
        self.partitions = partitions
        self.port = port
        self.topic_id = uuid.uuid4()
        self.prepared: dict[tuple[int, int], bytes] = {}
        self.requests: dict[int, int] = {}

    def produce_response(self, version: int, partition: int) -> bytes:
        """The response frame for `partition` at `version`, correlation id 0, built once."""
        key = (version, partition)
        if key not in self.prepared:
            result = ProduceResponse.PartitionProduceResponse(index=partition)
            topic = ProduceResponse.TopicProduceResponse(name=TOPIC, partition_responses=[result])
            self.prepared[key] = frame(ApiKey.PRODUCE, version, 0, ProduceResponse(responses=[topic]))
        return self.prepared[key]

    def metadata(self, topics: list[MetadataResponse.MetadataRequestTopic] | None) -> MetadataResponse:
        partitions = [
            MetadataResponse.MetadataResponsePartition(
                partition_index=index, leader_id=0, leader_epoch=0, replica_nodes=[0], isr_nodes=[0]
            )
            for index in range(self.partitions)
        ]
        topic = MetadataResponse.MetadataResponseTopic(
            name=TOPIC, topic_id=self.topic_id, partitions=partitions
        )
        wanted = topics is None or not topics or any(t.name == TOPIC for t in topics)
        return MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)],
            cluster_id="floor",
            controller_id=0,
            topics=[topic] if wanted else [],
        )


def frame(api_key: int, version: int, correlation_id: int, message: object) -> bytes:
    """A whole response frame: size, header, body (odradek's codec; no file slices here)."""
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    body = b"".join(bytes(chunk) for chunk in encode_response(api_key, version, message))  # type: ignore[arg-type]
    return INT32.pack(len(header) + len(body)) + header + body


def produce_batch(request: memoryview, version: int) -> tuple[int, memoryview]:
    """The partition and records of a one-partition Produce frame, found by hand (no objects)."""
    client_id_length = INT16.unpack_from(request, 8)[0]
    pos = 10 + max(client_id_length, 0)
    if version >= FLEXIBLE_PRODUCE:
        pos += 1  # the header's empty tagged fields (librdkafka sends none)
        length, pos = read_unsigned_varint(request, pos)  # transactional id, compact nullable
        pos += max(length - 1, 0) + 6  # acks, timeout
        _, pos = read_unsigned_varint(request, pos)  # topics
        length, pos = read_unsigned_varint(request, pos)
        _, pos = read_unsigned_varint(request, pos + length - 1)  # partitions
        partition = INT32.unpack_from(request, pos)[0]
        length, pos = read_unsigned_varint(request, pos + 4)
        return partition, request[pos : pos + length - 1]
    pos += 2 + max(INT16.unpack_from(request, pos)[0], 0) + 6 + 4  # transactional id, acks, timeout, topics
    pos += 2 + INT16.unpack_from(request, pos)[0] + 4  # name, partitions
    partition, length = TWO_INT32.unpack_from(request, pos)
    return partition, request[pos + 8 : pos + 8 + length]


class FloorProtocol(asyncio.Protocol):
    def __init__(self, state: FloorState) -> None:
        self.state = state
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        consumed = 0
        while len(self.buffer) - consumed >= 4:
            size = INT32.unpack_from(self.buffer, consumed)[0]
            if len(self.buffer) - consumed - 4 < size:
                break
            with memoryview(self.buffer) as view:
                self.answer(view[consumed + 4 : consumed + 4 + size])
            consumed += 4 + size
        del self.buffer[:consumed]

    def answer(self, request: memoryview) -> None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", request, 0)
        state = self.state
        state.requests[api_key] = state.requests.get(api_key, 0) + 1
        if api_key == ApiKey.PRODUCE:
            partition, records = produce_batch(request, version)
            state.end += os.pwrite(state.fd, records, state.end)
            response = bytearray(state.produce_response(version, partition))
            INT32.pack_into(response, 4, correlation_id)
        else:
            response = bytearray(self.handshake(request, api_key, version, correlation_id))
        assert self.transport is not None
        self.transport.write(response)

    def handshake(self, request: memoryview, api_key: int, version: int, correlation_id: int) -> bytes:
        _, body = parse_request_header(request)
        if api_key == ApiKey.API_VERSIONS:
            # odradek's own list, so that librdkafka picks the same versions and features (RecordBatch
            # v2 needs Fetch v4+ among them) and sends the same frames; only three are served here
            keys = supported_versions()
            return frame(api_key, version, correlation_id, ApiVersionsResponse(api_keys=keys))
        if api_key == ApiKey.METADATA:
            asked = decode_request(api_key, version, request[body:])
            return frame(api_key, version, correlation_id, self.state.metadata(asked.topics))
        raise RuntimeError(f"the floor server does not serve API {api_key}")


async def serve_floor(partitions: int, path: str) -> None:
    """Serve until stdin closes; then print the requests answered by API key and the bytes appended."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FloorProtocol(state), "127.0.0.1", 0)
    state = FloorState(path, partitions, server.sockets[0].getsockname()[1])
    print(state.port, flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()
    server.close()
    os.close(state.fd)
    print(json.dumps({"requests": state.requests, "appended": state.end}), flush=True)


# -- the producers ---------------------------------------------------------------------------


def run_producer(bootstrap: str, seconds: float) -> None:
    """Keyed 1 KiB records, each acknowledged before the next is sent: one record per request."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **QUIET})
    value = b"x" * RECORD
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(TOPIC, key=b"key-%d" % random.randrange(KEY_SPACE), value=value)
        producer.flush(30)


def drive(bootstrap: str, args: argparse.Namespace) -> None:
    """The producers' run against `bootstrap` (their connecting and Metadata included)."""
    me = [sys.executable, __file__, "--role", "producer", "--bootstrap", bootstrap, "--seconds"]
    producers = [subprocess.Popen([*me, str(args.seconds)]) for _ in range(args.producers)]
    for producer in producers:
        if producer.wait() != 0:
            raise RuntimeError(f"a producer exited with {producer.returncode}")


# -- the driver ------------------------------------------------------------------------------


def per_request(name: str, requests: int, cpu: float, wall: float, floor_us: float | None) -> float:
    us = cpu / max(requests, 1) * 1e6
    multiple = f" = {us / floor_us:.1f} x the floor" if floor_us else ""
    print(
        f"{name}: {requests:,} requests, {requests / wall:,.0f}/s, {cpu:.2f} s CPU; "
        f"{us:,.0f} us CPU per request{multiple}",
        flush=True,
    )
    return us


def measure_floor(args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="odradek-floor-") as root:
        me = [sys.executable, __file__, "--role", "floor", "--partitions", str(args.partitions)]
        floor = subprocess.Popen(
            [*me, "--file", f"{root}/log"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert floor.stdin is not None and floor.stdout is not None
        try:
            port = int(floor.stdout.readline())
            cpu_before, wall_before = cpu_seconds([floor.pid]), time.monotonic()
            drive(f"127.0.0.1:{port}", args)
            cpu, wall = cpu_seconds([floor.pid]) - cpu_before, time.monotonic() - wall_before
            floor.stdin.close()
            answered = json.loads(floor.stdout.readline())
        finally:
            floor.wait(30)
    produces = answered["requests"].get(str(int(ApiKey.PRODUCE)), 0)
    name = f"floor, Produce ({answered['appended'] / max(produces, 1):,.0f} bytes appended per request)"
    return per_request(name, produces, cpu, wall, None)


def measure_odradek(args: argparse.Namespace, floor_us: float, with_fetch: bool) -> float:
    """odradek's CPU per Produce request (returned) and, `with_fetch`, per Fetch."""
    with BROKERS["odradek"]() as (bootstrap, pids, metrics_urls):
        create_topic(bootstrap, TOPIC, args.partitions, 1)
        before, cpu_before, wall_before = requests_by_api(metrics_urls), cpu_seconds(pids), time.monotonic()
        drive(bootstrap, args)
        cpu, wall = cpu_seconds(pids) - cpu_before, time.monotonic() - wall_before
        produces = requests_by_api(metrics_urls)["Produce"] - before.get("Produce", 0)
        produce_us = per_request("odradek, Produce (RF=1, acks=all)", produces, cpu, wall, floor_us)
        if not with_fetch:
            return produce_us
        with reading(bootstrap, args):
            before, cpu_before, wall_before = (
                requests_by_api(metrics_urls),
                cpu_seconds(pids),
                time.monotonic(),
            )
            drive(bootstrap, args)
            cpu, wall = cpu_seconds(pids) - cpu_before, time.monotonic() - wall_before
            after = requests_by_api(metrics_urls)
        produces = after["Produce"] - before["Produce"]
        fetches = after.get("Fetch", 0) - before.get("Fetch", 0)
        per_request("odradek, Produce and Fetch together", produces + fetches, cpu, wall, floor_us)
        fetch_cpu = cpu - produces * produce_us / 1e6
        if fetch_cpu <= 0:  # other load on the machine moved the Produce cost more than the Fetches cost
            print(
                "odradek, Fetch (derived): not resolved in this run (the run with the consumer cost no more)"
            )
        else:
            per_request("odradek, Fetch (derived)", fetches, fetch_cpu, wall, floor_us)
        return produce_us


@contextmanager
def reading(bootstrap: str, args: argparse.Namespace) -> Iterator[None]:
    """bench/latency.py's consumer, assigned every partition at the end, for the producers' run."""
    latency = str(Path(__file__).with_name("latency.py"))
    command = [sys.executable, latency, "--role", "consumer", "--bootstrap", bootstrap, "--topic", TOPIC]
    with tempfile.TemporaryDirectory() as tmp:
        consumer = subprocess.Popen(
            [*command, "--partitions", str(args.partitions), "--seconds", str(args.seconds + 6)]
            + ["--out", f"{tmp}/latencies", "--ready", f"{tmp}/ready"]
        )
        try:
            while not Path(f"{tmp}/ready").exists():
                time.sleep(0.05)
            yield
        finally:
            consumer.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("floor", "producer"))
    parser.add_argument("--bootstrap")
    parser.add_argument("--file")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=1, help="floor then odradek, this many times")
    args = parser.parse_args()
    if args.role == "floor":
        asyncio.run(serve_floor(args.partitions, args.file))
        return
    if args.role == "producer":
        run_producer(args.bootstrap, args.seconds)
        return
    print(
        f"machine: {os.cpu_count()} cpus; {args.partitions} partitions, {args.producers} producers "
        f"each waiting for every keyed 1 KiB record (one record per Produce), {args.seconds:g} s per server"
    )
    multiples = []
    for round_ in range(1, args.rounds + 1):
        if args.rounds > 1:
            print(f"round {round_} of {args.rounds}", flush=True)
        floor_us = measure_floor(args)
        multiples.append(measure_odradek(args, floor_us, with_fetch=round_ == args.rounds) / floor_us)
    if args.rounds > 1:
        listed = ", ".join(f"{multiple:.2f}" for multiple in multiples)
        median = statistics.median(multiples)
        print(f"odradek's Produce against the floor, by round: {listed}; median {median:.2f} x")


if __name__ == "__main__":
    main()
