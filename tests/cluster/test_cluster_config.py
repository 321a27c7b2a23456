"""ZooKeeper mode's configuration keys: what is read, what is refused (naming the key)."""

from __future__ import annotations

import pytest

from odradek.server.config import ConfigError, KafkaConfig


def config(**overrides: str) -> KafkaConfig:
    return KafkaConfig.from_sources(None, [f"{k.replace('_', '.')}={v}" for k, v in overrides.items()])


def test_zookeeper_keys_are_read_with_kafkas_fallbacks():
    plain = config(zookeeper_connect="127.0.0.1:2181/kafka", zookeeper_session_timeout_ms="4000")
    assert plain.zookeeper_connect == "127.0.0.1:2181/kafka"
    assert plain.zookeeper_connection_timeout_ms == 4000
    assert plain.inter_broker_listener_name == "PLAINTEXT"
    named = config(
        listeners="CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
        listener_security_protocol_map="CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
        inter_broker_listener_name="REPLICATION",
        zookeeper_connection_timeout_ms="1500",
    )
    assert named.inter_broker_listener_name == "REPLICATION"
    assert named.zookeeper_connection_timeout_ms == 1500


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("zookeeper.connect", "127.0.0.1:2181//double"),
        ("zookeeper.connect", "nohostport"),
        ("inter.broker.listener.name", "NOPE"),
        ("broker.id.generation.enable", "true"),
    ],
)
def test_bad_cluster_keys_are_refused_naming_the_key(key, value):
    with pytest.raises(ConfigError) as refused:
        KafkaConfig.from_sources(None, [f"{key}={value}"])
    assert key in str(refused.value)
