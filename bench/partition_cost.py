"""The broker's CPU cost per partition of one Fetch or Produce request, in process.

A KafkaServer (single node, in a temporary directory) with one topic of N partitions (default 100). The
request frames go through the Dispatcher exactly as the network layer hands them over (decode,
handler, encode; no sockets), timed with `time.process_time` after a warm-up (the median of the
iterations, so that other load on the machine shows less):
- `fetch idle`: a sessionless Fetch v16 (what librdkafka sends) of every partition at its high
  watermark, max_wait_ms 0: the tailing consumer's request when nothing is new;
- `fetch 10 new`: the same with 10 partitions one 1 KiB record behind the high watermark;
- `fetch idle, session`: an incremental Fetch (KIP-227, as Java clients send) of a session over
  every partition when nothing changed: the request names no partition, the answer none;
- `produce 10`: a Produce v9, acks=-1, one 1 KiB record to each of 10 partitions;
- `produce wakes fetch`: the Produce of `produce 10` while a Fetch of every partition waits in the
  purgatory (max_wait_ms 500); the time covers the produce and the completed fetch, and the fetch's
  answer shows how many of the 10 new batches it carries (the others need another Fetch).
For each it prints CPU microseconds per request and per partition in the request, and the chunks
of the response (byte runs the network layer sends with sendmsg, file slices it sends with sendfile).

Run `python bench/partition_cost.py [--partitions 100] [--iterations 2000] [--isolation-level 0]`
(1: the Fetches read_committed, as librdkafka's consumers do by default). Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import RequestHeader, encode_request_header
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.kafka_server import KafkaServer, settle_collector
from odradek.server.socket_server import ClientInfo

TOPIC = "cost"
FETCH_VERSION = 16
PRODUCE_VERSION = 9
CLIENT = ClientInfo("127.0.0.1", 1, 1)
BATCH = build_batch([SimpleRecord(bytes(1024))])


def frame(api_key: int, version: int, message: Any) -> bytearray:
    header = encode_request_header(RequestHeader(api_key, version, 1, "bench"))
    return bytearray(header + encode_request(api_key, version, message))


class Scenario:
    def __init__(self, broker: KafkaServer, partitions: int, isolation_level: int) -> None:
        self.broker = broker
        self.partitions = partitions
        self.isolation_level = isolation_level
        self.dispatch = Dispatcher(broker)
        self.topic_id = broker.metadata_cache.topic(TOPIC).topic_id

    def hw(self, partition: int) -> int:
        hosted = self.broker.replica_manager.partition(TOPIC, partition)
        assert hosted is not None
        return hosted.high_watermark

    def fetch(self, behind: int, max_wait_ms: int = 0, session_epoch: int = -1) -> bytearray:
        """A Fetch of every partition at its HW, the first `behind` ones a record behind it."""
        partitions = [
            FetchRequest.FetchPartition(p, -1, self.hw(p) - (p < behind), -1, -1, 1 << 20)
            for p in range(self.partitions)
        ]
        request = FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=self.isolation_level,
            session_epoch=session_epoch,
            topics=[FetchRequest.FetchTopic(topic_id=self.topic_id, partitions=partitions)],
        )
        return frame(ApiKey.FETCH, FETCH_VERSION, request)

    async def session(self) -> Callable[[], Awaitable[tuple[list[Any], float]]]:
        """Create a fetch session over every partition; each step is its next incremental Fetch
        naming no partition (nothing changed on either side), built before the clock starts."""
        chunks = await self.call(self.fetch(0, session_epoch=0))
        header, *body = chunks  # the Dispatcher's first chunk is the response header
        response = decode_response(ApiKey.FETCH, FETCH_VERSION, b"".join(body))
        epochs = itertools.count(1)

        def step() -> Awaitable[tuple[list[Any], float]]:
            request = FetchRequest(
                max_bytes=50 << 20,
                isolation_level=self.isolation_level,
                session_id=response.session_id,
                session_epoch=next(epochs),
            )
            return self.timed_call(frame(ApiKey.FETCH, FETCH_VERSION, request))

        return step

    def produce(self, count: int) -> bytearray:
        data = [ProduceRequest.PartitionProduceData(p, BATCH) for p in range(count)]
        topics = [ProduceRequest.TopicProduceData(TOPIC, partition_data=data)]
        request = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=topics)
        return frame(ApiKey.PRODUCE, PRODUCE_VERSION, request)

    async def call(self, request: bytearray) -> list[Any]:
        response = await self.dispatch(bytearray(request), CLIENT)
        assert response is not None
        return response

    async def produce_wakes_fetch(self, produce: bytearray) -> tuple[list[Any], float]:
        """The Fetch is built before the clock starts (its offsets move with every produce)."""
        fetch = self.fetch(0, max_wait_ms=500)
        started = time.process_time()
        waiting = asyncio.ensure_future(self.call(fetch))
        await asyncio.sleep(0)
        await self.call(produce)
        return await waiting, time.process_time() - started

    async def timed_call(self, request: bytearray) -> tuple[list[Any], float]:
        started = time.process_time()
        return await self.call(request), time.process_time() - started


def describe(chunks: list[Any]) -> str:
    slices = sum(isinstance(chunk, FileSlice) for chunk in chunks)
    runs = sum(
        1
        for index, chunk in enumerate(chunks)
        if not isinstance(chunk, FileSlice) and (index == 0 or isinstance(chunks[index - 1], FileSlice))
    )
    return f"{runs} byte runs, {slices} file slices"


async def timed(
    name: str, per_request: int, iterations: int, step: Callable[[], Awaitable[tuple[list[Any], float]]]
) -> None:
    for _ in range(max(iterations // 10, 10)):
        await step()
    costs = []
    for _ in range(iterations):
        chunks, cpu = await step()
        costs.append(cpu)
    cpu_us = statistics.median(costs) * 1e6
    print(
        f"{name:<20} {cpu_us:8.1f} us/request {cpu_us / per_request:6.2f} us/partition   "
        f"response: {describe(chunks)}"
    )


async def run(root: Path, partitions: int, iterations: int, isolation_level: int) -> None:
    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(root)})
    broker = KafkaServer(config)
    await broker.start()
    settle_collector()  # as `odradek serve` does once started
    try:
        topic = await broker.admin.create_topic(TOPIC, partitions, 1, {})
        assert await broker.wait_for_leaders(TOPIC, topic.assignment, 30)
        scenario = Scenario(broker, partitions, isolation_level)
        all_partitions = scenario.produce(partitions)
        await scenario.call(all_partitions)
        ten = scenario.produce(min(10, partitions))
        print(
            f"{partitions} partitions, {iterations} iterations, isolation level {isolation_level}, "
            "median CPU time per request"
        )
        idle, ten_new = scenario.fetch(0), scenario.fetch(10)
        await timed("fetch idle", partitions, iterations, lambda: scenario.timed_call(idle))
        await timed("fetch 10 new", partitions, iterations, lambda: scenario.timed_call(ten_new))
        await timed("fetch idle, session", partitions, iterations, await scenario.session())
        await timed("produce 10", 10, iterations, lambda: scenario.timed_call(ten))
        await timed("produce wakes fetch", partitions, iterations, lambda: scenario.produce_wakes_fetch(ten))
    finally:
        await broker.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument(
        "--isolation-level", type=int, choices=(0, 1), default=0, help="the Fetches' (librdkafka sends 1)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-partition-cost-") as root:
        asyncio.run(run(Path(root), args.partitions, args.iterations, args.isolation_level))


if __name__ == "__main__":
    main()
