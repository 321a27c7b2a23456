"""The streaming job: page views per user per minute, derived from web activity, written to a topic.

Owns the derived feed's definition and format. The job reads the activity topic with the `odradek`
streaming source, keeps page_view events, assigns them to tumbling event-time windows (1 minute by
default) per user, bounds state with a watermark (event time minus 2 minutes by default) and, in
append mode, emits each (user, window) count once its window has closed under the watermark. Each
output record has key = user id and value =
`{"user_id", "window_start", "window_end", "page_views"}` (times as ISO-8601 UTC strings), and goes to
the feed topic through the `odradek` sink.

Invariants: progress (source offsets and window state) lives in the checkpoint directory, so a rerun
continues where the last one stopped; windows still open under the watermark are emitted by a later
run. The sink is at-least-once, as Spark's Kafka sink: a batch replayed after a crash between
producing and committing is produced again.

Callers: odradek.pipeline.__main__, tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from odradek.pipeline.load import events_frame


@dataclass(frozen=True, slots=True)
class FeedResult:
    """What one run of the streaming job did."""

    batches: int
    records_in: int
    end_offsets: dict
    watermark: str | None


def page_views_per_minute(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Key/value records of per-user page-view counts per event-time window."""
    counts = (
        events.where(F.col("event_type") == "page_view")
        .withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), "user_id")
        .count()
    )
    value = F.to_json(
        F.struct(
            "user_id",
            F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            F.col("count").alias("page_views"),
        )
    )
    return counts.select(F.col("user_id").alias("key"), value.alias("value"))


def run_feed(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    feed_topic: str,
    checkpoint: str,
    *,
    window: str = "1 minute",
    watermark: str = "2 minutes",
    max_offsets_per_trigger: int | None = None,
) -> FeedResult:
    """Process everything available now in `topic`, then stop (Trigger.AvailableNow)."""
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    feed = page_views_per_minute(events_frame(reader.load()), window, watermark)
    query = (
        feed.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", feed_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["sources"]]
    with_input = [p for p in progress if p["numInputRows"]]
    end_offsets = json.loads(progress[-1]["sources"][0]["endOffset"] or "{}") if progress else {}
    reached = progress[-1]["eventTime"].get("watermark") if progress else None
    return FeedResult(len(with_input), sum(p["numInputRows"] for p in progress), end_offsets, reached)
