"""Records/s from the broker into Spark through the `odradek` source, next to an in-memory Arrow source.

For each record size (100 B and 1 KiB values by default) the benchmark loads a 2-partition topic with
confluent-kafka, then times two Spark jobs per source, each the median of `--runs` runs after one
warm-up: `count()` of the whole topic, and a Parquet write of it. The reference source `arrowmem`
yields the same number of rows with the same schema and value sizes from Arrow batches built in
memory, split into the same number of tasks, so the difference is the cost of fetching from the
broker and decoding records. Prints one line per (source, size, job).

Usage: python bench/spark_throughput.py [--bootstrap HOST:PORT] [--records N] [--runs 3]
Without --bootstrap it starts an `odradek serve` (BrokerProcess) on a free port in a temp dir.
"""

from __future__ import annotations

import argparse
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
from odradek.spark.schema import arrow_schema, spark_schema
from odradek.testing.broker import BrokerProcess

PARTITIONS = 2
ARROW_ROWS_PER_BATCH = 8192


class ArrowMemoryReader(DataSourceReader):
    def __init__(self, rows: int, value_size: int, tasks: int) -> None:
        self.rows, self.value_size, self.tasks = rows, value_size, tasks

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        share = self.rows // self.tasks
        value = b"x" * self.value_size
        schema = arrow_schema(include_headers=False)
        done = 0
        while done < share:
            n = min(ARROW_ROWS_PER_BATCH, share - done)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.nulls(n, pa.binary()),
                    pa.array([value] * n, pa.binary()),
                    pa.repeat(pa.scalar("mem", pa.string()), n),
                    pa.repeat(pa.scalar(partition.value, pa.int32()), n),
                    pa.array(range(done, done + n), pa.int64()),
                    pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), n),
                    pa.repeat(pa.scalar(0, pa.int32()), n),
                ],
                schema=schema,
            )
            done += n


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


def _median_seconds(job: Callable[[], object], runs: int) -> float:
    job()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        job()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _report(source: str, size: int, job: str, records: int, seconds: float) -> None:
    rate = records / seconds
    print(
        f"{source:9s} {size:5d} B  {job:8s} {rate:12,.0f} records/s"
        f"  {rate * size / 1e6:8.1f} MB/s  ({seconds:.2f} s)"
    )


def run(bootstrap: str, records: int, sizes: list[int], runs: int, scratch: Path) -> None:
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
    try:
        for size in sizes:
            topic = f"spark-bench-{size}-{os.getpid()}"
            _load_topic(bootstrap, topic, records, size)
            frames = {
                "odradek": spark.read.format("odradek")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load(),
                "arrowmem": spark.read.format("arrowmem")
                .option("rows", str(records))
                .option("valueSize", str(size))
                .option("tasks", str(PARTITIONS))
                .load(),
            }
            for source, df in frames.items():
                assert df.count() == records, f"{source} did not return {records} rows"
                _report(source, size, "count", records, _median_seconds(df.count, runs))
                target = scratch / f"{source}-{size}"

                def write(df=df, target=target) -> None:
                    df.write.mode("overwrite").parquet(str(target))

                _report(source, size, "parquet", records, _median_seconds(write, runs))
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", help="an already running broker (default: start one)")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024", help="value sizes in bytes, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="odradek-spark-bench-"))
    try:
        if args.bootstrap:
            run(args.bootstrap, args.records, sizes, args.runs, scratch)
            return 0
        with BrokerProcess(scratch / "broker", output_path=scratch / "broker.out") as broker:
            run(broker.bootstrap, args.records, sizes, args.runs, scratch)
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
