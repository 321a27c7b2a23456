"""Rows/s into the broker through the `odradek` sink, at-least-once (the default) against exactlyOnce.

One `odradek serve` process (or --bootstrap) and a local SparkSession (local[2]). A DataFrame of
--rows rows with --size-byte values in 2 partitions is cached in memory first, so each timed job is
the sink's work: `df.write.format("odradek")` to a fresh 2-partition topic, with and without
`exactlyOnce` (two tasks, each writing its rows in one transaction that the driver commits). The
two modes run alternately --runs times after one warm-up of each; a second pair of jobs writes
--small-rows rows, where the fixed cost per task and write (the transaction's requests) shows. Each
written topic is checked by a read_committed count. Prints median and best rows/s per mode and size.

Run `python bench/spark_sink.py [--bootstrap HOST:PORT] [--rows 1000000] [--size 100]
[--small-rows 1000] [--runs 5]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import odradek.spark
from odradek.client import KafkaClient, TopicPartition
from odradek.testing.broker import BrokerProcess

PARTITIONS = 2


def _write(df, bootstrap: str, exactly_once: bool) -> tuple[str, float]:
    topic = f"sink-bench-{uuid.uuid4().hex[:12]}"
    with KafkaClient(bootstrap) as client:
        client.create_topics({topic: PARTITIONS})
    began = time.perf_counter()
    (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .mode("append")
        .save()
    )
    return topic, time.perf_counter() - began


def _committed_count(bootstrap: str, topic: str) -> int:
    """Records a read_committed reader finds: offsets up to the last stable offset minus markers."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with KafkaClient(bootstrap, read_committed=True) as client:
        deadline = time.monotonic() + 30
        while True:
            stable = client.list_offsets(dict.fromkeys(tps, -1))
            with KafkaClient(bootstrap) as plain:
                ends = plain.list_offsets(dict.fromkeys(tps, -1))
            if stable == ends or time.monotonic() > deadline:
                return sum(stable.values())


def _measure(spark, bootstrap: str, rows: int, size: int, runs: int) -> dict[str, list[float]]:
    value = F.concat(F.col("id").cast("string"), F.repeat(F.lit("x"), size)).cast("binary")
    df = spark.range(0, rows, 1, PARTITIONS).select(value.alias("value")).cache()
    df.count()
    times: dict[str, list[float]] = {"at-least-once": [], "exactlyOnce": []}
    for run in range(runs + 1):
        for mode, exactly_once in (("at-least-once", False), ("exactlyOnce", True)):
            topic, seconds = _write(df, bootstrap, exactly_once)
            count = _committed_count(bootstrap, topic)
            markers = PARTITIONS if exactly_once else 0  # one commit marker per partition and task
            if not rows <= count <= rows + 2 * markers:
                raise SystemExit(f"{mode}: {count} offsets below the last stable offset, {rows} rows written")
            if run:
                times[mode].append(seconds)
    df.unpersist()
    return times


def _report(rows: int, size: int, times: dict[str, list[float]]) -> None:
    base = statistics.median(times["at-least-once"])
    for mode, seconds in times.items():
        median, best = statistics.median(seconds), min(seconds)
        print(
            f"{mode:>14} {rows:>9} rows x {size} B: median {rows / median:>12,.0f} rows/s"
            f" ({median * 1000:,.0f} ms), best {rows / best:>12,.0f} rows/s;"
            f" median time {median / base:.2f}x at-least-once's"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", help="an already running broker (default: start one)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--small-rows", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="spark-sink-bench-") as scratch:
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = BrokerProcess(Path(scratch) / "data", output_path=Path(scratch) / "broker.out")
            broker.start()
            bootstrap = broker.bootstrap
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.local.dir", scratch)
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)
        try:
            for rows in (args.rows, args.small_rows):
                _report(rows, args.size, _measure(spark, bootstrap, rows, args.size, args.runs))
        finally:
            spark.stop()
            if broker is not None:
                broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
