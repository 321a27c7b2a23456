"""KafkaConfig: properties syntax, overrides, Kafka's types/defaults/validation, derived values."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.server.config import (
    ConfigError,
    ConfigSource,
    ConfigType,
    KafkaConfig,
    Listener,
    parse_connection_overrides,
    parse_override,
    parse_properties,
)


def test_properties_syntax():
    text = "\n".join(
        [
            "# a comment",
            "   ! another comment",
            "",
            "plain=value",
            "colon : spaced value  ",
            "space separated",
            "continued = first \\",
            "    second",
            "escaped\\=key=1",
            "unicode=\\u0041\\tB",
            "trailing.backslash=C:\\\\dir",
        ]
    )
    assert parse_properties(text) == {
        "plain": "value",
        "colon": "spaced value  ",
        "space": "separated",
        "continued": "first second",
        "escaped=key": "1",
        "unicode": "A\tB",
        "trailing.backslash": "C:\\dir",
    }


def test_file_then_overrides(tmp_path: Path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=4\nnum.partitions=3\nlog.dirs=/a,/b\n")
    config = KafkaConfig.from_sources(path, ["num.partitions=5", "log.retention.hours = 1"])
    assert config.broker_id == 4
    assert config["num.partitions"] == 5
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert config.log_retention_ms == 3_600_000
    assert config.is_set("num.partitions") and not config.is_set("message.max.bytes")


def test_defaults_are_kafkas_with_single_node_deviations(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    config = KafkaConfig()
    assert config.broker_id == 0
    assert config.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert config.advertised_listeners == config.listeners
    assert config.log_dirs == [tmp_path / "odradek" / "data"]
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["log.retention.check.interval.ms"] == 300000
    assert config["offsets.topic.num.partitions"] == 50
    assert config["auto.create.topics.enable"] is True
    assert config.log_retention_ms == 7 * 24 * 3_600_000
    assert config.log_roll_ms == 7 * 24 * 3_600_000
    assert config.zookeeper_connect is None


def test_log_dir_used_without_log_dirs():
    assert KafkaConfig({"log.dir": "/x"}).log_dirs == [Path("/x")]
    assert KafkaConfig({"log.dir": "/x", "log.dirs": "/y"}).log_dirs == [Path("/y")]


def test_retention_and_roll_precedence():
    assert KafkaConfig({"log.retention.hours": "2", "log.retention.minutes": "3"}).log_retention_ms == 180_000
    both = {"log.retention.minutes": "3", "log.retention.ms": "7"}
    assert KafkaConfig(both).log_retention_ms == 7
    assert KafkaConfig({"log.retention.ms": "-5"}).log_retention_ms == -1
    assert KafkaConfig({"log.roll.hours": "2", "log.roll.ms": "9"}).log_roll_ms == 9
    assert KafkaConfig({"log.roll.hours": "2"}).log_roll_ms == 7_200_000


def test_flush_interval_falls_back_to_scheduler_interval():
    assert KafkaConfig({"log.flush.scheduler.interval.ms": "500"}).log_flush_interval_ms == 500
    assert KafkaConfig({"log.flush.interval.ms": "20"}).log_flush_interval_ms == 20


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "many"),
        ("num.partitions", "0"),
        ("broker.id", "-2"),
        ("message.max.bytes", "99999999999"),
        ("log.segment.bytes", "13"),
        ("auto.create.topics.enable", "yes"),
        ("log.message.timestamp.type", "WallTime"),
        ("log.cleanup.policy", "delete,shred"),
        ("listeners", "PLAINTEXT://127.0.0.1"),
        ("listeners", "PLAINTEXT://127.0.0.1:70000"),
        ("listeners", "NOPE://127.0.0.1:9092"),
        ("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
        ("advertised.listeners", "OTHER://127.0.0.1:9092"),
        ("log.retention.ms", "0"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("offsets.topic.replication.factor", "40000"),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        KafkaConfig({key: value})
    assert info.value.key == key
    assert key in str(info.value)


def test_named_listeners_take_their_protocol_from_the_map():
    config = KafkaConfig(
        {
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
            "advertised.listeners": "EXTERNAL://broker.example:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        }
    )
    assert config.listeners == [
        Listener("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("EXTERNAL", "0.0.0.0", 9093, "PLAINTEXT"),
    ]
    assert config.advertised_listeners == [Listener("EXTERNAL", "broker.example", 9093, "PLAINTEXT")]


def test_listeners_must_not_share_a_port():
    with pytest.raises(ConfigError, match="different port") as info:
        KafkaConfig(
            {
                "listeners": "A://127.0.0.1:9092,B://127.0.0.2:9092",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
            }
        )
    assert info.value.key == "listeners"


def test_malformed_override():
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("no-equals-sign")
    assert parse_override(" a.b = c=d ") == ("a.b", "c=d")


def test_unknown_keys_warn_and_ignored_keys_do_not(caplog):
    with caplog.at_level(logging.WARNING, logger="odradek.server.config"):
        config = KafkaConfig(
            {
                "made.up.key": "1",
                "num.network.threads": "3",
                "ssl.client.auth": "none",
                "security.inter.broker.protocol": "PLAINTEXT",
                "authorizer.class.name": "",
            }
        )
    assert config.unknown_keys == ["made.up.key"]
    assert "made.up.key" in caplog.text
    for harmless in (
        "num.network.threads",
        "ssl.client.auth",
        "security.inter.broker.protocol",
        "authorizer",
    ):
        assert harmless not in caplog.text


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
        ("super.users", "User:admin"),
        ("principal.builder.class", "com.example.Builder"),
        ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
        ("ssl.engine.factory.class", "com.example.Factory"),
        ("ssl.keymanager.algorithm", "PKIX"),
        ("zookeeper.ssl.client.enable", "true"),
        ("zookeeper.set.acl", "true"),
        ("delegation.token.secret.key", "secret"),
        ("listener.name.external.ssl.engine.factory.class", "com.example.Factory"),
        ("listener.name.external.max.connections", "10"),
        ("listener.name.external.max.connection.creation.rate", "10"),
    ],
)
def test_protections_odradek_does_not_provide_are_refused_naming_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        KafkaConfig({key: value})
    assert info.value.key == key
    assert key in str(info.value) and "does not provide" in str(info.value)


def test_a_listener_mapped_to_an_unknown_protocol_is_refused():
    with pytest.raises(ConfigError, match="SECURE.*odradek serves only") as info:
        KafkaConfig(
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:KERBEROS",
            }
        )
    assert info.value.key == "listeners"


def test_connection_limits_are_read_with_kafkas_defaults():
    defaults = KafkaConfig()
    assert defaults["max.connections"] == defaults["max.connections.per.ip"] == 2**31 - 1
    assert defaults["max.connection.creation.rate"] == 2**31 - 1
    assert defaults["max.connections.per.ip.overrides"] == ""
    assert defaults["connections.max.idle.ms"] == 600_000
    assert defaults["queued.max.request.bytes"] == -1
    assert defaults["request.timeout.ms"] == 30_000
    config = KafkaConfig(
        {
            "max.connections": "100",
            "max.connections.per.ip": "5",
            "max.connections.per.ip.overrides": "127.0.0.2:7, broker.example:0,[::1]:3",
            "max.connection.creation.rate": "20",
            "connections.max.idle.ms": "-1",
            "queued.max.request.bytes": "209715200",
            "request.timeout.ms": "1000",
        }
    )
    assert (config["max.connections"], config["max.connections.per.ip"]) == (100, 5)
    assert parse_connection_overrides(config["max.connections.per.ip.overrides"]) == {
        "127.0.0.2": 7,
        "broker.example": 0,
        "::1": 3,
    }
    assert config["max.connection.creation.rate"] == 20
    assert config["connections.max.idle.ms"] == -1
    assert config["queued.max.request.bytes"] == 209_715_200
    assert config["request.timeout.ms"] == 1000
    assert config.unknown_keys == []


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"max.connections": "-1"}, "max.connections"),
        ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, "max.connections.per.ip.overrides"),
        ({"max.connection.creation.rate": "-5"}, "max.connection.creation.rate"),
        ({"request.timeout.ms": "-1"}, "request.timeout.ms"),
        ({"queued.max.request.bytes": "1000"}, "queued.max.request.bytes"),
    ],
)
def test_bad_connection_limits_name_the_key(props, key):
    with pytest.raises(ConfigError) as info:
        KafkaConfig(props)
    assert info.value.key == key


def test_describe_reports_source_and_type():
    entries = {e.name: e for e in KafkaConfig({"num.partitions": "3"}).describe()}
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert not entries["num.partitions"].is_default
    assert entries["message.max.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["message.max.bytes"].is_default and not entries["message.max.bytes"].read_only
    assert entries["num.partitions"].read_only
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.dirs"].config_type is ConfigType.LIST


def test_topic_defaults_follow_broker_settings():
    config = KafkaConfig(
        {"log.retention.hours": "24", "log.segment.bytes": "1000", "compression.type": "lz4"}
    )
    defaults = config.topic_config_defaults()
    assert defaults["retention.ms"] == "86400000"
    assert defaults["segment.bytes"] == "1000"
    assert defaults["compression.type"] == "lz4"
    assert defaults["cleanup.policy"] == "delete"
    log_config = config.log_config({"retention.ms": "5"})
    assert log_config.retention_ms == 5 and log_config.segment_bytes == 1000


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"no.such.config": "1"}, "no.such.config"),
        ({"segment.bytes": "1"}, "segment.bytes"),
        ({"compression.type": "zip"}, "compression.type"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"remote.storage.enable": "true"}, "remote.storage.enable"),
    ],
)
def test_bad_topic_configs_are_refused(configs, key):
    with pytest.raises(ConfigError) as info:
        KafkaConfig().log_config(configs)
    assert info.value.key == key


def test_describe_topic_sources_and_synonyms():
    config = KafkaConfig({"log.retention.hours": "24"})
    entries = {e.name: e for e in config.describe_topic({"segment.bytes": "2000"})}
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source, segment.is_default) == ("2000", ConfigSource.TOPIC_CONFIG, False)
    assert [s.source for s in segment.synonyms] == [ConfigSource.TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG]
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("86400000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value) for s in retention.synonyms] == [
        ("log.retention.hours", "24"),
        ("log.retention.hours", "168"),
    ]
    assert retention.config_type is ConfigType.LONG
    assert entries["max.message.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert not entries["max.message.bytes"].read_only
