"""What the driver processes that tests SIGKILL share (stream_job.py, sink_job.py): a local
SparkSession with odradek registered, and a stream of one topic from its earliest offsets with
admission control. Imported by those scripts, which run with this directory first on sys.path."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app_name: str) -> Any:
    """A `local[2]` SparkSession without UI or progress bars, odradek's source and sink registered."""
    from pyspark.sql import SparkSession

    import odradek.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark


def read_topic(spark: Any, bootstrap: str, topic: str, max_offsets: str) -> Any:
    """A streaming DataFrame of `topic` from the earliest offsets, `max_offsets` per trigger."""
    return (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
    )
