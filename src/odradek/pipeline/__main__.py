"""`python -m odradek.pipeline --bootstrap HOST:PORT ...`: the whole demo pipeline in one command.

Steps, against a running broker:
1. generate web-activity events keyed by user id into the activity topic (created if missing);
2. offline load: new records of the activity topic into the Parquet warehouse table, partitioned by
   date, with the consumed offsets committed atomically with the data (odradek.pipeline.load);
3. streaming job: page views per user per minute into the feed topic (odradek.pipeline.feed);
4. read the feed topic back with the plain blocking Kafka client.
It prints what each step did: records in, records out, offsets reached. Rerunning resumes: the load
starts from the offsets stored in the table, the streaming job from its checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from odradek.client import KafkaClient, TopicPartition, read_range
from odradek.pipeline.generator import generate_events, publish
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.spark.offsets import to_offset_json


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m odradek.pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="broker host:port")
    parser.add_argument("--topic", default="web-activity", help="activity topic (default: %(default)s)")
    parser.add_argument("--feed-topic", default="page-views-per-minute", help="derived feed topic")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of topics created here")
    parser.add_argument("--events", type=int, default=20_000, help="events to generate (0: none)")
    parser.add_argument("--users", type=int, default=200, help="distinct users")
    parser.add_argument("--step-ms", type=int, default=50, help="event-time spacing of generated events")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="generator seed")
    parser.add_argument(
        "--workdir", type=Path, default=Path("odradek-pipeline"), help="warehouse + checkpoints"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s)")
    return parser.parse_args(argv)


def _ensure_topics(client: KafkaClient, names: list[str], partitions: int) -> None:
    for name in names:
        if client.partition_count(name) == 0:
            try:
                client.create_topics({name: partitions})
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise


def _spark(master: str):
    from pyspark.sql import SparkSession

    import odradek.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(master)
        .appName("odradek-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    return session


def _read_feed(client: KafkaClient, topic: str, partitions: int) -> int:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    starts = client.list_offsets(dict.fromkeys(tps, -2))
    ends = client.list_offsets(dict.fromkeys(tps, -1))
    total = 0
    for tp in tps:
        for columns in read_range(client, tp, starts[tp], ends[tp], on_data_loss=print):
            total += len(columns)
    return total


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    warehouse, checkpoint = args.workdir / "warehouse" / "web_activity", args.workdir / "checkpoints" / "feed"
    with KafkaClient(args.bootstrap, client_id="odradek-pipeline") as client:
        _ensure_topics(client, [args.topic, args.feed_topic], args.partitions)
        if args.events:
            start_ms = time.time_ns() // 1_000_000 - args.events * args.step_ms
            events = generate_events(
                args.events, users=args.users, start_ms=start_ms, step_ms=args.step_ms, seed=args.seed
            )
            per_partition = publish(client, args.topic, events)
            print(f"generate: {args.events} events -> {args.topic}, records per partition {per_partition}")
        spark = _spark(args.master)
        try:
            from odradek.pipeline.feed import run_feed
            from odradek.pipeline.load import run_load

            load = run_load(spark, args.bootstrap, args.topic, warehouse)
            if load.batch_id is None:
                offsets = json.dumps(to_offset_json(load.end))
                print(f"load: nothing new in {args.topic}; offsets stay at {offsets}")
            else:
                print(
                    f"load: batch {load.batch_id} committed to {warehouse}: records in {load.rows},"
                    f" rows by date {load.rows_by_date}, offsets {json.dumps(to_offset_json(load.start))}"
                    f" -> {json.dumps(to_offset_json(load.end))}"
                )
            feed_count = client.partition_count(args.feed_topic)
            before = _read_feed(client, args.feed_topic, feed_count)
            feed = run_feed(spark, args.bootstrap, args.topic, args.feed_topic, str(checkpoint))
            after = _read_feed(client, args.feed_topic, feed_count)
            print(
                f"feed: {feed.batches} micro-batches, records in {feed.records_in},"
                f" records out {after - before} -> {args.feed_topic},"
                f" source offsets reached {feed.end_offsets}, watermark {feed.watermark}"
            )
            print(f"read back: {after} records in {args.feed_topic} read by the plain client")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
