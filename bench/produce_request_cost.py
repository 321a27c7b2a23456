"""The broker's cost of one one-record Produce request (acks=-1, replication factor 1), in process.

A KafkaServer (single node, in a temporary directory) with one topic of 100 partitions; Produce v10
frames (what librdkafka sends odradek), each one 1 KiB record to the next partition in turn, as a
keyed producer's requests come, go through the Dispatcher as the network layer hands them over
(decode, handler, ReplicaManager append with CRC and record validation, log write, acks=-1
completion, encode). No sockets: what is left of a request's cost above the network layer.
Two measures, because wall times on a shared machine mislead:
- default: CPU time (`time.process_time`) of `--requests` requests after a warm-up of as many,
  `--repeats` times; prints the minimum and the median in microseconds per request;
- `--callgrind`: the same workload run twice under `valgrind --tool=callgrind`, with `--requests`
  and twice as many; the difference of the instructions counted, divided by `--requests`, is the
  instructions per request, which other load on the machine does not change (set-up and warm-up
  cancel out; both runs with PYTHONHASHSEED 0). Two runs of the same tree differ by about 1.5% with
  `--requests 1000` and a random hash seed: take 2000 or more to compare changes of a few percent.

`--shape` prices the parts of a request apart (issue 36: what one append per partition per read
could save): `one` (the default) is the request above; `two-batches` puts two such batches in its
one partition entry, appended by one call (the cost of a batch: its validation, CRC and bytes);
`two-partitions` names two partitions, one batch each (the cost of an append: `two-partitions`
less `two-batches`, an upper bound, since it also counts one more partition entry to decode and
answer, which folding appends would not save).

Run `python bench/produce_request_cost.py [--requests 5000] [--repeats 5] [--shape one]` or
`python bench/produce_request_cost.py --callgrind [--requests 2000]` (needs valgrind; 5-20 minutes).
Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from partition_cost import BATCH, CLIENT, frame  # bench/partition_cost.py

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.produce import ProduceRequest
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.kafka_server import KafkaServer, settle_collector

TOPIC = "cost"
PARTITIONS = 100
PRODUCE_VERSION = 10


SHAPES = ("one", "two-batches", "two-partitions")


def produce(partition: int, shape: str = "one") -> bytearray:
    """A Produce of one 1 KiB record to `partition`, or of the `shape` named (see the docstring)."""
    if shape == "two-partitions":
        data = [
            ProduceRequest.PartitionProduceData(index % PARTITIONS, BATCH)
            for index in (partition, partition + 1)
        ]
    else:
        data = [ProduceRequest.PartitionProduceData(partition, BATCH * (2 if shape == "two-batches" else 1))]
    request = ProduceRequest(
        acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(TOPIC, partition_data=data)]
    )
    return frame(ApiKey.PRODUCE, PRODUCE_VERSION, request)


async def run(root: Path, requests: int, repeats: int, shape: str) -> list[float]:
    """CPU seconds of `requests` Produce requests, `repeats` times, after a warm-up."""
    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(root)})
    broker = KafkaServer(config)
    await broker.start()
    settle_collector()  # as `odradek serve` does once started
    try:
        topic = await broker.admin.create_topic(TOPIC, PARTITIONS, 1, {})
        assert await broker.wait_for_leaders(TOPIC, topic.assignment, 30)
        dispatch = Dispatcher(broker)
        frames = [produce(partition, shape) for partition in range(PARTITIONS)]
        costs = []
        for _ in range(1 + repeats):  # the first is the warm-up
            started = time.process_time()
            for index in range(requests):
                assert await dispatch(bytearray(frames[index % PARTITIONS]), CLIENT) is not None
            costs.append(time.process_time() - started)
        return costs[1:]
    finally:
        await broker.shutdown()


def instructions(requests: int, shape: str) -> int:
    """The instructions callgrind counts for the whole run with `requests` per repeat, one repeat."""
    command = [sys.executable, __file__, "--requests", str(requests), "--repeats", "1", "--shape", shape]
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict and set layouts in every run
    finished = subprocess.run([*valgrind, *command], capture_output=True, text=True, check=True, env=env)
    return int(re.search(r"Collected : (\d+)", finished.stderr).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--shape", choices=SHAPES, default="one", help="the Produce requests sent")
    args = parser.parse_args()
    what = "one-record Produce" if args.shape == "one" else f"Produce ({args.shape})"
    if args.callgrind:
        # each run warms up with `requests` and measures `requests`: the difference is 2 x requests
        once, twice = instructions(args.requests, args.shape), instructions(2 * args.requests, args.shape)
        per_request = (twice - once) / (2 * args.requests)
        print(f"{what}, acks=-1, RF=1: {per_request:,.0f} instructions per request (callgrind)")
        return
    with tempfile.TemporaryDirectory(prefix="odradek-produce-cost-") as root:
        costs = asyncio.run(run(Path(root), args.requests, args.repeats, args.shape))
    per_request = sorted(cost / args.requests * 1e6 for cost in costs)
    print(
        f"{what}, acks=-1, RF=1: {args.requests} requests x {args.repeats}: CPU per request "
        f"min {per_request[0]:.1f} us, median {statistics.median(per_request):.1f} us"
    )


if __name__ == "__main__":
    main()
