"""Records/s from the broker into Spark through the `odradek` source, next to an in-memory Arrow source.

For each record size (100 B and 1 KiB values by default) the benchmark loads a 2-partition topic with
confluent-kafka, then times two Spark jobs per source: `count()` of the whole topic, and a Parquet
write of it. The reference source `arrowmem` yields the same number of rows with the same schema and
value sizes from Arrow batches built in memory, split into the same number of tasks, so the
difference is the cost of fetching from the broker and decoding records. A third source, `fetchonly`,
plans and fetches exactly as odradek does but builds its rows as `arrowmem` does instead of decoding
the records: the share it reaches is the ceiling set by the fetch path (broker, socket, client) before
any decoding. After one warm-up of each,
the two sources run alternately `--runs` times, so load from other processes hits both alike. Prints
one line per (source, size, job) with the median and the best run, then odradek's share of arrowmem's
rate (best against best: the least disturbed runs; median against median).

Usage: python bench/spark_throughput.py [--bootstrap HOST:PORT] [--records N] [--sizes 100,1024] [--runs 5]
       [--jobs count,parquet]
Without --bootstrap it starts an `odradek serve` (BrokerProcess) on a free port in a temp dir.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer as CkProducer
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import odradek.spark
from odradek.client import KafkaClient
from odradek.protocol.records.batch import iter_batches
from odradek.spark.options import parse_source_options
from odradek.spark.reader import BatchReader
from odradek.spark.schema import arrow_schema, spark_schema
from odradek.testing.broker import BrokerProcess

PARTITIONS = 2
ARROW_ROWS_PER_BATCH = 8192


def _memory_batch(count: int, value: bytes, partition: int, first_offset: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(count, pa.binary()),
            pa.array([value] * count, pa.binary()),
            pa.repeat(pa.scalar("mem", pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(range(first_offset, first_offset + count), pa.int64()),
            pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), count),
            pa.repeat(pa.scalar(0, pa.int32()), count),
        ],
        schema=arrow_schema(include_headers=False),
    )


class ArrowMemoryReader(DataSourceReader):
    def __init__(self, rows: int, value_size: int, tasks: int) -> None:
        self.rows, self.value_size, self.tasks = rows, value_size, tasks

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        share = self.rows // self.tasks
        value = b"x" * self.value_size
        done = 0
        while done < share:
            n = min(ARROW_ROWS_PER_BATCH, share - done)
            yield _memory_batch(n, value, partition.value, done)
            done += n


class FetchOnlyReader(BatchReader):
    """The odradek source's planning and fetches, but rows built as `arrowmem` builds them instead of
    decoded: what reading through the broker costs before any record is decoded (a ceiling)."""

    def __init__(self, options, value_size: int) -> None:
        super().__init__(options)
        self.value_size = value_size

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        tp, offset, value = partition.topic_partition, partition.from_offset, b"x" * self.value_size
        with KafkaClient(partition.client.bootstrap_servers) as client:
            while offset < partition.until_offset:
                fetched = client.fetch(tp, offset, max_bytes=partition.fetch_max_bytes, reuse_buffer=True)
                records = fetched.records
                ends = [header.next_offset for _, header in iter_batches(records)]
                count = min(ends[-1], partition.until_offset) - offset
                yield _memory_batch(count, value, tp.partition, offset)
                offset += count


class FetchOnlySource(DataSource):
    """`fetchonly`: the odradek source's options plus `valueSize`; see FetchOnlyReader."""

    @classmethod
    def name(cls) -> str:
        return "fetchonly"

    def schema(self):
        return spark_schema(include_headers=False)

    def reader(self, schema) -> FetchOnlyReader:
        options = {k: v for k, v in self.options.items() if k.lower() != "valuesize"}
        return FetchOnlyReader(parse_source_options(options, streaming=False), int(self.options["valueSize"]))


class ArrowMemorySource(DataSource):
    """Rows of the odradek schema generated in memory (`rows`, `valueSize`, `tasks` options)."""

    @classmethod
    def name(cls) -> str:
        return "arrowmem"

    def schema(self):
        return spark_schema(include_headers=False)

    def reader(self, schema) -> ArrowMemoryReader:
        opts = self.options
        return ArrowMemoryReader(int(opts["rows"]), int(opts["valueSize"]), int(opts["tasks"]))


def _load_topic(bootstrap: str, topic: str, records: int, value_size: int) -> None:
    with KafkaClient(bootstrap) as client:
        client.create_topics({topic: PARTITIONS})
    producer = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1})
    value = b"x" * value_size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _seconds(job: Callable[[], object]) -> float:
    start = time.perf_counter()
    job()
    return time.perf_counter() - start


def _alternate(jobs: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Time each job `runs` times, one after the other in turn, after one warm-up each."""
    for job in jobs.values():
        job()
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(runs):
        for name, job in jobs.items():
            times[name].append(_seconds(job))
    return times


def _report(source: str, size: int, job: str, records: int, times: list[float]) -> None:
    median, best = statistics.median(times), min(times)
    print(
        f"{source:9s} {size:5d} B  {job:8s} median {records / median:12,.0f} records/s"
        f"  best {records / best:12,.0f} records/s  ({records / best * size / 1e6:7.1f} MB/s)"
    )


def _share(source: str, size: int, job: str, times: dict[str, list[float]]) -> None:
    best = min(times["arrowmem"]) / min(times[source])
    median = statistics.median(times["arrowmem"]) / statistics.median(times[source])
    print(f"{source} / arrowmem  {size:5d} B  {job:8s} best {best:6.1%}  median {median:6.1%}")


def _write_parquet(df, target: Path) -> None:
    df.write.mode("overwrite").parquet(str(target))


def run(bootstrap: str, records: int, sizes: list[int], runs: int, jobs: list[str], scratch: Path) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    spark.dataSource.register(ArrowMemorySource)
    spark.dataSource.register(FetchOnlySource)
    try:
        for size in sizes:
            topic = f"spark-bench-{size}-{os.getpid()}"
            _load_topic(bootstrap, topic, records, size)
            frames = {
                "odradek": spark.read.format("odradek")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load(),
                "fetchonly": spark.read.format("fetchonly")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("valueSize", str(size))
                .load(),
                "arrowmem": spark.read.format("arrowmem")
                .option("rows", str(records))
                .option("valueSize", str(size))
                .option("tasks", str(PARTITIONS))
                .load(),
            }
            for df in frames.values():
                assert df.count() == records, "a source did not return every row"
            timings = {}
            if "count" in jobs:
                timings["count"] = _alternate({name: df.count for name, df in frames.items()}, runs)
            if "parquet" in jobs:
                writes = {
                    name: functools.partial(_write_parquet, df, scratch / f"{name}-{size}")
                    for name, df in frames.items()
                }
                timings["parquet"] = _alternate(writes, runs)
            for job, times in timings.items():
                for name in frames:
                    _report(name, size, job, records, times[name])
                for name in ("odradek", "fetchonly"):
                    _share(name, size, job, times)
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", help="an already running broker (default: start one)")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024", help="value sizes in bytes, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", default="count,parquet", help="count and/or parquet, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="odradek-spark-bench-"))
    try:
        if args.bootstrap:
            run(args.bootstrap, args.records, sizes, args.runs, args.jobs.split(","), scratch)
            return 0
        with BrokerProcess(scratch / "broker", output_path=scratch / "broker.out") as broker:
            run(broker.bootstrap, args.records, sizes, args.runs, args.jobs.split(","), scratch)
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
