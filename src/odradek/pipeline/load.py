"""The offline load: web-activity events from a topic into a Parquet warehouse table, exactly once.

Owns the table layout and its commit protocol ("offsets stored with the data"):

    <table>/batch=000001/date=2024-05-01/part-*.parquet     a committed load batch
    <table>/batch=000001/_offsets.json                       the offset ranges it consumed
    <table>/_staging/batch=000002-<uuid>/                    a batch being written (invisible)

A run reads the end offsets of the highest committed batch (`_offsets.json`), reads every partition
from there (partitions never loaded: from their log start offset) to the high watermark seen when
the run starts, writes the rows partitioned by date plus the offsets file into a staging directory,
and commits with one atomic `rename` of that directory to `batch=N`. Spark ignores paths starting
with `_`, so `spark.read.parquet(<table>)` sees committed batches only (columns `batch` and `date`
come from the directory names).

Invariants: the rename is the only commit point. A crash before it leaves only staging garbage
(removed by the next run) and the next run reads the same offsets again; a crash after it leaves a
committed batch whose end offsets the next run starts from. So no record is lost or loaded twice,
and each run resumes where the last committed one ended. Two concurrent runs cannot both commit
batch N: the second rename fails.

Callers: odradek.pipeline.__main__, tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from odradek.client import KafkaClient, TopicPartition
from odradek.durable_file import fsync_dir
from odradek.spark.offsets import PartitionOffsets, from_offset_json, to_offset_json
from odradek.spark.options import EARLIEST, LATEST

OFFSETS_FILE = "_offsets.json"
STAGING_DIR = "_staging"
_BATCH_DIR = re.compile(r"^batch=(\d+)$")

EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("event_type", StringType()),
        StructField("page", StringType()),
        StructField("ts", LongType()),
    ]
)


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one run did; `batch_id` is None when there was nothing new to load."""

    batch_id: int | None
    start: PartitionOffsets
    end: PartitionOffsets
    rows: int
    rows_by_date: dict[str, int]


def committed_batches(table: Path) -> list[int]:
    """Ids of the committed batches of `table`, ascending."""
    if not table.is_dir():
        return []
    return sorted(int(m.group(1)) for entry in table.iterdir() if (m := _BATCH_DIR.match(entry.name)))


def committed_offsets(table: Path) -> PartitionOffsets:
    """End offsets of the last committed batch (empty for a new table)."""
    batches = committed_batches(table)
    if not batches:
        return {}
    stored = json.loads((table / _batch_name(batches[-1]) / OFFSETS_FILE).read_text())
    return from_offset_json(stored["end"])


def _batch_name(batch_id: int) -> str:
    return f"batch={batch_id:06d}"


def events_frame(raw: DataFrame) -> DataFrame:
    """Parse the JSON values of a Kafka-schema DataFrame into event columns (+ date, kafka position)."""
    event = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    parsed = raw.select(event, "topic", "partition", "offset")
    return parsed.select(
        "e.event_id",
        "e.user_id",
        "e.event_type",
        "e.page",
        (F.col("e.ts") / 1000).cast("timestamp").alias("event_time"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
    ).withColumn("date", F.to_date("event_time"))


def run_load(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    table: Path,
    *,
    before_commit: Callable[[Path], None] | None = None,
) -> LoadResult:
    """Load everything new in `topic` into `table` as one atomically committed batch."""
    table.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(table / STAGING_DIR, ignore_errors=True)
    start, end = _plan(bootstrap, topic, committed_offsets(table))
    if start == end:
        return LoadResult(None, start, end, 0, {})
    batch_id = (committed_batches(table) or [0])[-1] + 1
    staging = table / STAGING_DIR / f"{_batch_name(batch_id)}-{uuid.uuid4().hex}"
    raw = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: sorted(tp.partition for tp in end)}))
        .option("startingOffsets", json.dumps(to_offset_json(start)))
        .option("endingOffsets", json.dumps(to_offset_json(end)))
        .load()
    )
    events_frame(raw).write.partitionBy("date").parquet(str(staging))
    rows_by_date = {
        str(row["date"]): row["count"]
        for row in spark.read.parquet(str(staging)).groupBy("date").count().collect()
    }
    _write_offsets(staging, batch_id, topic, start, end, sum(rows_by_date.values()))
    if before_commit is not None:
        before_commit(staging)
    os.rename(staging, table / _batch_name(batch_id))
    fsync_dir(table)
    return LoadResult(batch_id, start, end, sum(rows_by_date.values()), dict(sorted(rows_by_date.items())))


def _plan(
    bootstrap: str, topic: str, committed: PartitionOffsets
) -> tuple[PartitionOffsets, PartitionOffsets]:
    with KafkaClient(bootstrap) as client:
        tps = [TopicPartition(topic, p.partition) for p in client.metadata([topic]).partitions_of(topic)]
        if not tps:
            raise ValueError(f"topic {topic!r} does not exist")
        earliest = client.list_offsets(dict.fromkeys(tps, EARLIEST))
        latest = client.list_offsets(dict.fromkeys(tps, LATEST))
    start = {tp: committed.get(tp, earliest[tp]) for tp in tps}
    return start, latest


def _write_offsets(
    staging: Path, batch_id: int, topic: str, start: PartitionOffsets, end: PartitionOffsets, rows: int
) -> None:
    document = {
        "batch": batch_id,
        "topic": topic,
        "start": to_offset_json(start),
        "end": to_offset_json(end),
        "rows": rows,
    }
    path = staging / OFFSETS_FILE
    with open(path, "w") as out:
        json.dump(document, out, indent=2)
        out.flush()
        os.fsync(out.fileno())
    fsync_dir(staging)
