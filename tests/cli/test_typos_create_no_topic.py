"""A topic named by a tool that only reads is never created, even by a broker that auto-creates topics
(auto.create.topics.enable=true): every tool path given a topic that does not exist answers as Kafka's
tool does (its error line, its exit status) and leaves no topic behind. The producers are left out:
writing to a topic auto-creates it, in Kafka too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client import KafkaClient
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import run_odradek

BROKER_ID = 1
NOT_FOUND = "Error: Topic {topic} not found."
NOT_ELECTED = (
    "Error completing leader election (PREFERRED) for partition: {topic}-0: UNKNOWN_TOPIC_OR_PARTITION: "
    "The partition does not exist."
)
# per tool path: its arguments, its exit status, the stream and a line of it ({topic}, {dir} filled in)
CASES = {
    "reassign-execute": (
        ["reassign-partitions", "--execute", "--reassignment-json-file", "{dir}/plan.json"], 1, "stderr",
        NOT_FOUND,
    ),
    "reassign-generate": (
        ["reassign-partitions", "--generate", "--topics-to-move-json-file", "{dir}/topics.json",
         "--broker-list", str(BROKER_ID)], 1, "stderr", NOT_FOUND,
    ),
    "reassign-verify": (
        ["reassign-partitions", "--verify", "--reassignment-json-file", "{dir}/plan.json"], 1, "stdout",
        "There is no active reassignment of partition {topic}-0, but replica set is  rather than "
        f"{BROKER_ID}.",
    ),
    "reassign-cancel": (
        ["reassign-partitions", "--cancel", "--reassignment-json-file", "{dir}/plan.json"], 1, "stdout",
        "None of the specified partition reassignments are active.",
    ),
    "console-consumer-subscribed": (
        ["console-consumer", "--topic", "{topic}", "--timeout-ms", "2000"], 0, "stderr",
        "Processed a total of 0 messages",
    ),
    "console-consumer-partition": (
        ["console-consumer", "--topic", "{topic}", "--partition", "0"], 1, "stderr", NOT_FOUND,
    ),
    "consumer-perf-test": (
        ["consumer-perf-test", "--topic", "{topic}", "--messages", "1", "--timeout", "2000"], 0, "stdout",
        "WARNING: Exiting before consuming the expected number of messages: timeout (2000 ms) exceeded. "
        "You can use the --timeout option to increase the timeout.",
    ),
    "topics-describe": (
        ["topics", "--describe", "--topic", "{topic}"], 1, "stderr",
        "Error while executing topic command : Topic '{topic}' does not exist as expected",
    ),
    "topics-alter": (
        ["topics", "--alter", "--topic", "{topic}", "--partitions", "3"], 1, "stderr",
        "Error while executing topic command : Topic '{topic}' does not exist as expected",
    ),
    "configs-describe": (
        ["configs", "--entity-type", "topics", "--entity-name", "{topic}", "--describe"], 1, "stderr",
        "Error: Topic {topic} does not exist.",
    ),
    "configs-alter": (
        ["configs", "--entity-type", "topics", "--entity-name", "{topic}", "--alter", "--add-config",
         "retention.ms=1000"], 1, "stderr", "Error: Topic {topic} does not exist.",
    ),
    "consumer-groups-reset-offsets": (
        ["consumer-groups", "--reset-offsets", "--group", "g-{topic}", "--topic", "{topic}", "--to-earliest",
         "--execute"], 1, "stderr", "Error: Topic '{topic}' does not exist",
    ),
    "consumer-groups-delete-offsets": (
        ["consumer-groups", "--delete-offsets", "--group", "g-{topic}", "--topic", "{topic}"], 1, "stderr",
        "Error: Topic '{topic}' does not exist",
    ),
    "delete-records": (
        ["delete-records", "--offset-json-file", "{dir}/offsets.json"], 1, "stdout",
        "partition: {topic}-0\terror: UNKNOWN_TOPIC_OR_PARTITION",
    ),
    "log-dirs": (
        ["log-dirs", "--describe", "--topic-list", "{topic}"], 0, "stdout",
        "Received log directory information from brokers 1",
    ),
    "leader-election-topic": (
        ["leader-election", "--election-type", "preferred", "--topic", "{topic}", "--partition", "0"], 1,
        "stdout", NOT_ELECTED,
    ),
    "leader-election-file": (
        ["leader-election", "--election-type", "preferred", "--path-to-json-file", "{dir}/election.json"], 1,
        "stdout", NOT_ELECTED,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def auto_creating_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("auto-creating")
    overrides = {"auto.create.topics.enable": "true"}
    with BrokerProcess(
        root / "data", output_path=root / "broker.out", broker_id=BROKER_ID, overrides=overrides
    ) as process:
        yield process


def topics(bootstrap: str) -> set[str]:
    with KafkaClient(bootstrap) as client:
        return set(client.metadata(None).topics)


def write_files(directory: Path, topic: str) -> None:
    partition = {"topic": topic, "partition": 0}
    files = {
        "plan.json": {"version": 1, "partitions": [{**partition, "replicas": [BROKER_ID]}]},
        "topics.json": {"version": 1, "topics": [{"topic": topic}]},
        "offsets.json": {"version": 1, "partitions": [{**partition, "offset": 1}]},
        "election.json": {"partitions": [partition]},
    }
    for name, document in files.items():
        (directory / name).write_text(json.dumps(document))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_topic_stays_missing(
    auto_creating_broker: BrokerProcess, unique_topic: str, tmp_path: Path, case: str
) -> None:
    args, status, stream, line = CASES[case]
    write_files(tmp_path, unique_topic)
    filled = [a.format(topic=unique_topic, dir=tmp_path) for a in args]
    done = run_odradek(*filled, "--bootstrap-server", auto_creating_broker.bootstrap, timeout=60)
    assert done.returncode == status, done.stdout + done.stderr
    assert line.format(topic=unique_topic) in getattr(done, stream).splitlines(), done.stdout + done.stderr
    assert unique_topic not in topics(auto_creating_broker.bootstrap)
