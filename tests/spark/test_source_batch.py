"""Batch reads (`spark.read.format("odradek")`) against a real broker: schema and option parity with
Spark's Kafka source, and data loss handling."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from odradek.client import TopicPartition
from odradek.spark.schema import spark_schema
from tests.spark.helpers import RETAIN_LITTLE, assert_one_line, produce, wait_for_log_start

BASE_TS = 1_700_000_000_000
SPARK_KAFKA_DDL = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
    "timestampType:int,headers:array<struct<key:string,value:binary>>>"
)


def _read(spark, bootstrap: str, **options: str):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _ms(ts: datetime) -> int:
    return int(ts.replace(tzinfo=UTC).timestamp() * 1000) if ts.tzinfo is None else int(ts.timestamp() * 1000)


def _three_partition_topic(make_topic, bootstrap: str, per_partition: int = 10):
    topic = make_topic(3)
    records = [
        (i % 3, None if i % 5 == 0 else b"key-%d" % i, None if i == 7 else b"value-%d" % i)
        for i in range(3 * per_partition)
    ]
    produced = produce(
        bootstrap,
        topic,
        records,
        headers=lambda i: [("n", b"%d" % i), ("empty", None)] if i % 2 else [],
        timestamp_ms=lambda i: BASE_TS + i * 1000,
    )
    return topic, produced


def test_batch_read_returns_what_a_kafka_client_wrote(spark, bootstrap, make_topic) -> None:
    topic, produced = _three_partition_topic(make_topic, bootstrap)
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == SPARK_KAFKA_DDL
    assert df.schema == spark_schema(include_headers=True)
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in rows] == [(p.partition, p.offset) for p in produced]
    for row, want in zip(rows, produced, strict=True):
        assert (row.key, row.value, row.topic) == (want.key, want.value, topic)
        assert _ms(row.timestamp) == want.timestamp_ms and row.timestampType == 0
        assert [(h.key, h.value) for h in row.headers] == list(want.headers)


def test_schema_has_no_headers_unless_asked(spark, bootstrap) -> None:
    df = _read(spark, bootstrap, subscribe="whatever")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_starting_and_ending_offsets_per_partition(spark, bootstrap, make_topic) -> None:
    topic, _ = _three_partition_topic(make_topic, bootstrap)
    df = _read(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 9}}),
        endingOffsets=json.dumps({topic: {"0": 5, "1": -1, "2": 10}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, 2), (0, 3), (0, 4)] + [(1, o) for o in range(10)] + [(2, 9)]


def test_offsets_by_timestamp(spark, bootstrap, make_topic) -> None:
    topic, produced = _three_partition_topic(make_topic, bootstrap)
    p0 = [r for r in produced if r.partition == 0]
    df = _read(
        spark,
        bootstrap,
        assign=json.dumps({topic: [0]}),
        startingOffsetsByTimestamp=json.dumps({topic: {"0": p0[3].timestamp_ms - 1}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": p0[6].timestamp_ms}}),
    )
    assert sorted(r.offset for r in df.select("offset").collect()) == [3, 4, 5]


def test_min_partitions_splits_a_partition_into_several_tasks(spark, bootstrap, make_topic) -> None:
    topic, produced = _three_partition_topic(make_topic, bootstrap, per_partition=40)
    df = _read(spark, bootstrap, subscribe=topic, minPartitions="12")
    assert df.rdd.getNumPartitions() == 12
    offsets = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
    assert sorted(offsets) == [(p.partition, p.offset) for p in produced]


def test_subscribe_pattern_and_assign(spark, bootstrap, make_topic) -> None:
    first = make_topic(2, hint="pattern-a")
    second = make_topic(1, hint="pattern-b")
    produce(bootstrap, first, [(0, None, b"a0"), (1, None, b"a1")])
    produce(bootstrap, second, [(0, None, b"b0")])
    pattern = f"({first}|{second})"
    by_pattern = _read(spark, bootstrap, subscribePattern=pattern).select("value").collect()
    assert sorted(r.value for r in by_pattern) == [b"a0", b"a1", b"b0"]
    assigned = _read(spark, bootstrap, assign=json.dumps({first: [1], second: [0]})).select("value").collect()
    assert sorted(r.value for r in assigned) == [b"a1", b"b0"]


def test_starting_offsets_beyond_the_end_fail_whatever_fail_on_data_loss(
    spark, bootstrap, make_topic
) -> None:
    topic, _ = _three_partition_topic(make_topic, bootstrap)
    options = {"assign": json.dumps({topic: [0]}), "startingOffsets": json.dumps({topic: {"0": 1000}})}
    for fail_on_data_loss in ("true", "false"):
        df = _read(spark, bootstrap, failOnDataLoss=fail_on_data_loss, **options)
        with pytest.raises(PySparkException) as failure:
            df.collect()
        assert_one_line(
            failure.value,
            f"Beginning offset 1000 is after the ending offset 10 for topic {topic} partition 0",
        )


def test_records_removed_by_retention_are_data_loss(spark, bootstrap, make_topic, client) -> None:
    topic = make_topic(1, configs=RETAIN_LITTLE)
    for i in range(12):
        produce(bootstrap, topic, [(0, None, b"%03d" % i + b"." * 300)])
    wait_for_log_start(client, TopicPartition(topic, 0))
    options = {
        "assign": json.dumps({topic: [0]}),
        "startingOffsets": json.dumps({topic: {"0": 0}}),
        "endingOffsets": json.dumps({topic: {"0": 12}}),
    }
    with pytest.raises((PySparkException, Py4JJavaError), match=r"offsets \[0, \d+\) of .* were deleted"):
        _read(spark, bootstrap, **options).collect()
    lenient = sorted(r.offset for r in _read(spark, bootstrap, failOnDataLoss="false", **options).collect())
    log_start = client.list_offsets({TopicPartition(topic, 0): -2})[TopicPartition(topic, 0)]
    assert 0 < log_start == lenient[0] and lenient == list(range(log_start, 12))


def test_partial_offsets_json_is_refused(spark, bootstrap, make_topic) -> None:
    topic, _ = _three_partition_topic(make_topic, bootstrap)
    with pytest.raises(PySparkException, match="must name every partition of the subscription"):
        _read(spark, bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 1}})).collect()
