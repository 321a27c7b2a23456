"""Streaming reads (`spark.readStream.format("odradek")`) against a real broker: admission control,
Trigger.AvailableNow, canonical checkpoint offsets, partitions added and topics deleted mid-stream."""

from __future__ import annotations

import json
from pathlib import Path

from odradek.client import KafkaClient
from tests.spark.helpers import produce, wait_until


def _stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _to_memory(df, name: str, checkpoint: Path, **trigger: object):
    return (
        df.select("topic", "partition", "offset", "value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _positions(spark, name: str) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in spark.table(name).collect())


def _checkpoint_offsets(checkpoint: Path) -> list[str]:
    """The source offset line of every offsets log entry, in batch order."""
    entries = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    return [entry.read_text().splitlines()[2] for entry in entries]


def test_available_now_with_max_offsets_per_trigger(spark, bootstrap, make_topic, tmp_path) -> None:
    topic = make_topic(2)
    produce(bootstrap, topic, [(i % 2, None, b"%d" % i) for i in range(100)])
    query = _to_memory(
        _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30"),
        "avail_now",
        tmp_path / "ck",
        availableNow=True,
    )
    query.awaitTermination(120)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    assert _positions(spark, "avail_now") == [(topic, p, o) for p in range(2) for o in range(50)]
    lines = _checkpoint_offsets(tmp_path / "ck")
    assert lines[-1] == json.dumps({topic: {"0": 50, "1": 50}})
    for line in lines:
        parsed = json.loads(line)
        assert json.dumps(parsed) == line
        assert all(list(parts) == sorted(parts, key=int) for parts in parsed.values())


def test_partition_added_while_the_stream_runs(
    spark, bootstrap, make_topic, client: KafkaClient, tmp_path
) -> None:
    topic = make_topic(2)
    produce(bootstrap, topic, [(p, None, b"first") for p in (0, 1) for _ in range(10)])
    query = _to_memory(
        _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"),
        "added_partition",
        tmp_path / "ck",
        processingTime="300 milliseconds",
    )
    try:
        wait_until(lambda: spark.table("added_partition").count() == 20, what="first 20 records")
        client.create_partitions({topic: 3})
        produce(bootstrap, topic, [(2, None, b"new")] * 5 + [(0, None, b"more")] * 5)
        wait_until(lambda: spark.table("added_partition").count() >= 30, what="records of the new partition")
        assert query.exception() is None
    finally:
        query.stop()
    expected = [(topic, 0, o) for o in range(15)] + [(topic, 1, o) for o in range(10)]
    assert _positions(spark, "added_partition") == sorted(expected + [(topic, 2, o) for o in range(5)])


def test_deleted_topic_fails_the_query_when_fail_on_data_loss(
    spark, bootstrap, make_topic, client: KafkaClient, tmp_path
) -> None:
    topic = make_topic(1)
    produce(bootstrap, topic, [(0, None, b"x")] * 5)
    query = _to_memory(
        _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"),
        "deleted_strict",
        tmp_path / "ck",
        processingTime="300 milliseconds",
    )
    try:
        wait_until(lambda: spark.table("deleted_strict").count() == 5, what="the first records")
        client.delete_topics([topic])
        wait_until(lambda: not query.isActive, what="the query to fail")
        assert "vanished" in str(query.exception())
    finally:
        query.stop()


def _started_without(query, topic: str) -> bool:
    """A trigger of `query` began from offsets that no longer name `topic` (it was dropped before)."""
    starts = [json.loads(p["sources"][0]["startOffset"] or "null") for p in query.recentProgress]
    return any(start is not None and topic not in start for start in starts)


def test_deleted_topic_is_skipped_without_fail_on_data_loss(
    spark, bootstrap, make_topic, client: KafkaClient, tmp_path
) -> None:
    doomed, kept = make_topic(1, hint="doomed"), make_topic(1, hint="kept")
    produce(bootstrap, doomed, [(0, None, b"d")] * 3)
    produce(bootstrap, kept, [(0, None, b"k")] * 3)
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    query = _to_memory(
        _stream(
            spark, bootstrap, subscribe=f"{doomed},{kept}", startingOffsets="earliest", failOnDataLoss="false"
        ),
        "deleted_lenient",
        tmp_path / "ck",
        processingTime="300 milliseconds",
    )
    try:
        wait_until(lambda: spark.table("deleted_lenient").count() == 6, what="the first records")
        client.delete_topics([doomed])
        wait_until(lambda: _started_without(query, doomed), what="a trigger that starts without the topic")
        produce(bootstrap, kept, [(0, None, b"k2")] * 4)
        wait_until(lambda: spark.table("deleted_lenient").count() == 10, what="records after the deletion")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    assert [p for p in _positions(spark, "deleted_lenient") if p[0] == kept] == [
        (kept, 0, o) for o in range(7)
    ]
