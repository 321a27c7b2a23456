"""Exactly-once delivery: topic -> Parquet through Spark's file sink and checkpoint, across an injected
task failure and across a driver killed mid-batch; and the offline load that stores its offsets
in the same atomic commit as its output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.client import KafkaClient
from odradek.pipeline.generator import generate_events, publish
from odradek.pipeline.load import STAGING_DIR, committed_batches, run_load
from tests.spark.helpers import produce, wait_until

STREAM_JOB = Path(__file__).with_name("stream_job.py")


def _produce_numbered(bootstrap: str, topic: str, count: int, partitions: int) -> set[bytes]:
    values = [b"record-%06d" % i for i in range(count)]
    produce(bootstrap, topic, [(i % partitions, None, v) for i, v in enumerate(values)])
    return set(values)


def _assert_exactly_once(spark, output: Path, values: set[bytes]) -> None:
    rows = spark.read.parquet(str(output)).collect()
    positions = [(r.partition, r.offset) for r in rows]
    assert len(positions) == len(set(positions)), "a record was delivered twice"
    assert sorted(r.value for r in rows) == sorted(values), "a record was lost or changed"


def _batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def _in_flight_batch(checkpoint: Path) -> int:
    """The id of a micro-batch whose offsets are logged but which is not committed, else -1."""
    pending = _batch_ids(checkpoint / "offsets") - _batch_ids(checkpoint / "commits")
    return max(pending, default=-1)


def _to_parquet(
    spark, bootstrap: str, topic: str, output: Path, checkpoint: Path, transform=None, **extra: str
):
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    rows = reader.load().select("partition", "offset", "value")
    return (
        (transform(rows) if transform else rows)
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _fail_once_at(marker: Path, fail_at_offset: int):
    """A transform passing rows through unchanged, except that the first task (across all Python
    workers) to reach a record at `fail_at_offset` creates `marker` and fails, so Spark retries the
    task after it has already handed earlier rows of its range to the file sink."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    path = str(marker)

    def pass_through(offset: int, value: bytes) -> bytes:
        if offset == fail_at_offset:
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return value
            raise RuntimeError(f"injected task failure at offset {offset}")
        return value

    udf = F.udf(pass_through, BinaryType(), useArrow=False)
    return lambda rows: rows.withColumn("value", udf("offset", "value"))


def test_injected_task_failure_is_retried_without_duplicates(spark, bootstrap, make_topic, tmp_path) -> None:
    topic = make_topic(3)
    values = _produce_numbered(bootstrap, topic, 3000, 3)
    marker = tmp_path / "task-failed-once"
    query = _to_parquet(
        spark,
        bootstrap,
        topic,
        tmp_path / "out",
        tmp_path / "ck",
        transform=_fail_once_at(marker, fail_at_offset=200),
        maxOffsetsPerTrigger="1000",
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert marker.exists(), "the injected failure never happened"
    _assert_exactly_once(spark, tmp_path / "out", values)


@pytest.mark.slow
def test_query_killed_mid_batch_and_restarted(spark, bootstrap, make_topic, tmp_path) -> None:
    topic = make_topic(3)
    values = _produce_numbered(bootstrap, topic, 6000, 3)
    output, checkpoint = tmp_path / "out", tmp_path / "ck"
    job = subprocess.Popen(
        [sys.executable, str(STREAM_JOB), bootstrap, topic, str(output), str(checkpoint), "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: _in_flight_batch(checkpoint) >= 2 or job.poll() is not None, 120, "batch 2", 0.01)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert _in_flight_batch(checkpoint) >= 2, "the driver was not killed in the middle of a micro-batch"
    assert {0, 1} <= _batch_ids(checkpoint / "commits")
    query = _to_parquet(spark, bootstrap, topic, output, checkpoint, maxOffsetsPerTrigger="600")
    query.awaitTermination(180)
    assert query.exception() is None
    _assert_exactly_once(spark, output, values)


def test_offline_load_commits_offsets_with_the_data(spark, bootstrap, make_topic, tmp_path) -> None:
    topic = make_topic(3)
    table = tmp_path / "warehouse" / "events"
    day = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000
    first = list(generate_events(300, users=20, start_ms=day - 60_000, step_ms=400, seed=1))
    second = list(generate_events(200, users=20, start_ms=day + 120_000, step_ms=400, seed=2))
    with KafkaClient(bootstrap) as client:
        publish(client, topic, iter(first))
        one = run_load(spark, bootstrap, topic, table)
        publish(client, topic, iter(second))

    def crash(staging: Path) -> None:
        raise RuntimeError("crash before the commit rename")

    with pytest.raises(RuntimeError, match="crash before the commit rename"):
        run_load(spark, bootstrap, topic, table, before_commit=crash)
    assert committed_batches(table) == [1] and any((table / STAGING_DIR).iterdir())
    two = run_load(spark, bootstrap, topic, table)
    three = run_load(spark, bootstrap, topic, table)

    assert (one.batch_id, one.rows, two.batch_id, two.rows, three.batch_id) == (1, 300, 2, 200, None)
    assert two.start == one.end and sum(two.end.values()) == 500
    assert not (table / STAGING_DIR).exists() or not any((table / STAGING_DIR).iterdir())
    loaded = spark.read.parquet(str(table))
    rows = loaded.select("event_id", "kafka_partition", "kafka_offset", "batch", "date").collect()
    assert sorted(r.event_id for r in rows) == sorted(e.event_id for e in first + second)
    assert len({(r.kafka_partition, r.kafka_offset) for r in rows}) == 500
    assert {str(r.date) for r in rows} == {"2023-11-13", "2023-11-14"}
    assert {r.batch for r in rows} == {1, 2}
