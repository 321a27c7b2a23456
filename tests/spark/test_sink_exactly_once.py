"""The exactly-once sink (`exactlyOnce` = true): one transaction per task and micro-batch, holding a
"batch done" mark, committed by the driver, so that a replayed micro-batch does not write twice.

- (no Spark) a task's transaction stays open until the driver commits it; a task run again for a
  committed micro-batch writes nothing; run again for one the driver never committed, it aborts the
  first run's transaction and writes once; a zombie attempt of the same task is fenced;
- a streaming driver SIGKILLed halfway through committing a micro-batch's transactions, then
  restarted from its checkpoint: under read_committed the output topic holds every input record
  exactly once; the same kill with the default at-least-once sink writes that micro-batch twice;
- a batch write whose task fails after it produced rows is retried without duplicates under
  read_committed (the failed attempt's rows are in the log, aborted) - the case that rules out
  committing in the task (odradek.spark.writer's header).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from odradek.client import KafkaClient, TopicPartition
from odradek.client.transactions import ProducerFencedError, TransactionalProducer
from odradek.spark.options import parse_sink_options
from odradek.spark.writer import SinkLayout, TaskTransaction, end_transactions, write_transaction
from tests.conftest import topic_name
from tests.exit_report import exit_report
from tests.spark.helpers import consume_committed, produce, wait_until

SINK_JOB = Path(__file__).with_name("sink_job.py")
VALUES_ONLY = SinkLayout(has_key=False, has_headers=False, has_topic=False, has_partition=True)


def _rows(values: list[bytes], partitions: int = 2) -> list[pa.RecordBatch]:
    return [
        pa.RecordBatch.from_pydict(
            {"value": values, "partition": [i % partitions for i in range(len(values))]},
            schema=pa.schema([("value", pa.binary()), ("partition", pa.int32())]),
        )
    ]


def _exactly_once_options(bootstrap: str, topic: str):
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, "exactlyOnce": "true"})


def _committed_values(bootstrap: str, topic: str, partitions: int, wait_s: float = 30.0) -> list[bytes]:
    """The values a read_committed reader sees once no transaction is open, or (an open transaction
    holding them back) what it saw within `wait_s`."""
    return sorted(r.value for r in consume_committed(bootstrap, topic, partitions, wait_s, partial=True))


def _commit(options, *messages) -> None:
    end_transactions(options, messages, commit=True)


def test_a_task_replayed_for_the_same_batch_writes_once(bootstrap, make_topic, request) -> None:
    topic = make_topic(2)
    options = _exactly_once_options(bootstrap, topic)
    tid = topic_name(f"tid-{request.node.name}")
    first = [b"first-%d" % i for i in range(50)]

    written = write_transaction(iter(_rows(first)), options, VALUES_ONLY, TaskTransaction(tid, 4))
    assert sum(written.counts.values()) == 50 and written.transaction is not None
    assert _committed_values(bootstrap, topic, 2, wait_s=0.5) == []  # open until the driver commits
    _commit(options, written)
    assert _committed_values(bootstrap, topic, 2) == sorted(first)
    for batch_id in (4, 3):  # a replay of the batch, or of an older one: nothing written
        replayed = write_transaction(iter(_rows(first)), options, VALUES_ONLY, TaskTransaction(tid, batch_id))
        assert replayed.already_written and replayed.transaction is None and not replayed.counts
    assert _committed_values(bootstrap, topic, 2) == sorted(first)

    following = [b"next-%d" % i for i in range(30)]
    nxt = write_transaction(iter(_rows(following)), options, VALUES_ONLY, TaskTransaction(tid, 5))
    _commit(options, nxt, None, write_transaction(iter([]), options, VALUES_ONLY, TaskTransaction(tid, 5)))
    assert _committed_values(bootstrap, topic, 2) == sorted(first + following)


def test_a_batch_the_driver_did_not_commit_is_written_again_once(bootstrap, make_topic, request) -> None:
    topic = make_topic(2)
    options = _exactly_once_options(bootstrap, topic)
    task = TaskTransaction(topic_name(f"tid-{request.node.name}"), 0)
    values = [b"row-%d" % i for i in range(40)]
    lost = write_transaction(iter(_rows(values)), options, VALUES_ONLY, task)  # its driver died
    again = write_transaction(iter(_rows(values)), options, VALUES_ONLY, task)  # the replay
    assert again.transaction is not None and not again.already_written
    with pytest.raises(ProducerFencedError, match="fenced"):
        _commit(options, lost)  # the replay's InitProducerId aborted it
    _commit(options, again)
    assert _committed_values(bootstrap, topic, 2) == sorted(values)
    with KafkaClient(bootstrap) as client:
        ends = client.list_offsets({TopicPartition(topic, p): -1 for p in range(2)})
    # Each partition: 20 rows aborted, their abort marker, the same 20 rows again, a commit marker.
    assert ends == {TopicPartition(topic, p): 42 for p in range(2)}


def test_a_zombie_attempt_of_the_task_is_fenced_and_its_rows_aborted(bootstrap, make_topic, request) -> None:
    topic = make_topic(2)
    options = _exactly_once_options(bootstrap, topic)
    task = TaskTransaction(topic_name(f"tid-{request.node.name}"), batch_id=0)
    with KafkaClient(bootstrap) as client:
        zombie = TransactionalProducer(client, task.transactional_id)
        zombie.init_transactions()
        zombie.begin()
        for i in range(20):
            zombie.send(topic, b"zombie-%d" % i, partition=i % 2)
        zombie.flush()  # written, in a transaction left open

        values = [b"row-%d" % i for i in range(20)]
        _commit(options, write_transaction(iter(_rows(values)), options, VALUES_ONLY, task))
        with pytest.raises(ProducerFencedError, match="fenced"):
            zombie.commit()
        ends = client.list_offsets({TopicPartition(topic, p): -1 for p in range(2)})
    assert _committed_values(bootstrap, topic, 2) == sorted(values)
    # Each partition: the zombie's 10 rows, its abort marker, the task's 10 rows, their commit marker.
    assert ends == {TopicPartition(topic, p): 22 for p in range(2)}


def _produce_numbered(bootstrap: str, topic: str, count: int, partitions: int) -> list[bytes]:
    values = [b"record-%06d" % i for i in range(count)]
    produce(bootstrap, topic, [(i % partitions, None, v) for i, v in enumerate(values)])
    return values


def _batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def _kill_while_committing(
    bootstrap: str, in_topic: str, out_topic: str, checkpoint: Path, hold: Path, exactly_once: bool
) -> None:
    """Run sink_job.py until Spark's driver commits micro-batch 2, then SIGKILL it there."""
    stderr = hold.with_name(hold.name + ".stderr")
    with open(stderr, "wb") as job_stderr:
        job = subprocess.Popen(
            [
                sys.executable,
                str(SINK_JOB),
                bootstrap,
                in_topic,
                out_topic,
                str(checkpoint),
                "600",
                str(exactly_once).lower(),
                "2",
                str(hold),
            ],
            stdout=subprocess.DEVNULL,
            stderr=job_stderr,
            start_new_session=True,
        )
    try:
        wait_until(lambda: hold.exists() or job.poll() is not None, 240, "the commit of batch 2", 0.05)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert hold.exists(), (
        f"the driver exited with {job.returncode} before committing batch 2\n" + exit_report(None, stderr)
    )
    assert 2 in _batch_ids(checkpoint / "offsets") and 2 not in _batch_ids(checkpoint / "commits")


def _restart(spark, bootstrap: str, in_topic: str, out_topic: str, checkpoint: Path, exactly_once: bool):
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "600")
        .load()
        .select("value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    assert 2 in _batch_ids(checkpoint / "commits")


@pytest.mark.slow
@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_driver_killed_mid_commit_and_restarted(spark, bootstrap, make_topic, tmp_path, exactly_once) -> None:
    in_topic, out_topic = make_topic(3, "eos-in"), make_topic(3, "eos-out")
    values = _produce_numbered(bootstrap, in_topic, 3000, 3)
    checkpoint, hold = tmp_path / "ck", tmp_path / "holding-batch-2"

    _kill_while_committing(bootstrap, in_topic, out_topic, checkpoint, hold, exactly_once)
    before = _committed_values(bootstrap, out_topic, 3, wait_s=3)
    if exactly_once:
        # batches 0 and 1; of batch 2 at most the task the driver committed: its rows are visible only
        # in partitions where no other task's transaction (left open) began before them
        assert 1200 <= len(before) < 1800, len(before)
    else:
        assert len(before) == 1800, "batches 0-2 were not all written when the driver was killed"
    _restart(spark, bootstrap, in_topic, out_topic, checkpoint, exactly_once)

    after = _committed_values(bootstrap, out_topic, 3)
    if exactly_once:
        assert after == sorted(values), "a record was lost or written twice"
    else:
        # Spark's guarantee for Kafka sinks: the replayed micro-batch 2 is written a second time.
        twice = [v for v, n in Counter(after).items() if n == 2]
        assert set(after) == set(values) and len(twice) == 600 and len(after) == 3600


def test_a_batch_write_task_failing_after_producing_is_retried_without_duplicates(
    spark, bootstrap, make_topic, tmp_path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    topic = make_topic(2)
    marker = str(tmp_path / "failed-once")

    def fail_once_at_the_last_row(i: int, value: bytes) -> bytes:
        if i == 999:  # the last row of the first task
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return value
            raise RuntimeError("injected task failure at its last row")
        return value

    udf = F.udf(fail_once_at_the_last_row, BinaryType(), useArrow=False)
    rows = (
        spark.range(0, 2000, 1, 2)
        # 1 KB rows: Spark's buffered stream to the sink's worker passes what the task read before failing
        .select(F.col("id"), F.format_string("row-%05d-%s", "id", F.repeat(F.lit("."), 1000)).alias("value"))
        .withColumn("value", F.col("value").cast("binary"))
        .withColumn("value", udf("id", "value"))
        .select("value")
    )
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        (
            rows.write.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", "true")
            .option("kafka.linger.ms", "0")
            .mode("append")
            .save()
        )
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    assert os.path.exists(marker), "the injected failure never happened"
    expected = sorted(b"row-%05d-%s" % (i, b"." * 1000) for i in range(2000))
    assert _committed_values(bootstrap, topic, 2) == expected
    with KafkaClient(bootstrap) as client:
        ends = client.list_offsets({TopicPartition(topic, p): -1 for p in range(2)})
    assert sum(ends.values()) > 2000 + 2 * 2, "the failed attempt had produced nothing before failing"
