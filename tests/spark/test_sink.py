"""The `odradek` sink: DataFrames written in batch and streaming mode, read back by confluent-kafka."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException

from odradek.client.producer import partition_for_key
from tests.spark.helpers import Produced, consume_all, produce

ROW_SCHEMA = "key string, value binary, headers array<struct<key:string,value:binary>>, partition int"


def _writer(df, bootstrap: str, **options: str):
    writer = df.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer


def test_batch_write_keys_headers_and_partitions(spark, bootstrap, make_topic) -> None:
    topic = make_topic(3)
    rows = []
    for i in range(60):
        headers = [("i", b"%d" % i), ("none", None)] if i % 3 else []
        explicit = i % 3 if i % 4 == 0 else None
        key = None if i % 5 == 0 and explicit is None else f"user-{i % 7}"
        rows.append((key, b"value-%d" % i, headers, explicit))
    _writer(spark.createDataFrame(rows, ROW_SCHEMA).coalesce(2), bootstrap, topic=topic).save()

    read_back = consume_all(bootstrap, topic, 3)
    assert len(read_back) == len(rows)
    by_value = {r.value: r for r in read_back}
    for key, value, headers, explicit in rows:
        got = by_value[value]
        assert got.key == (key.encode() if key is not None else None)
        assert list(got.headers) == [(k, v) for k, v in headers]
        if explicit is not None:
            assert got.partition == explicit
        elif key is not None:
            assert got.partition == partition_for_key(key.encode(), 3)


def test_topic_column_and_string_values(spark, bootstrap, make_topic) -> None:
    first, second = make_topic(1, hint="col-a"), make_topic(1, hint="col-b")
    df = spark.createDataFrame([(first, "a1"), (second, "b1"), (first, "a2")], "topic string, value string")
    _writer(df.coalesce(1), bootstrap).save()
    assert [r.value for r in consume_all(bootstrap, first, 1)] == [b"a1", b"a2"]
    assert [r.value for r in consume_all(bootstrap, second, 1)] == [b"b1"]


def test_the_topic_option_overrides_any_topic_column(spark, bootstrap, make_topic) -> None:
    target = make_topic(1)
    df = spark.createDataFrame([(7, "x1"), (None, "x2")], "topic int, value string").coalesce(1)
    _writer(df, bootstrap, topic=target).save()
    assert [r.value for r in consume_all(bootstrap, target, 1)] == [b"x1", b"x2"]


@pytest.mark.parametrize(
    ("ddl", "options", "message"),
    [
        ("key string", {"topic": "t"}, "required attribute 'value' not found"),
        ("value string", {}, "topic option required"),
        ("value string, topic int", {}, "'topic' must be string, got int"),
        ("value int", {"topic": "t"}, "'value' must be string or binary"),
        ("value string, partition string", {"topic": "t"}, "'partition' must be int"),
        ("value string, headers array<string>", {"topic": "t"}, "'headers' must be array"),
    ],
)
def test_write_schema_is_validated(spark, bootstrap, ddl: str, options: dict[str, str], message: str) -> None:
    df = spark.createDataFrame([], ddl)
    with pytest.raises(PySparkException, match=message):
        _writer(df, bootstrap, **options).save()


def test_stream_copy_between_topics_keeps_keys_and_headers(spark, bootstrap, make_topic, tmp_path) -> None:
    source, target = make_topic(2, hint="copy-src"), make_topic(2, hint="copy-dst")
    produced = produce(
        bootstrap,
        source,
        [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(40)],
        headers=lambda i: [("n", b"%d" % i)],
    )
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers", "partition")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = consume_all(bootstrap, target, 2)

    def content(records: list[Produced]) -> list[tuple]:
        return sorted((r.partition, r.key, r.value, r.headers) for r in records)

    assert content(copied) == content(produced)
