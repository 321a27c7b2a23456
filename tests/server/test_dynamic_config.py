"""Dynamic broker configs in KafkaConfig: the precedence per-broker > cluster-wide default > static >
code default, which keys may be dynamic, validation, and what DescribeConfigs reports."""

from __future__ import annotations

import logging

import pytest

from odradek.server.config import (
    DEPRECATED_TOPIC_CONFIGS,
    DYNAMIC_KEYS,
    ConfigError,
    ConfigSource,
    KafkaConfig,
    validate_topic_configs,
    without_deprecated,
)


def entries(config: KafkaConfig) -> dict:
    return {e.name: e for e in config.describe()}


def test_per_broker_over_default_over_static_over_code_default():
    static = KafkaConfig({"log.retention.bytes": "100", "log.segment.bytes": "2000"})
    layered = static.with_dynamic(
        {"log.retention.bytes": "200", "log.segment.bytes": "3000"}, {"log.segment.bytes": "4000"}
    )
    assert layered["log.retention.bytes"] == 200
    assert layered["log.segment.bytes"] == 4000
    assert layered["message.max.bytes"] == 1048588
    assert static["log.segment.bytes"] == 2000  # the static config is unchanged
    assert layered.with_dynamic({}, {})["log.segment.bytes"] == 2000  # layers replace, not stack


def test_dynamic_values_become_topic_defaults_below_topic_overrides():
    layered = KafkaConfig().with_dynamic({"log.retention.ms": "60000"}, {})
    assert layered.topic_config_defaults()["retention.ms"] == "60000"
    assert layered.log_config().retention_ms == 60000
    assert layered.log_config({"retention.ms": "1000"}).retention_ms == 1000


def test_only_the_primary_synonym_is_dynamic():
    assert "log.retention.hours" not in DYNAMIC_KEYS
    with pytest.raises(ConfigError, match="log.retention.hours"):
        KafkaConfig().with_dynamic({"log.retention.hours": "1"}, {})


@pytest.mark.parametrize(
    "configs",
    [{"broker.id": "3"}, {"log.segment.bytes": "x"}, {"log.segment.bytes": "1"}, {"log.retention.ms": "0"}],
)
def test_refused_dynamic_configs(configs):
    with pytest.raises(ConfigError):
        KafkaConfig().with_dynamic(configs, {})
    with pytest.raises(ConfigError):
        KafkaConfig().with_dynamic({}, configs)


def test_describe_reports_sources_read_only_and_synonyms_in_kafka_order():
    static = KafkaConfig({"log.retention.bytes": "100", "num.partitions": "2"})
    found = entries(static.with_dynamic({"log.retention.bytes": "200"}, {"log.retention.bytes": "300"}))
    retention = found["log.retention.bytes"]
    assert (retention.value, retention.source, retention.read_only) == (
        "300",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("300", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("200", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("100", ConfigSource.STATIC_BROKER_CONFIG),
        ("-1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert found["num.partitions"].read_only
    assert found["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG


def test_describe_dynamic_default_lists_only_what_is_set():
    layered = KafkaConfig().with_dynamic(
        {"log.cleanup.policy": "compact, delete"}, {"log.segment.bytes": "9000"}
    )
    (entry,) = layered.describe_dynamic_default()
    assert (entry.name, entry.value, entry.source) == (
        "log.cleanup.policy",
        "compact,delete",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert not entry.read_only


def test_topic_describe_shows_the_dynamic_synonym():
    layered = KafkaConfig({"log.retention.ms": "5000"}).with_dynamic({"log.retention.ms": "7000"}, {})
    retention = {e.name: e for e in layered.describe_topic({})}["retention.ms"]
    assert (retention.value, retention.source) == ("7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.source) for s in retention.synonyms][:2] == [
        ("log.retention.ms", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG),
    ]


def test_cleaner_settings_follow_dynamic_values():
    layered = KafkaConfig().with_dynamic({"log.cleaner.threads": "0"}, {})
    assert not layered.cleaner_config().enabled


def test_deprecated_message_format_version_is_accepted_and_ignored(caplog):
    validate_topic_configs({"message.format.version": "2.8"})
    assert KafkaConfig().log_config({"message.format.version": "2.8"}) == KafkaConfig().log_config()
    with caplog.at_level(logging.INFO):
        kept = without_deprecated(
            {"message.format.version": "2.8", "retention.ms": "1"}, DEPRECATED_TOPIC_CONFIGS, "t"
        )
    assert kept == {"retention.ms": "1"}
    assert "message.format.version" in caplog.text
