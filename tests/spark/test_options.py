"""Option parsing of the odradek Spark source and sink: Spark's Kafka option names and meanings."""

from __future__ import annotations

import re

import pytest

from odradek.client.types import TopicPartition
from odradek.protocol.records.compression import CompressionType
from odradek.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OptionError,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    TimestampOffsets,
    TriggerLimits,
    include_headers,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}


def test_defaults_differ_between_batch_and_streaming() -> None:
    batch = parse_source_options(BASE, streaming=False)
    stream = parse_source_options(BASE, streaming=True)
    assert batch.starting == EarliestOffsets() and batch.ending == LatestOffsets()
    assert stream.starting == LatestOffsets()
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.min_partitions is None and stream.limits == TriggerLimits(None, None, 15 * 60 * 1000)
    assert (batch.offset_fetch_attempts, batch.offset_retry_interval_ms) == (3, 1000)


def test_keys_are_case_insensitive_and_values_parsed() -> None:
    opts = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1,g:2",
            "SubscribePattern": "web-.*",
            "STARTINGOFFSETS": "earliest",
            "includeHeaders": "TRUE",
            "failOnDataLoss": "false",
            "minPartitions": "8",
            "maxOffsetsPerTrigger": "500",
        },
        streaming=True,
    )
    assert opts.bootstrap_servers == "h:1,g:2"
    assert opts.subscription == SubscribePattern("web-.*", "web-.*")
    assert opts.subscription.matches("web-clicks") and not opts.subscription.matches("clicks")
    assert opts.starting == EarliestOffsets()
    assert opts.include_headers and not opts.fail_on_data_loss
    assert (opts.min_partitions, opts.limits.max_offsets) == (8, 500)


def test_subscribe_and_assign_forms() -> None:
    assert parse_source_options({**BASE, "subscribe": " a, b ,"}, streaming=True).subscription == Subscribe(
        ("a", "b")
    )
    assign = {"kafka.bootstrap.servers": "h:1", "assign": '{"b": [1, 0], "a": [2]}'}
    assert parse_source_options(assign, streaming=True).subscription == Assign(
        (TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1))
    )


@pytest.mark.parametrize(
    "extra",
    [
        {"subscribePattern": "x"},
        {"assign": '{"t": [0]}'},
    ],
)
def test_exactly_one_subscription_kind(extra: dict[str, str]) -> None:
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({**BASE, **extra}, streaming=True)
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({"kafka.bootstrap.servers": "h:1"}, streaming=True)


def test_per_partition_offsets_and_timestamps() -> None:
    opts = parse_source_options(
        {
            **BASE,
            "startingOffsets": '{"t": {"1": -2, "0": 23}}',
            "endingOffsets": '{"t": {"0": 50, "1": -1}}',
        },
        streaming=False,
    )
    assert opts.starting == SpecificOffsets(((TopicPartition("t", 0), 23), (TopicPartition("t", 1), -2)))
    assert opts.ending.as_dict() == {TopicPartition("t", 0): 50, TopicPartition("t", 1): -1}
    by_ts = parse_source_options(
        {**BASE, "startingOffsets": "latest", "startingOffsetsByTimestamp": '{"t": {"0": 1700000000000}}'},
        streaming=True,
    )
    assert by_ts.starting == TimestampOffsets(((TopicPartition("t", 0), 1700000000000),))
    assert parse_source_options({**BASE, "endingTimestamp": "99"}, streaming=False).ending == GlobalTimestamp(
        99
    )


@pytest.mark.parametrize(
    ("extra", "streaming", "message"),
    [
        ({"startingOffsets": "latest"}, False, "cannot be 'latest'"),
        ({"endingOffsets": "earliest"}, False, "cannot be 'earliest'"),
        ({"startingOffsets": '{"t": {"0": -1}}'}, False, "cannot use -1"),
        ({"endingOffsets": '{"t": {"0": -2}}'}, False, "cannot use -2"),
        ({"endingOffsets": "latest"}, True, "not allowed in a streaming query"),
        ({"endingTimestamp": "10"}, True, "not allowed in a streaming query"),
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, True, "higher than"),
        ({"maxTriggerDelay": "soon"}, True, "'maxTriggerDelay' must be a duration"),
        ({"fetchOffset.numRetries": "0"}, True, "'fetchOffset.numRetries' must be a positive integer"),
        (
            {"fetchOffset.retryIntervalMs": "-1"},
            True,
            "'fetchOffset.retryIntervalMs' must be an integer >= 0",
        ),
        ({"maxRecordsPerPartition": "0"}, False, "'maxRecordsPerPartition' must be a positive"),
        ({"startingOffsets": '{"t": {"0": 9}}', "endingOffsets": '{"t": {"0": 5}}'}, False, "is after"),
        ({"startingOffsets": '{"t": {"0": 1}}', "endingOffsets": '{"u": {"0": 5}}'}, False, "different"),
        ({"subscribePattern": "[a-z&&[^e]]", "subscribe": None}, True, "intersection"),
        ({"kafka.isolation.level": "snapshot"}, True, "must be 'read_uncommitted' or 'read_committed'"),
        ({"kafka.max.poll.records": "x"}, True, "'kafka.max.poll.records' must be a positive integer"),
        ({"kafka.acks": "all"}, True, "'kafka.acks' is not supported: the source does not implement"),
        ({"kafka.session.timeout.ms": "10"}, False, "'kafka.session.timeout.ms' is not supported"),
        ({"maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({"minPartitions": "many"}, True, "positive integer"),
        ({"failOnDataLoss": "yes"}, True, "'true' or 'false'"),
        ({"startingOffsets": "{not json"}, True, "not valid JSON"),
        ({"startingOffsets": '{"t": [0]}'}, True, "must map partitions"),
        ({"subscribePattern": "(", "subscribe": None}, True, "not a valid pattern"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, True, "'error' or 'latest'"),
        ({"kafka.bootstrap.servers": ""}, True, "must be specified"),
        ({"kafka.auto.offset.reset": "earliest"}, True, "set the source option 'startingOffsets'"),
        (
            {"kafka.security.protocol": "SASL_SSL"},
            True,
            "configuration sasl.mechanism: odradek's client speaks PLAIN",
        ),
        ({"kafka.security.protocol": "TLS"}, True, "security.protocol: must be one of PLAINTEXT, SSL"),
        (
            {
                "kafka.security.protocol": "SSL",
                "kafka.ssl.truststore.type": "JKS",
                "kafka.ssl.truststore.location": "/x",
            },
            False,
            "configuration ssl.truststore.type: odradek reads PEM",
        ),
        ({"kafka.ssl.engine.factory.class": "x"}, False, "'kafka.ssl.engine.factory.class' is not supported"),
    ],
)
def test_bad_options_are_refused_naming_the_option(extra: dict, streaming: bool, message: str) -> None:
    options = {k: v for k, v in {**BASE, **extra}.items() if v is not None}
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_source_options(options, streaming=streaming)


def test_kafka_client_settings_take_effect() -> None:
    opts = parse_source_options(
        {
            **BASE,
            "kafka.fetch.max.bytes": "4096",
            "kafka.max.partition.fetch.bytes": "65536",
            "kafka.max.poll.records": "100",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.security.protocol": "plaintext",
            "kafka.request.timeout.ms": "5000",
            "kafka.fetch.min.bytes": "2048",
            "kafka.fetch.max.wait.ms": "0",
        },
        streaming=True,
    )
    assert (opts.fetch_max_bytes, opts.max_poll_records, opts.client.timeout_s) == (4096, 100, 5.0)
    assert (opts.fetch_min_bytes, opts.fetch_max_wait_ms) == (2048, 0)
    assert not opts.client.read_committed
    committed = parse_source_options({**BASE, "kafka.isolation.level": "READ_COMMITTED"}, streaming=False)
    assert committed.client.read_committed and committed.client.connect()._isolation_level == 1
    assert include_headers({"INCLUDEHEADERS": "true"}) and not include_headers({})


def test_group_id_and_prefix_name_the_connections() -> None:
    fixed = parse_source_options({**BASE, "kafka.group.id": "etl"}, streaming=True)
    assert (fixed.group_id, fixed.client.client_id) == ("etl", "consumer-etl")
    prefixed = parse_source_options({**BASE, "groupIdPrefix": "nightly"}, streaming=False)
    assert (
        prefixed.group_id.startswith("nightly-")
        and prefixed.client.client_id == f"consumer-{prefixed.group_id}"
    )
    assert parse_source_options(BASE, streaming=True).group_id.startswith("spark-kafka-source-")
    assert parse_source_options(BASE, streaming=False).group_id.startswith("spark-kafka-relation-")
    named = parse_source_options({**BASE, "kafka.group.id": "etl", "kafka.client.id": "me"}, streaming=True)
    assert named.client.client_id == "me"


def test_the_global_timestamp_wins_as_in_spark() -> None:
    opts = parse_source_options(
        {
            **BASE,
            "startingTimestamp": "5",
            "startingOffsetsByTimestamp": '{"t": {"0": 7}}',
            "startingOffsets": "earliest",
            "endingOffsetsByTimestamp": '{"t": {"0": 9}}',
            "endingOffsets": "latest",
        },
        streaming=False,
    )
    assert opts.starting == GlobalTimestamp(5)
    assert opts.ending == TimestampOffsets(((TopicPartition("t", 0), 9),))


def test_trigger_limits_and_batch_leniency() -> None:
    stream = parse_source_options(
        {**BASE, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "50", "maxTriggerDelay": "2s"},
        streaming=True,
    )
    assert stream.limits == TriggerLimits(50, 10, 2000)
    assert (
        parse_source_options({**BASE, "maxTriggerDelay": "1min"}, streaming=True).limits.max_delay_ms
        == 60_000
    )
    assert parse_source_options({**BASE, "maxTriggerDelay": "250"}, streaming=True).limits.max_delay_ms == 250
    batch = parse_source_options(
        {**BASE, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "1"}, streaming=False
    )
    assert batch.limits.max_offsets == 5


@pytest.mark.parametrize(
    ("java", "python", "topic", "matches"),
    [
        (r"\Qweb.log\E", r"web\.log", "web-log", False),
        (r"\p{Alpha}+-\p{Digit}+", r"[a-zA-Z]+-[0-9]+", "events-42", True),
        (r"[\p{Lower}_]+\z", r"[a-z_]+\Z", "x.clicks_raw", True),
        (r"(?<env>prod|dev)-\k<env>", r"(?P<env>prod|dev)-(?P=env)", "prod-prod", True),
        (r"^orders$", r"^orders$", "orders-v2", False),
        (r"orders", r"orders", "orders-v2", True),
    ],
)
def test_subscribe_pattern_is_translated_from_java(java: str, python: str, topic: str, matches: bool) -> None:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": java}, streaming=True)
    assert isinstance(opts.subscription, SubscribePattern)
    assert opts.subscription.python_pattern == python
    assert opts.subscription.matches(topic) is matches


def test_sink_options() -> None:
    sink = parse_sink_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "out",
            "kafka.compression.type": "lz4",
            "kafka.acks": "1",
            "kafka.linger.ms": "0",
            "kafka.batch.size": "1000",
            "kafka.buffer.memory": "2000",
            "kafka.client.id": "loader",
            "kafka.max.request.size": "5000",
        }
    )
    assert (sink.topic, sink.compression, sink.acks, sink.linger_ms) == ("out", CompressionType.LZ4, 1, 0)
    assert (sink.batch_bytes, sink.buffer_bytes, sink.client.client_id) == (1000, 2000, "loader")
    assert sink.max_request_bytes == 5000
    plain = parse_sink_options({"kafka.bootstrap.servers": "h:1"})
    assert (plain.topic, plain.acks, plain.linger_ms, plain.max_request_bytes) == (None, -1, None, 1 << 20)
    assert not plain.exactly_once


def test_exactly_once_sink_options() -> None:
    sink = parse_sink_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "exactlyOnce": "TRUE",
            "transactionalIdPrefix": "orders",
            "kafka.transaction.timeout.ms": "120000",
            "kafka.enable.idempotence": "true",
            "kafka.acks": "all",
        }
    )
    assert (sink.exactly_once, sink.transactional_id_prefix, sink.transaction_timeout_ms) == (
        True,
        "orders",
        120_000,
    )
    default = parse_sink_options({"kafka.bootstrap.servers": "h:1", "exactlyOnce": "true"})
    assert (default.transactional_id_prefix, default.transaction_timeout_ms) == ("odradek-spark-sink", 60_000)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"kafka.value.serializer": "x"}, "'kafka.value.serializer' is not supported"),
        ({"kafka.compression.type": "brotli"}, "compression"),
        ({"kafka.acks": "0"}, "'kafka.acks' = 0 is not supported"),
        ({"kafka.partitioner.class": "x.Y"}, "'kafka.partitioner.class' is not supported: a partitioner"),
        ({"kafka.enable.idempotence": "true"}, "'kafka.enable.idempotence' = true is not supported"),
        ({"kafka.transactional.id": "t"}, "'kafka.transactional.id' is not supported: set the sink option"),
        ({"exactlyOnce": "maybe"}, "'exactlyOnce' must be 'true' or 'false'"),
        ({"transactionalIdPrefix": "p"}, "'transactionalIdPrefix' only applies with 'exactlyOnce' = true"),
        ({"kafka.transaction.timeout.ms": "1000"}, "'kafka.transaction.timeout.ms' only applies with"),
        ({"exactlyOnce": "true", "kafka.acks": "1"}, "'kafka.acks' must be all with 'exactlyOnce' = true"),
        (
            {"exactlyOnce": "true", "kafka.enable.idempotence": "false"},
            "'kafka.enable.idempotence' = false contradicts 'exactlyOnce' = true",
        ),
        ({"exactlyOnce": "true", "transactionalIdPrefix": " "}, "'transactionalIdPrefix' is empty"),
        (
            {"exactlyOnce": "true", "kafka.transaction.timeout.ms": "0"},
            "'kafka.transaction.timeout.ms' must be",
        ),
        ({"kafka.enable.idempotence": "yes"}, "'kafka.enable.idempotence' must be 'true' or 'false'"),
        ({"kafka.max.poll.records": "5"}, "'kafka.max.poll.records' is not supported: the sink"),
        ({"topic": " "}, "'topic' is empty"),
    ],
)
def test_bad_sink_options_are_refused_naming_the_option(extra: dict, message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", **extra})
