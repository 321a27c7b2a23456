"""A streaming query from a topic to Parquet, run as its own driver process so a test can SIGKILL it.

Usage: python tests/spark/stream_job.py BOOTSTRAP TOPIC OUTPUT_DIR CHECKPOINT_DIR MAX_OFFSETS_PER_TRIGGER

It reads the topic from the earliest offsets with admission control and writes (partition, offset,
value) to Parquet through Spark's file sink with its checkpoint, one micro-batch after another, until
it is killed. Used by tests/spark/test_exactly_once.py.
"""

from __future__ import annotations

import os
import sys


def main(bootstrap: str, topic: str, output: str, checkpoint: str, max_offsets: str) -> None:
    from pyspark.sql import SparkSession

    import odradek.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-kill-target")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
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
