"""A streaming query topic -> topic through the odradek sink, run as its own driver process so a test
can SIGKILL it in the middle of a micro-batch's commit.

Usage: python tests/spark/sink_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC CHECKPOINT_DIR MAX_OFFSETS_PER_TRIGGER
       EXACTLY_ONCE HOLD_BATCH HOLD_FILE

It reads IN_TOPIC from the earliest offsets with admission control and writes the values to OUT_TOPIC
(with `exactlyOnce` = EXACTLY_ONCE) under the checkpoint, one micro-batch after another. The sink is
odradek's, registered under another name with one change: when Spark's driver commits micro-batch
HOLD_BATCH (every task of it has written, but the checkpoint's commit log does not record the batch
yet), the commit does the first task's part (with exactlyOnce: commits that task's transaction and
not the others'), creates HOLD_FILE and waits forever, so the test kills the driver there.
Used by tests/spark/test_sink_exactly_once.py.
"""

from __future__ import annotations

import sys
import time

from driver_job import local_session, read_topic


def main(
    bootstrap: str,
    in_topic: str,
    out_topic: str,
    checkpoint: str,
    max_offsets: str,
    exactly_once: str,
    hold_batch: str,
    hold_file: str,
) -> None:
    from odradek.spark.source import OdradekDataSource
    from odradek.spark.writer import StreamWriter

    class HeldCommitWriter(StreamWriter):
        def commit(self, messages, batchId: int) -> None:
            if batchId == int(hold_batch):
                super().commit(messages[:1], batchId)  # the first task's rows, then stop
                open(hold_file, "w").close()
                time.sleep(3600)
            super().commit(messages, batchId)

    class HeldCommitSource(OdradekDataSource):
        @classmethod
        def name(cls) -> str:
            return "odradek_held_commit"

        def streamWriter(self, schema, overwrite):
            writer = super().streamWriter(schema, overwrite)
            return HeldCommitWriter(writer.options, writer.layout)

    spark = local_session("odradek-sink-kill-target")
    spark.dataSource.register(HeldCommitSource)
    query = (
        read_topic(spark, bootstrap, in_topic, max_offsets)
        .select("value")
        .writeStream.format("odradek_held_commit")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("exactlyOnce", exactly_once)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:9])
