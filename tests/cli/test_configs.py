"""`odradek configs` (kafka-configs) run through the entry point against a broker process.

Output lines are Kafka 3.9's ConfigCommand's; each change is checked with confluent-kafka's AdminClient.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def config_entries(bootstrap: str, kind: str, name: str) -> dict:
    client, resource = admin(bootstrap), ConfigResource(kind, name)
    return client.describe_configs([resource])[resource].result(timeout=30)


def create_topic(bootstrap: str, topic: str) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def configs(bootstrap: str, *args: str) -> list[str]:
    return ok("configs", "--bootstrap-server", bootstrap, *args).splitlines()


def test_topic_configs_set_described_and_deleted(tool_broker, unique_topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic)
    entity = ["--entity-type", "topics", "--entity-name", unique_topic]
    assert configs(bootstrap, *entity, "--describe") == [f"Dynamic configs for topic {unique_topic} are:"]

    done = configs(
        bootstrap, *entity, "--alter", "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]"
    )
    assert done == [f"Completed updating config for topic {unique_topic}."]
    entries = config_entries(bootstrap, "topic", unique_topic)
    assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == ("5000", "compact,delete")

    assert configs(bootstrap, "--topic", unique_topic, "--describe") == [
        f"Dynamic configs for topic {unique_topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
        "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]

    configs(bootstrap, *entity, "--alter", "--delete-config", "cleanup.policy")
    assert config_entries(bootstrap, "topic", unique_topic)["cleanup.policy"].value == "delete"
    described = configs(bootstrap, *entity, "--describe")
    assert [line.split("=")[0] for line in described[1:]] == ["  retention.ms"]

    everything = configs(bootstrap, *entity, "--describe", "--all")
    assert everything[0] == f"All configs for topic {unique_topic} are:"
    assert (
        "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}"
        in everything
    )
    names = [line.split("=")[0].strip() for line in everything[1:]]
    assert names == sorted(names) and len(names) > 20


def test_deleting_an_unset_config_is_refused(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic)
    done = run_odradek("configs", "--bootstrap-server", tool_broker.bootstrap, "--topic", unique_topic,
                       "--alter", "--delete-config", "retention.ms")  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "Error: Invalid config(s): retention.ms\n")


def test_broker_and_default_broker_configs(tool_broker) -> None:
    bootstrap = tool_broker.bootstrap
    defaults = ["--entity-type", "brokers", "--entity-default"]
    assert configs(bootstrap, *defaults, "--alter", "--add-config", "log.cleaner.threads=2") == [
        "Completed updating default config for brokers in the cluster."
    ]
    broker = ["--entity-type", "brokers", "--entity-name", "1"]
    assert configs(bootstrap, *broker, "--alter", "--add-config", "log.cleaner.threads=3") == [
        "Completed updating config for broker 1."
    ]
    assert config_entries(bootstrap, "broker", "1")["log.cleaner.threads"].value == "3"
    try:
        assert configs(bootstrap, "--entity-type", "brokers", "--describe") == [
            "Dynamic configs for broker 1 are:",
            "  log.cleaner.threads=3 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=3, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}",
            "Default configs for brokers in the cluster are:",
            "  log.cleaner.threads=2 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}",
        ]
    finally:
        configs(bootstrap, *broker, "--alter", "--delete-config", "log.cleaner.threads")
        configs(bootstrap, *defaults, "--alter", "--delete-config", "log.cleaner.threads")
    assert config_entries(bootstrap, "broker", "1")["log.cleaner.threads"].value == "1"


def test_unknown_topic_and_unsupported_entities_are_one_line(tool_broker, unique_topic: str) -> None:
    missing = run_odradek(
        "configs", "--bootstrap-server", tool_broker.bootstrap, "--topic", unique_topic, "--describe"
    )
    assert (missing.returncode, missing.stdout) == (1, ""), exit_report(missing)
    assert missing.stderr.splitlines() == [f"Error: Topic {unique_topic} does not exist."]
    for kind in ("ips", "broker-loggers"):
        done = run_odradek(
            "configs", "--bootstrap-server", tool_broker.bootstrap, "--entity-type", kind, "--describe"
        )
        (line,) = done.stderr.splitlines()
        assert done.returncode == 2 and line.startswith(
            f"odradek configs: --entity-type {kind} is not supported: "
        ), exit_report(done)


def test_an_unknown_config_name_is_refused_in_kafkas_words(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic)
    done = run_odradek(
        "configs", "--bootstrap-server", tool_broker.bootstrap, "--entity-type", "topics", "--entity-name",
        unique_topic, "--alter", "--add-config", "nosuch.config=1",
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (1, "Error: Unknown topic config name: nosuch.config\n")
    change = ConfigEntry("nosuch.config", "1", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("TOPIC", unique_topic, incremental_configs=[change])
    client = admin(tool_broker.bootstrap)
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([resource])[resource].result(timeout=30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Unknown topic config name: nosuch.config"
