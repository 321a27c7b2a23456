"""`odradek topics` (kafka-topics) run through the entry point against a broker process.

The output lines are Kafka 3.9's TopicCommand's; each effect is checked with confluent-kafka's
AdminClient, a client that is not the tool's own.
"""

from __future__ import annotations

import base64
import struct

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

ERROR = "Error while executing topic command : "


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def described(bootstrap: str, topic: str):
    client = admin(bootstrap)
    return client.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    client, resource = admin(bootstrap), ConfigResource("topic", topic)
    return client.describe_configs([resource])[resource].result(timeout=30)[name].value


def kafka_uuid(uuid) -> str:
    """Java's Uuid.toString (URL-safe base64, no padding); librdkafka's str() uses plain base64."""
    raw = struct.pack(">qq", uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture
def topic(unique_topic: str) -> str:
    """A fresh name without '_' (which would add Kafka's name-collision warning to the output)."""
    return unique_topic.replace("_", "-")


def topics(bootstrap: str, *args: str) -> str:
    return ok("topics", "--bootstrap-server", bootstrap, *args)


def test_create_describe_alter_delete(tool_broker, topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    created = topics(bootstrap, "--create", "--topic", topic, "--partitions", "3",
                     "--replication-factor", "1", "--config", "retention.ms=123456",
                     "--config", "cleanup.policy=compact")  # fmt: skip
    assert created == f"Created topic {topic}.\n"
    assert len(described(bootstrap, topic).partitions) == 3
    assert topic_config(bootstrap, topic, "retention.ms") == "123456"

    topic_id = kafka_uuid(described(bootstrap, topic).topic_id)
    head = (
        f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: 3\tReplicationFactor: 1\t"
        "Configs: cleanup.policy=compact,retention.ms=123456"
    )
    rows = [f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]
    assert topics(bootstrap, "--describe", "--topic", topic).splitlines() == [head, *rows]

    assert topics(bootstrap, "--alter", "--topic", topic, "--partitions", "5") == ""
    assert len(described(bootstrap, topic).partitions) == 5
    assert "PartitionCount: 5\t" in topics(bootstrap, "--describe", "--topic", topic)

    assert topics(bootstrap, "--delete", "--topic", topic) == ""
    assert topic not in admin(bootstrap).list_topics(timeout=30).topics


def test_create_twice_fails_unless_if_not_exists(tool_broker, topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    topics(bootstrap, "--create", "--topic", topic)
    again = run_odradek("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic)
    assert (again.returncode, again.stdout) == (1, ""), exit_report(again)
    assert again.stderr == f"{ERROR}Topic '{topic}' already exists.\n"
    assert topics(bootstrap, "--create", "--topic", topic, "--if-not-exists") == ""


def test_replica_assignment_and_collision_warning(tool_broker, topic: str) -> None:
    name = topic.replace("-", "_")
    out = topics(tool_broker.bootstrap, "--create", "--topic", name, "--replica-assignment", "1,1")
    assert out.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
        "could collide. To avoid issues it is best to use either, but not both.",
        f"Created topic {name}.",
    ]
    assert [p.replicas[0].id for p in described(tool_broker.bootstrap, name).partitions] == [1, 1]


def test_list_and_describe_take_a_regex(tool_broker, topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    names = [f"{topic}-a", f"{topic}-b", f"other-{topic}"]
    for name in names:
        topics(bootstrap, "--create", "--topic", name, "--partitions", "1")
    assert topics(bootstrap, "--list", "--topic", f"{topic}-.*").splitlines() == names[:2]
    assert names[2] in topics(bootstrap, "--list").splitlines()
    heads = [line for line in topics(bootstrap, "--describe", "--topic", f"{topic}-.*").splitlines()
             if line.startswith("Topic: ")]  # fmt: skip
    assert [line.split("\t")[0] for line in heads] == [f"Topic: {n}" for n in names[:2]]


def test_topics_with_overrides_and_partition_filters(tool_broker, topic: str) -> None:
    bootstrap = tool_broker.bootstrap
    plain, tuned = f"{topic}-plain", f"{topic}-tuned"
    topics(bootstrap, "--create", "--topic", plain)
    topics(bootstrap, "--create", "--topic", tuned, "--config", "max.message.bytes=5000")
    overrides = topics(bootstrap, "--describe", "--topic", f"{topic}-.*", "--topics-with-overrides")
    assert [line.split("\t")[0] for line in overrides.splitlines()] == [f"Topic: {tuned}"]
    assert overrides.rstrip("\n").endswith("Configs: max.message.bytes=5000")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert topics(bootstrap, "--describe", "--topic", f"{topic}-.*", flag) == ""


def test_missing_topics_are_errors_unless_if_exists(tool_broker, topic: str) -> None:
    for action in ("--describe", "--delete"):
        done = run_odradek("topics", "--bootstrap-server", tool_broker.bootstrap, action, "--topic", topic)
        assert done.returncode == 1, exit_report(done)
        assert done.stderr == f"{ERROR}Topic '{topic}' does not exist as expected\n"
        assert topics(tool_broker.bootstrap, action, "--topic", topic, "--if-exists") == ""


def test_broker_errors_and_usage_errors_are_one_line(tool_broker, topic: str) -> None:
    too_many = run_odradek("topics", "--bootstrap-server", tool_broker.bootstrap, "--create",
                           "--topic", topic, "--replication-factor", "3")  # fmt: skip
    assert too_many.returncode == 1 and len(too_many.stderr.splitlines()) == 1
    assert too_many.stderr.startswith(ERROR) and "3" in too_many.stderr
    usage = run_odradek("topics", "--bootstrap-server", tool_broker.bootstrap, "--create")
    assert usage.returncode == 2, exit_report(usage)
    assert usage.stderr.splitlines() == [
        "odradek topics: --topic is required with --create, --alter and --delete "
        "(see 'odradek topics --help')"
    ]


def test_an_unknown_config_name_is_named_as_unknown(tool_broker, topic: str) -> None:
    done = run_odradek("topics", "--bootstrap-server", tool_broker.bootstrap, "--create", "--topic", topic,
                       "--config", "nosuch.config=1")  # fmt: skip
    assert (done.returncode, done.stderr) == (1, f"{ERROR}Unknown topic config name: nosuch.config\n")
    assert topics(tool_broker.bootstrap, "--list", "--topic", topic) == ""


def test_a_misspelled_flag_is_named() -> None:
    done = run_odradek("topics", "--bootstrap-server", "127.0.0.1:1", "--lsit")
    assert (done.returncode, done.stdout) == (2, ""), exit_report(done)
    assert done.stderr == "odradek topics: unrecognized arguments: --lsit (see 'odradek topics --help')\n"
