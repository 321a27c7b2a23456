"""Parity with Spark's Kafka source and sink, row by row of the table in docs/spark.md: each option works
as Spark documents it or is refused, by name, with one line at the earliest point PySpark allows.
Every test runs the shared local SparkSession against the session's broker."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pyspark.errors import PySparkException

from odradek.client import TopicPartition
from odradek.client.transactions import TransactionalProducer
from odradek.protocol.records.batch import iter_batches
from odradek.spark.options import OptionError
from tests.conftest import topic_name
from tests.spark.helpers import assert_one_line, consume_all, produce, wait_until

BASE_TS = 1_700_000_000_000


def _reader(spark, bootstrap: str, stream: bool = False, **options: str):
    reader = (spark.readStream if stream else spark.read).format("odradek")
    for key, value in {"kafka.bootstrap.servers": bootstrap, **options}.items():
        reader = reader.option(key, value)
    return reader


def _values(df) -> list[bytes]:
    return sorted(r.value for r in df.select("value").collect())


def _topic_with(make_topic, bootstrap: str, count: int, partitions: int = 1, hint: str | None = None) -> str:
    topic = make_topic(partitions, hint=hint)
    produce(
        bootstrap,
        topic,
        [(i % partitions, None, b"v%03d" % i) for i in range(count)],
        timestamp_ms=lambda i: BASE_TS + i * 1000,
    )
    return topic


# -- refused at load() ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"subscribe": "t", "kafka.session.timeout.ms": "10"},
            "option 'kafka.session.timeout.ms' is not supported",
        ),
        (
            {"subscribe": "t", "kafka.auto.offset.reset": "earliest"},
            "set the source option 'startingOffsets'",
        ),
        (
            {"subscribe": "t", "kafka.isolation.level": "serializable"},
            "option 'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed'",
        ),
        (
            {"subscribe": "t", "kafka.security.protocol": "SASL"},
            "security.protocol: must be one of PLAINTEXT",
        ),
        ({"subscribe": "t", "endingOffsets": "{not json"}, "option 'endingOffsets' is not valid JSON"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be 'true' or 'false'"),
        ({"subscribe": "t", "subscribePattern": "t"}, "exactly one of the options"),
        ({"subscribePattern": "[a&&b]"}, "option 'subscribePattern': character class intersection"),
    ],
)
def test_bad_source_options_fail_load_with_one_line(spark, bootstrap, options, message) -> None:
    with pytest.raises(PySparkException) as failure:
        _reader(spark, bootstrap, **options).load()
    assert_one_line(failure.value, message)
    with pytest.raises(PySparkException) as streamed:
        _reader(spark, bootstrap, stream=True, **options).load()
    assert_one_line(streamed.value, message)


def test_bootstrap_servers_are_required_at_load(spark) -> None:
    with pytest.raises(PySparkException) as failure:
        spark.read.format("odradek").option("subscribe", "t").load()
    assert_one_line(failure.value, "option 'kafka.bootstrap.servers' must be specified")


@pytest.mark.parametrize(
    ("stream", "options", "message"),
    [
        (False, {"startingOffsets": "latest"}, "batch query cannot be 'latest'"),
        (False, {"endingOffsets": "earliest"}, "'endingOffsets' for a batch query cannot be 'earliest'"),
        (True, {"endingOffsets": "latest"}, "option 'endingOffsets' is not allowed in a streaming query"),
        (True, {"endingTimestamp": "1"}, "option 'endingTimestamp' is not allowed in a streaming query"),
    ],
)
def test_rules_of_one_kind_of_read_fail_load(spark, bootstrap, stream: bool, options, message: str) -> None:
    with pytest.raises(OptionError) as failure:
        _reader(spark, bootstrap, stream=stream, subscribe="t", **options).load()
    assert_one_line(failure.value, message)


@pytest.mark.parametrize("stream", [False, True])
def test_a_user_schema_fails_load(spark, bootstrap, stream: bool) -> None:
    with pytest.raises(OptionError) as failure:
        _reader(spark, bootstrap, stream=stream, subscribe="t").schema("value string").load()
    assert_one_line(failure.value, "the odradek source has a fixed schema")


def _unchecked_load(reader):
    """`load()` without the checks odradek.spark.register adds (as under Spark Connect)."""
    return type(reader).load.__wrapped__(reader)


def test_without_load_checks_batch_rules_fail_the_first_action(spark, bootstrap) -> None:
    df = _unchecked_load(_reader(spark, bootstrap, subscribe="t", startingOffsets="latest"))
    with pytest.raises(PySparkException) as failure:
        df.collect()
    assert_one_line(failure.value, "option 'startingOffsets' for a batch query cannot be 'latest'")
    typed = _unchecked_load(_reader(spark, bootstrap, subscribe="t").schema("value string"))
    with pytest.raises(PySparkException) as refused:
        typed.collect()
    assert_one_line(refused.value, "the odradek source has a fixed schema")


def test_without_load_checks_ending_offsets_fail_a_stream_at_its_first_step(
    spark, bootstrap, make_topic, tmp_path
) -> None:
    topic = make_topic(1)
    df = _unchecked_load(_reader(spark, bootstrap, stream=True, subscribe=topic, endingOffsets="latest"))
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    with pytest.raises(PySparkException) as failure:
        query.awaitTermination(60)
    assert_one_line(failure.value, "option 'endingOffsets' is not allowed in a streaming query")


# -- subscriptions ----------------------------------------------------------------------------------


def test_a_nonexistent_subscribed_topic_fails_the_read(spark, bootstrap, make_topic) -> None:
    missing = f"missing-{time.monotonic_ns()}"
    df = _reader(spark, bootstrap, subscribe=missing, **{"fetchOffset.retryIntervalMs": "10"}).load()
    with pytest.raises(PySparkException) as failure:
        df.collect()
    assert_one_line(failure.value, f"topic '{missing}' of option 'subscribe' does not exist")
    assigned = _reader(spark, bootstrap, assign=json.dumps({missing: [0]}), **{"fetchOffset.numRetries": "1"})
    with pytest.raises(PySparkException, match="of option 'assign' does not exist"):
        assigned.load().collect()


def test_a_nonexistent_subscribed_topic_fails_a_stream(spark, bootstrap, tmp_path) -> None:
    missing = f"missing-{time.monotonic_ns()}"
    df = _reader(
        spark, bootstrap, stream=True, subscribe=missing, **{"fetchOffset.retryIntervalMs": "10"}
    ).load()
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    with pytest.raises(PySparkException) as failure:
        query.awaitTermination(60)
    assert_one_line(failure.value, f"topic '{missing}' of option 'subscribe' does not exist")


def test_fetch_offset_retries_wait_for_a_topic_being_created(spark, bootstrap, client) -> None:
    late = f"late-{time.monotonic_ns()}"
    creator = threading.Timer(1.0, lambda: client.create_topics({late: 1}))
    creator.start()
    try:
        options = {"fetchOffset.numRetries": "100", "fetchOffset.retryIntervalMs": "100"}
        rows = _reader(spark, bootstrap, subscribe=late, **options).load().collect()
    finally:
        creator.join()
    assert rows == []
    assert client.metadata([late]).partitions_of(late)


def test_subscribe_pattern_is_a_java_regex_found_in_the_name(spark, bootstrap, client) -> None:
    stamp = time.monotonic_ns()
    dotted, dashed = f"jre.{stamp}.x", f"jre-{stamp}-x"
    client.create_topics({dotted: 1, dashed: 1})
    produce(bootstrap, dotted, [(0, None, b"d")])
    produce(bootstrap, dashed, [(0, None, b"-")])
    quoted = _reader(spark, bootstrap, subscribePattern=rf"\Qjre.{stamp}\E").load()
    assert [r.topic for r in quoted.select("topic").distinct().collect()] == [dotted]
    posix = _reader(spark, bootstrap, subscribePattern=rf"jre\p{{Punct}}{stamp}").load()
    assert sorted(r.topic for r in posix.select("topic").distinct().collect()) == sorted([dotted, dashed])


# -- offsets ---------------------------------------------------------------------------------------


def test_starting_timestamp_wins_over_offsets_by_timestamp(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 10)
    df = _reader(
        spark,
        bootstrap,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 7000),
        startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 2000}}),
        endingTimestamp=str(BASE_TS + 9000),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 3000}}),
    ).load()
    assert sorted(r.offset for r in df.select("offset").collect()) == [7, 8]


def test_timestamp_strategy_latest_starts_past_the_last_record(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 5)
    late = {"startingTimestamp": str(BASE_TS + 60_000)}
    with pytest.raises(PySparkException) as failure:
        _reader(spark, bootstrap, subscribe=topic, **late).load().collect()
    assert_one_line(failure.value, "no offset has a timestamp at or after the one asked for")
    lenient = _reader(spark, bootstrap, subscribe=topic, startingOffsetsByTimestampStrategy="latest", **late)
    assert lenient.load().collect() == []


def test_max_records_per_partition_cuts_tasks(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 30, partitions=2)
    df = _reader(spark, bootstrap, subscribe=topic, maxRecordsPerPartition="4").load()
    assert df.rdd.getNumPartitions() == 8
    assert len(_values(df)) == 30


def test_stream_options_are_accepted_by_a_batch_read(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 6)
    shared = {"maxOffsetsPerTrigger": "2", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "1s"}
    assert len(_values(_reader(spark, bootstrap, subscribe=topic, **shared).load())) == 6


def test_group_id_options_and_consumer_settings_read_everything(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 20, partitions=2)
    settings = {
        "kafka.group.id": "etl",
        "groupIdPrefix": "ignored",
        "kafka.client.id": "parity",
        "kafka.isolation.level": "read_committed",
        "kafka.max.poll.records": "3",
        "kafka.fetch.max.bytes": "128",
        "kafka.max.partition.fetch.bytes": "256",
        "kafka.request.timeout.ms": "10000",
        "kafkaConsumer.pollTimeoutMs": "5000",
    }
    assert _values(_reader(spark, bootstrap, subscribe=topic, **settings).load()) == [
        b"v%03d" % i for i in range(20)
    ]
    prefixed = _reader(spark, bootstrap, subscribe=topic, groupIdPrefix="nightly").load()
    assert len(_values(prefixed)) == 20


def test_read_committed_leaves_aborted_transactions_out(spark, bootstrap, client, make_topic) -> None:
    topic = make_topic(2)
    producer = TransactionalProducer(client, topic_name("parity-txn"))
    producer.init_transactions()
    for outcome in ("committed", "aborted", "committed-again"):
        producer.begin()
        for i in range(6):
            producer.send(topic, b"%s-%d" % (outcome.encode(), i), partition=i % 2)
        producer.flush()  # the aborted records reach the log too
        producer.abort() if outcome == "aborted" else producer.commit()
    committed = _values(
        _reader(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"}).load()
    )
    assert committed == sorted(
        b"%s-%d" % (o, i) for o in (b"committed", b"committed-again") for i in range(6)
    )
    everything = _values(_reader(spark, bootstrap, subscribe=topic).load())
    assert len(everything) == 18 and set(committed) < set(everything)


def test_fetch_min_bytes_and_max_wait_hold_each_fetch(spark, bootstrap, make_topic) -> None:
    topic = _topic_with(make_topic, bootstrap, 5)

    def seconds_to_read(**options: str) -> float:
        started = time.monotonic()
        assert len(_values(_reader(spark, bootstrap, subscribe=topic, **options).load())) == 5
        return time.monotonic() - started

    plain = min(seconds_to_read(), seconds_to_read())
    held = seconds_to_read(**{"kafka.fetch.min.bytes": str(10 << 20), "kafka.fetch.max.wait.ms": "8000"})
    assert held >= 8.0 and held - plain >= 4.0, f"the broker held the fetch: {held:.1f} s, else {plain:.1f} s"


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(
    spark, bootstrap, make_topic, tmp_path
) -> None:
    topic = _topic_with(make_topic, bootstrap, 10)
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    df = _reader(
        spark,
        bootstrap,
        stream=True,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="30",
        maxTriggerDelay="4s",
    ).load()
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        data_batches = lambda: [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]  # noqa: E731
        wait_until(lambda: data_batches() == [10], 60, "the first batch, which never waits")
        produce(bootstrap, topic, [(0, None, b"more-%d" % i) for i in range(10)])

        def held_back() -> bool:
            return any(
                p["numInputRows"] == 0
                and json.loads(p["sources"][0]["latestOffset"] or "{}").get(topic) == {"0": 20}
                for p in query.recentProgress
            )

        wait_until(held_back, 60, "a trigger that saw 10 new records and waited for 30")
        wait_until(lambda: data_batches() == [10, 10], 60, "the batch maxTriggerDelay lets through")
    finally:
        query.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")


# -- sink ------------------------------------------------------------------------------------------


def _frame(spark, rows: int, topic_column: str | None = None):
    if topic_column is None:
        return spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(rows)], "key string, value string")
    return spark.createDataFrame([(topic_column, f"v{i}") for i in range(rows)], "topic string, value string")


def test_default_and_append_save_modes_write(spark, bootstrap, make_topic) -> None:
    topic = make_topic(1)
    _frame(spark, 3).write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).save()
    _frame(spark, 2).write.format("odradek").mode("append").option(
        "kafka.bootstrap.servers", bootstrap
    ).option("topic", topic).save()
    _frame(spark, 1).write.save(
        format="odradek", mode="errorifexists", topic=topic, **{"kafka.bootstrap.servers": bootstrap}
    )
    assert len(consume_all(bootstrap, topic, 1)) == 6


@pytest.mark.parametrize("mode", ["overwrite", "ignore"])
def test_overwrite_and_ignore_are_refused_as_by_spark(spark, bootstrap, make_topic, mode: str) -> None:
    topic = make_topic(1)
    writer = _frame(spark, 1).write.format("odradek").mode(mode).option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(ValueError) as failure:
        writer.option("topic", topic).save()
    assert_one_line(failure.value, f"save mode {mode.capitalize()} is not allowed for odradek")
    assert consume_all(bootstrap, topic, 1, timeout_s=2) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.acks": "0"}, "option 'kafka.acks' = 0 is not supported"),
        ({"kafka.partitioner.class": "com.example.P"}, "option 'kafka.partitioner.class' is not supported"),
        ({"kafka.transactional.id": "tx"}, "option 'kafka.transactional.id' is not supported"),
        ({"kafka.enable.idempotence": "true"}, "option 'kafka.enable.idempotence' = true is not supported"),
        (
            {"kafka.max.in.flight.requests.per.connection": "0"},
            "option 'kafka.max.in.flight.requests.per.connection' must be a positive integer",
        ),
        ({"kafka.key.serializer": "x"}, "option 'kafka.key.serializer' is not supported"),
        (
            {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"},
            "sasl.jaas.config is required",
        ),
        (
            {"kafka.sasl.kerberos.service.name": "kafka"},
            "option 'kafka.sasl.kerberos.service.name' is not supported",
        ),
    ],
)
def test_bad_sink_options_fail_save_with_one_line(spark, bootstrap, options, message) -> None:
    writer = (
        _frame(spark, 1)
        .write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "t")
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(PySparkException) as failure:
        writer.save()
    assert_one_line(failure.value, message)


def test_a_null_topic_fails_with_sparks_message(spark, bootstrap, make_topic) -> None:
    topic = make_topic(1)
    df = spark.createDataFrame([(topic, "a"), (None, "b")], "topic string, value string").coalesce(1)
    with pytest.raises(PySparkException) as failure:
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).save()
    assert_one_line(
        failure.value, "null topic present in the data. Use the topic option for setting a default topic."
    )
    assert consume_all(bootstrap, topic, 1, timeout_s=2) == []


def test_a_stream_in_complete_mode_appends_each_batch(spark, bootstrap, make_topic, tmp_path) -> None:
    source, target = make_topic(1, hint="complete-src"), make_topic(1, hint="complete-dst")
    produce(bootstrap, source, [(0, b"k%d" % (i % 3), b"x") for i in range(12)])
    counts = (
        _reader(spark, bootstrap, stream=True, subscribe=source, startingOffsets="earliest")
        .load()
        .groupBy("key")
        .count()
        .selectExpr("key", "cast(count as string) as value")
    )
    query = (
        counts.writeStream.format("odradek")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert sorted((r.key, r.value) for r in consume_all(bootstrap, target, 1)) == [
        (b"k0", b"4"),
        (b"k1", b"4"),
        (b"k2", b"4"),
    ]


def test_producer_settings_take_effect(spark, bootstrap, make_topic, client) -> None:
    topic = make_topic(1)
    settings = {
        "kafka.acks": "1",
        "kafka.batch.size": "200",
        "kafka.buffer.memory": "100000",
        "kafka.linger.ms": "0",
        "kafka.compression.type": "gzip",
        "kafka.client.id": "parity-sink",
        "kafka.request.timeout.ms": "10000",
        "kafka.enable.idempotence": "false",
        "kafka.max.in.flight.requests.per.connection": "5",
    }
    writer = (
        _frame(spark, 40).coalesce(1).write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    )
    for key, value in settings.items():
        writer = writer.option(key, value)
    writer.option("topic", topic).save()
    assert sorted(r.value for r in consume_all(bootstrap, topic, 1)) == sorted(b"v%d" % i for i in range(40))
    fetched = client.fetch(TopicPartition(topic, 0), 0)
    headers = [header for _, header in iter_batches(fetched.records)]
    assert len(headers) > 4, "kafka.batch.size=200 cuts 40 records into many batches"
    assert all(header.attributes & 0x7 == 1 for header in headers), "every batch is gzip-compressed"


def test_max_request_size_bounds_batches_and_refuses_a_larger_record(
    spark, bootstrap, make_topic, client
) -> None:
    topic = make_topic(1)
    rows = [(f"{i:04d}" + "x" * 996,) for i in range(12)]

    def writer(df):
        return (
            df.write.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("kafka.max.request.size", "3000")
        )

    writer(spark.createDataFrame(rows, "value string").coalesce(1)).save()
    assert sorted(r.value[:4] for r in consume_all(bootstrap, topic, 1)) == [b"%04d" % i for i in range(12)]
    headers = [header for _, header in iter_batches(client.fetch(TopicPartition(topic, 0), 0).records)]
    assert len(headers) == 6, "3000-byte requests hold two 1 KiB records each"
    with pytest.raises(PySparkException) as failure:
        writer(spark.createDataFrame([("y" * 5000,)], "value string")).save()
    assert_one_line(failure.value, "more than max.request.size (3000 bytes)")
