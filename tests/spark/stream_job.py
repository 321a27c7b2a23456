"""A streaming query from a topic to Parquet, run as its own driver process so a test can SIGKILL it.

Usage: python tests/spark/stream_job.py BOOTSTRAP TOPIC OUTPUT_DIR CHECKPOINT_DIR MAX_OFFSETS_PER_TRIGGER

It reads the topic from the earliest offsets with admission control and writes (partition, offset,
value) to Parquet through Spark's file sink with its checkpoint, one micro-batch after another, until
it is killed. Used by tests/spark/test_exactly_once.py.
"""

from __future__ import annotations

import sys

from driver_job import local_session, read_topic


def main(bootstrap: str, topic: str, output: str, checkpoint: str, max_offsets: str) -> None:
    spark = local_session("odradek-kill-target")
    query = (
        read_topic(spark, bootstrap, topic, max_offsets)
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
