"""A driver for a Spark standalone cluster: batch read, streaming query with a checkpoint, and a write.

Usage: python tests/spark/cluster_job.py MASTER_URL BOOTSTRAP TOPIC OUT_TOPIC WORKDIR UI_PORT SRC_DIR

Executors get the package the way docs/spark.md describes for a cluster whose workers share this
machine's Python: `spark.pyspark.python` names that interpreter and `spark.executorEnv.PYTHONPATH`
the source tree. The job prints one JSON object on its last line:
- `batch`: (partition, offset) of every row a batch read returned;
- `executors_by_partition`: for the batch read's stage, the executor id each Kafka partition's task
  ran on, from the driver's REST API (Spark's own record of where tasks ran);
- `stream_runs`: rows written by two AvailableNow runs of one streaming query sharing a checkpoint
  (records produced in between), as (partition, offset) read back from its Parquet output;
- `written`: how many rows the batch write sent to OUT_TOPIC.
Used by tests/spark/test_cluster.py.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path


def _stage_executors(ui_port: str, app_id: str, description: str) -> dict[int, str]:
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app_id}"
    with urllib.request.urlopen(f"{base}/jobs") as response:
        jobs = json.load(response)
    stage_ids = [stage for job in jobs if job.get("description") == description for stage in job["stageIds"]]
    placed: dict[int, str] = {}
    for stage_id in stage_ids:
        with urllib.request.urlopen(f"{base}/stages/{stage_id}/0/taskList?length=100") as response:
            for task in json.load(response):
                placed[task["index"]] = task["executorId"]
    return placed


def _stream_once(spark, bootstrap: str, topic: str, workdir: Path) -> None:
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(workdir / "stream-out"))
        .option("checkpointLocation", str(workdir / "stream-ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main(
    master: str, bootstrap: str, topic: str, out_topic: str, workdir: str, ui_port: str, src: str
) -> None:
    from pyspark.sql import SparkSession

    import odradek.spark
    from tests.spark.helpers import produce

    spark = (
        SparkSession.builder.master(master)
        .appName("odradek-cluster")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.port", ui_port)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", src)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and two executors
        spark.sparkContext._jvm.java.lang.Thread.sleep(200)

    spark.sparkContext.setJobDescription("batch-read")
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    batch = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
    spark.sparkContext.setJobDescription(None)
    executors = _stage_executors(ui_port, spark.sparkContext.applicationId, "batch-read")

    work = Path(workdir)
    _stream_once(spark, bootstrap, topic, work)
    first = spark.read.parquet(str(work / "stream-out")).count()
    produce(bootstrap, topic, [(i % 2, None, b"late-%d" % i) for i in range(10)])
    _stream_once(spark, bootstrap, topic, work)
    rows = spark.read.parquet(str(work / "stream-out")).collect()

    df.select("key", "value").write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", out_topic
    ).save()
    print(
        json.dumps(
            {
                "batch": batch,
                "executors_by_partition": executors,
                "stream_runs": [first, len(rows)],
                "stream_rows": sorted((r.partition, r.offset) for r in rows),
                "written": len(batch),
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:8])
