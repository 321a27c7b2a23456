"""Option parsing of the odradek Spark source and sink: Spark's Kafka option names and meanings."""

from __future__ import annotations

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
    assert batch.min_partitions is None and stream.max_offsets_per_trigger is None


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
    assert opts.subscription == SubscribePattern("web-.*")
    assert opts.subscription.matches("web-clicks") and not opts.subscription.matches("xweb-clicks")
    assert opts.starting == EarliestOffsets()
    assert opts.include_headers and not opts.fail_on_data_loss
    assert (opts.min_partitions, opts.max_offsets_per_trigger) == (8, 500)


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
        ({"maxOffsetsPerTrigger": "10"}, False, "only for streaming"),
        ({"maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({"minPartitions": "many"}, True, "positive integer"),
        ({"failOnDataLoss": "yes"}, True, "'true' or 'false'"),
        ({"startingOffsets": "{not json"}, True, "not valid JSON"),
        ({"startingOffsets": '{"t": [0]}'}, True, "must map partitions"),
        ({"subscribePattern": "(", "subscribe": None}, True, "not a valid pattern"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, True, "'error' or 'latest'"),
        ({"kafka.bootstrap.servers": ""}, True, "must be specified"),
        ({"kafka.group.id": "g"}, True, "'kafka.group.id' is not supported"),
        ({"kafka.auto.offset.reset": "earliest"}, True, "set the source option 'startingOffsets'"),
        ({"kafka.security.protocol": "SASL_SSL"}, True, "only PLAINTEXT"),
        ({"kafka.ssl.truststore.location": "/x"}, False, "only PLAINTEXT"),
    ],
)
def test_bad_options_are_refused_naming_the_option(extra: dict, streaming: bool, message: str) -> None:
    options = {k: v for k, v in {**BASE, **extra}.items() if v is not None}
    with pytest.raises(OptionError, match=message):
        parse_source_options(options, streaming=streaming)


def test_other_kafka_options_are_accepted() -> None:
    opts = parse_source_options(
        {**BASE, "kafka.fetch.max.bytes": "1", "kafka.security.protocol": "plaintext"}, streaming=True
    )
    assert opts.bootstrap_servers == "h:9092"
    assert include_headers({"INCLUDEHEADERS": "true"}) and not include_headers({})


def test_sink_options() -> None:
    sink = parse_sink_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "out", "kafka.compression.type": "lz4"}
    )
    assert (sink.topic, sink.compression) == ("out", CompressionType.LZ4)
    assert parse_sink_options({"kafka.bootstrap.servers": "h:1"}).topic is None
    with pytest.raises(OptionError, match="'kafka.value.serializer' is not supported"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})
    with pytest.raises(OptionError, match="compression"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.compression.type": "brotli"})
