"""The broker CPU per request that the metrics cost: small Produce and Fetch requests against a broker
process, with and without `http.listeners`.

A broker process (temporary log dir) gets a one-partition topic; one connection then sends N Produce
requests (acks=1, one batch of one 100-byte record each) pipelined PIPELINE at a time, then N Fetch
requests (offset 0, partition_max_bytes 1 KiB, max_wait_ms 0) the same way. For each phase the
broker's CPU time (user + system, /proc/<pid>/stat) is divided by N: microseconds of broker CPU per
request. Each figure is the median of --runs runs, each on a fresh broker. `--http` serves /metrics
(the network layer then times every request); without it only the ReplicaManager's counters run.
To compare with the code before the metrics, run this same file with PYTHONPATH pointing at that
tree's src. Also prints the cost of one `RequestMetrics` observer call (timeit).

Run `python bench/metrics_overhead.py [--requests N] [--runs 5] [--http]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import tempfile
import timeit
from pathlib import Path

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import encode_request
from odradek.protocol.headers import RequestHeader, encode_request_header
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.testing.broker import BrokerProcess, free_port

TOPIC = "overhead"
PIPELINE = 50
_SIZE = struct.Struct(">i")


def frame(api_key: int, version: int, message: object, correlation_id: int) -> bytes:
    body = encode_request_header(RequestHeader(api_key, version, correlation_id, "bench"))
    body += encode_request(api_key, version, message)
    return _SIZE.pack(len(body)) + body


def read_frames(sock: socket.socket, count: int) -> None:
    buffer = bytearray()
    while count:
        while len(buffer) < 4 or len(buffer) < 4 + _SIZE.unpack_from(buffer)[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buffer += chunk
        del buffer[: 4 + _SIZE.unpack_from(buffer)[0]]
        count -= 1


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def per_request_cpu_us(sock: socket.socket, pid: int, request: bytes, count: int) -> float:
    start = cpu_seconds(pid)
    for sent in range(0, count, PIPELINE):
        batch = min(PIPELINE, count - sent)
        sock.sendall(request * batch)
        read_frames(sock, batch)
    return (cpu_seconds(pid) - start) / count * 1e6


def one_run(requests: int, http: bool) -> tuple[float, float]:
    overrides = {"http.listeners": f"http://127.0.0.1:{free_port()}"} if http else {}
    with (
        tempfile.TemporaryDirectory() as root,
        BrokerProcess(Path(root) / "data", overrides=overrides) as broker,
    ):
        assert broker.pid is not None
        with socket.create_connection((broker.host, broker.port)) as sock:
            topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
            sock.sendall(
                frame(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=10000), 1)
            )
            read_frames(sock, 1)
            batch = build_batch([SimpleRecord(bytes(100))])
            produce = ProduceRequest(
                acks=1,
                timeout_ms=10000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=TOPIC,
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
                    )
                ],
            )
            fetch = FetchRequest(
                max_wait_ms=0,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)
                        ],
                    )
                ],
            )
            produce_frame = frame(ApiKey.PRODUCE, 9, produce, 2)
            fetch_frame = frame(ApiKey.FETCH, 11, fetch, 3)
            per_request_cpu_us(sock, broker.pid, produce_frame, requests // 10)  # warm-up
            return (
                per_request_cpu_us(sock, broker.pid, produce_frame, requests),
                per_request_cpu_us(sock, broker.pid, fetch_frame, requests),
            )


def observer_call_ns() -> float | None:
    try:
        from odradek.server.metrics import RequestMetrics
    except ImportError:
        return None  # the code before the metrics
    metrics = RequestMetrics()
    request = frame(ApiKey.PRODUCE, 9, ProduceRequest(), 1)[4:]
    loops = 200_000
    return timeit.timeit(lambda: metrics(request, 1.0, 1.001, 1.002), number=loops) / loops * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--http", action="store_true", help="serve /metrics (request timing on)")
    args = parser.parse_args()
    runs = [one_run(args.requests, args.http) for _ in range(args.runs)]
    produce = statistics.median(run[0] for run in runs)
    fetch = statistics.median(run[1] for run in runs)
    print(
        f"http.listeners {'on' if args.http else 'off'}: broker CPU per request, median of {args.runs} runs"
    )
    print(f"  Produce (acks=1, 1 record): {produce:7.1f} us   runs: {', '.join(f'{r[0]:.1f}' for r in runs)}")
    print(f"  Fetch (1 partition, data): {fetch:7.1f} us   runs: {', '.join(f'{r[1]:.1f}' for r in runs)}")
    cost = observer_call_ns()
    if cost is not None:
        print(f"  one RequestMetrics observer call: {cost:.0f} ns")


if __name__ == "__main__":
    main()
