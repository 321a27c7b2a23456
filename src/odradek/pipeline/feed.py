"""The streaming job: page views per user per minute, derived from web activity, written to a topic.

Owns the derived feed's definition and format. The job reads the activity topic with the `odradek`
streaming source, keeps page_view events, assigns them to tumbling event-time windows (1 minute by
default) per user, bounds state with a watermark (event time minus 2 minutes by default) and, in
append mode, emits each (user, window) count once its window has closed under the watermark. Each
output record has key = user id and value =
`{"user_id", "window_start", "window_end", "page_views"}` (times as ISO-8601 UTC strings), and goes to
the feed topic through the `odradek` sink.

Late events: Spark drops a page view whose window had already closed under the watermark in force
for its micro-batch (window end <= watermark), without a word. Its own metric
(`numRowsDroppedByWatermark`) counts rows after partial aggregation, not events, so when it is
non-zero the job counts the dropped page views itself: it reads that micro-batch's offset range
again as a batch and applies Spark's rule (window end <= the batch's watermark). `FeedResult` carries
the count and the watermark, so the pipeline can say how many events were dropped and why. That
extra read happens only for micro-batches that dropped something.

Invariants: progress (source offsets and window state) lives in the checkpoint directory, so a rerun
continues where the last one stopped; windows still open under the watermark are emitted by a later
run. The sink is at-least-once, as Spark's Kafka sink: a batch replayed after a crash between
producing and committing is produced again.

Callers: odradek.pipeline.__main__, tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from odradek.pipeline.load import events_frame

WINDOW = "1 minute"
WATERMARK_DELAY = "2 minutes"


@dataclass(frozen=True, slots=True)
class FeedResult:
    """What one run of the streaming job did."""

    batches: int
    records_in: int
    end_offsets: dict
    watermark: str | None
    late_page_views: int = 0
    late_watermark: str | None = None  # the watermark that late page views fell behind (the last one)


def page_views(events: DataFrame) -> DataFrame:
    return events.where(F.col("event_type") == "page_view")


def page_views_per_minute(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Key/value records of per-user page-view counts per event-time window."""
    counts = (
        page_views(events)
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
    window: str = WINDOW,
    watermark: str = WATERMARK_DELAY,
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
    dropping = [p for p in with_input if _dropped_rows(p)]
    late = sum(_late_page_views(spark, bootstrap, topic, p, window) for p in dropping)
    return FeedResult(
        len(with_input),
        sum(p["numInputRows"] for p in progress),
        end_offsets,
        reached,
        late,
        dropping[-1]["eventTime"]["watermark"] if dropping else None,
    )


def _dropped_rows(progress: dict[str, Any]) -> int:
    operators: Sequence[dict[str, Any]] = progress.get("stateOperators") or ()
    return sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)


def _late_page_views(
    spark: SparkSession, bootstrap: str, topic: str, progress: dict[str, Any], window: str
) -> int:
    """Page views of one micro-batch whose window had closed under that batch's watermark."""
    source = progress["sources"][0]
    end = json.loads(source["endOffset"]).get(topic, {})
    start = json.loads(source["startOffset"] or "{}").get(topic, {})
    raw = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: sorted(int(p) for p in end)}))
        .option("startingOffsets", json.dumps({topic: {p: start.get(p, -2) for p in end}}))
        .option("endingOffsets", json.dumps({topic: end}))
        .load()
    )
    watermark = datetime.fromisoformat(progress["eventTime"]["watermark"])
    window_end = F.window("event_time", window).getField("end")
    return page_views(events_frame(raw)).where(window_end <= F.lit(watermark)).count()
