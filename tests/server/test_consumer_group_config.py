"""The broker settings of KIP-848 consumer groups: Kafka's names, defaults and bounds, read into the
coordinator's GroupConfig."""

from __future__ import annotations

import pytest

from odradek.coordinator.config import GroupConfig
from odradek.server.config import ConfigError, KafkaConfig

UNIFORM_CLASS = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"


def test_defaults_are_kafkas() -> None:
    config = GroupConfig.from_kafka_config(KafkaConfig())
    assert config.consumer_session_timeout_ms == 45_000
    assert config.consumer_heartbeat_interval_ms == 5000
    assert config.consumer_max_size == 2**31 - 1
    assert config.consumer_assignors == ("uniform", "range")
    broker = KafkaConfig()
    assert broker["group.consumer.min.session.timeout.ms"] == 45_000
    assert broker["group.consumer.max.session.timeout.ms"] == 60_000
    assert broker["group.consumer.min.heartbeat.interval.ms"] == 5000
    assert broker["group.consumer.max.heartbeat.interval.ms"] == 15_000


def test_settings_are_read() -> None:
    config = GroupConfig.from_kafka_config(
        KafkaConfig(
            {
                "group.consumer.heartbeat.interval.ms": "500",
                "group.consumer.min.heartbeat.interval.ms": "100",
                "group.consumer.session.timeout.ms": "50000",
                "group.consumer.max.size": "3",
                "group.consumer.assignors": f"range,{UNIFORM_CLASS}",
            }
        )
    )
    assert (config.consumer_heartbeat_interval_ms, config.consumer_session_timeout_ms) == (500, 50_000)
    assert config.consumer_max_size == 3
    assert config.consumer_assignors == ("range", UNIFORM_CLASS)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"group.consumer.session.timeout.ms": "30000"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms"),
        (
            {"group.consumer.min.session.timeout.ms": "70000", "group.consumer.session.timeout.ms": "70000"},
            "group.consumer.min.session.timeout.ms",
        ),
        (
            {
                "group.consumer.min.session.timeout.ms": "6000",
                "group.consumer.session.timeout.ms": "6000",
                "group.consumer.heartbeat.interval.ms": "6000",
                "group.consumer.max.heartbeat.interval.ms": "6000",
            },
            "group.consumer.heartbeat.interval.ms",
        ),
        ({"group.consumer.max.size": "0"}, "group.consumer.max.size"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
    ],
)
def test_bounds_are_checked(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaConfig(settings)
    assert key in str(info.value)


@pytest.mark.parametrize(
    ("value", "upgrade", "downgrade"),
    [
        (None, True, True),  # Kafka 4's default: bidirectional
        ("upgrade", True, False),
        ("DOWNGRADE", False, True),
        ("Disabled", False, False),
    ],
)
def test_the_migration_policy(value: str | None, upgrade: bool, downgrade: bool) -> None:
    settings = {} if value is None else {"group.consumer.migration.policy": value}
    config = GroupConfig.from_kafka_config(KafkaConfig(settings))
    assert (config.upgrade_enabled, config.downgrade_enabled) == (upgrade, downgrade)


def test_an_unknown_migration_policy_is_refused() -> None:
    with pytest.raises(ConfigError):
        KafkaConfig({"group.consumer.migration.policy": "sideways"})
