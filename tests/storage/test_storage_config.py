"""LogConfig: Kafka topic config names, defaults, validation and the broker-level default keys."""

from __future__ import annotations

import pytest

from odradek.storage.config import LONG_MAX, TOPIC_CONFIG_NAMES, LogConfig


def test_kafka_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.retention_ms == config.segment_ms == 604_800_000
    assert config.max_message_bytes == 1_048_588
    assert (config.retention_bytes, config.flush_messages, config.flush_ms) == (-1, LONG_MAX, LONG_MAX)
    assert (config.index_interval_bytes, config.segment_index_bytes) == (4096, 10 << 20)
    assert (config.message_timestamp_type, config.cleanup_policy) == ("CreateTime", "delete")


def test_overrides_parse_on_top_of_defaults() -> None:
    defaults = LogConfig(retention_ms=5)
    config = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1024",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact, delete",
        },
        defaults,
    )
    assert (config.segment_bytes, config.retention_ms) == (1024, 5)
    assert config.log_append_time and config.delete_enabled
    assert config.cleanup_policy == "compact,delete"
    assert not LogConfig.from_topic_configs({"cleanup.policy": "compact"}).delete_enabled


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "10"),
        ("segment.bytes", "abc"),
        ("retention.ms", "-2"),
        ("message.timestamp.type", "WallTime"),
        ("cleanup.policy", "archive"),
        ("min.insync.replicas", "0"),
        ("flush.messages", "0"),
        ("no.such.config", "1"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_topic_configs({key: value}, LogConfig())


def test_topic_names_map_to_broker_keys_and_round_trip() -> None:
    assert TOPIC_CONFIG_NAMES["segment.bytes"] == "log.segment.bytes"
    assert TOPIC_CONFIG_NAMES["retention.ms"] == "log.retention.ms"
    assert TOPIC_CONFIG_NAMES["max.message.bytes"] == "message.max.bytes"
    config = LogConfig(segment_bytes=4096, retention_bytes=77, message_timestamp_type="LogAppendTime")
    described = config.to_topic_configs()
    assert set(described) == set(TOPIC_CONFIG_NAMES)
    assert LogConfig.from_topic_configs(described) == config
