"""The demo pipeline: the page-views feed checked against a count done in Python, read back by a plain
Kafka client; the page views dropped as late, counted and named; and the one-command run
(`python -m odradek.pipeline`) against a broker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime

import pytest

from odradek.client import KafkaClient, TopicPartition
from odradek.pipeline.__main__ import late_events_line
from odradek.pipeline.feed import WATERMARK_DELAY, WINDOW, run_feed
from odradek.pipeline.generator import generate_events, publish
from tests.conftest import topic_name
from tests.spark.helpers import consume_all

START_MS = 1_700_000_000_000 + 17_123  # keeps window ends off the watermark
WATERMARK_MS = 120_000


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_page_views_feed_matches_a_count_done_in_python(spark, bootstrap, make_topic, tmp_path) -> None:
    activity, feed = make_topic(3, hint="activity"), make_topic(2, hint="feed")
    events = list(generate_events(3000, users=12, start_ms=START_MS, step_ms=100, seed=11))
    with KafkaClient(bootstrap) as client:
        publish(client, activity, iter(events))
    result = run_feed(spark, bootstrap, activity, feed, str(tmp_path / "ck"))

    watermark = max(e.ts for e in events) - WATERMARK_MS
    views = Counter((e.user_id, e.ts - e.ts % 60_000) for e in events if e.event_type == "page_view")
    assert all(start + 60_000 != watermark for _, start in views)
    expected = {(user, _iso(start)): n for (user, start), n in views.items() if start + 60_000 <= watermark}

    records = consume_all(bootstrap, feed, 2)
    values = [json.loads(r.value) for r in records]
    got = {(v["user_id"], v["window_start"]): v["page_views"] for v in values}
    assert len(got) == len(values), "a window was emitted twice"
    assert got == expected
    assert all(r.key == json.loads(r.value)["user_id"].encode() for r in records)
    assert result.records_in == 3000 and result.batches == 1
    assert result.end_offsets == {
        activity: {str(p): n for p, n in _per_partition(bootstrap, activity).items()}
    }


def test_page_views_behind_the_watermark_are_counted(spark, bootstrap, make_topic, tmp_path) -> None:
    activity, feed = make_topic(2, hint="late-activity"), make_topic(1, hint="late-feed")
    checkpoint = str(tmp_path / "ck")
    first = list(generate_events(3000, users=12, start_ms=START_MS, step_ms=200, seed=3))  # 0 to 600 s
    with KafkaClient(bootstrap) as client:
        publish(client, activity, iter(first))
    assert run_feed(spark, bootstrap, activity, feed, checkpoint).late_page_views == 0

    watermark = max(e.ts for e in first) - WATERMARK_MS
    rerun = list(generate_events(1000, users=12, start_ms=START_MS + 300_000, step_ms=300, seed=4))
    with KafkaClient(bootstrap) as client:
        publish(client, activity, iter(rerun))
    result = run_feed(spark, bootstrap, activity, feed, checkpoint)

    window_ends = {e.ts - e.ts % 60_000 + 60_000 for e in rerun}
    assert watermark not in window_ends
    views = [e for e in rerun if e.event_type == "page_view"]
    closed = [e for e in views if e.ts - e.ts % 60_000 + 60_000 <= watermark]
    assert 0 < len(closed) < len(views), "some of the rerun's windows had closed, not all"
    assert result.records_in == 1000
    assert result.late_page_views == len(closed)
    assert result.late_watermark == _iso(watermark - watermark % 1000)[:-1] + f".{watermark % 1000:03d}Z"
    assert late_events_line(result, WINDOW, WATERMARK_DELAY).startswith(
        f"feed: dropped {len(closed):,} page views older than the watermark {result.late_watermark}:"
        " their 1 minute windows had already closed"
    )


def _per_partition(bootstrap: str, topic: str) -> dict[int, int]:
    with KafkaClient(bootstrap) as client:
        tps = [TopicPartition(topic, p) for p in range(client.partition_count(topic))]
        return {tp.partition: offset for tp, offset in client.list_offsets(dict.fromkeys(tps, -1)).items()}


@pytest.mark.slow
@pytest.mark.spark
def test_pipeline_runs_in_one_command_and_resumes(bootstrap, tmp_path) -> None:
    activity, feed = topic_name("cli-activity"), topic_name("cli-feed")

    def pipeline(events: int, *more: str) -> str:
        command = [
            sys.executable, "-m", "odradek.pipeline", "--bootstrap-server", bootstrap, "--topic", activity,
            "--feed-topic", feed, "--partitions", "2", "--events", str(events), "--users", "20",
            "--workdir", str(tmp_path), "--seed", "5", *more,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    first = pipeline(3000)
    assert "generate: 3000 events" in first
    assert "load: batch 1 committed" in first and "records in 3000" in first
    assert "feed: 1 micro-batches, records in 3000, records out" in first
    assert f"source offsets reached {{'{activity}'" in first
    second = pipeline(0)
    assert "load: nothing new" in second
    assert "records in 0" in second
    assert "dropped" not in first + second
    # 300 events ten seconds apart, ending now: the older ones fall in windows the first run closed
    # (its watermark trails its newest event by 2 minutes; the 50 minutes spanned keep some events
    # behind it however long the runs in between take on a loaded machine)
    third = pipeline(300, "--step-ms", "10000")
    assert "records in 300" in third
    dropped = re.search(r"^feed: dropped ([\d,]+) page views older than the watermark \S+: ", third, re.M)
    assert dropped and int(dropped.group(1).replace(",", "")) > 0, third
