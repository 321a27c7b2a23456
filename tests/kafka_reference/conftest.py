"""Fixtures of the side-by-side tests with Apache Kafka (issue 34): the pinned Kafka versions, skipped
in one line where Java or their jars are missing (tools/install-deps.sh fetches them; CI has both, so
there they run), the main classes of Kafka's command-line tools, and `run`, which runs one of them."""

from __future__ import annotations

import subprocess

import pytest

from odradek.testing import kafka_reference
from tests.conftest import topic_name

TOOLS = "org.apache.kafka.tools"  # the main classes bin/kafka-*.sh run
TOPICS = f"{TOOLS}.TopicCommand"
CONFIGS = f"{TOOLS}.ConfigCommand"
GROUPS = f"{TOOLS}.consumer.group.ConsumerGroupCommand"
CONSOLE_PRODUCER = f"{TOOLS}.ConsoleProducer"
CONSOLE_CONSUMER = f"{TOOLS}.consumer.ConsoleConsumer"
GET_OFFSETS = f"{TOOLS}.GetOffsetShell"
DELETE_RECORDS = f"{TOOLS}.DeleteRecordsCommand"
LOG_DIRS = f"{TOOLS}.LogDirsCommand"
PRODUCER_PERF = f"{TOOLS}.ProducerPerformance"
CONSUMER_PERF = f"{TOOLS}.ConsumerPerformance"
ACLS = f"{TOOLS}.AclCommand"
LEADER_ELECTION = f"{TOOLS}.LeaderElectionCommand"
TRANSACTIONS = f"{TOOLS}.TransactionsCommand"
REASSIGN = f"{TOOLS}.reassign.ReassignPartitionsCommand"
METADATA_QUORUM = f"{TOOLS}.MetadataQuorumCommand"


def require_kafka(version: str) -> None:
    """Skip the test, in one line, when Kafka `version` cannot run here."""
    reason = kafka_reference.missing(version)
    if reason is not None:
        pytest.skip(reason)


def run(main_class: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Kafka 4.x's tool `main_class` run with `args` (its exit status and output)."""
    return kafka_reference.run_tool(kafka_reference.KRAFT_VERSION, main_class, args, input=input)


def run_ok(main_class: str, *args: str, input: str | None = None) -> str:
    """stdout of the tool's run; an exit status other than 0 fails the test with its output."""
    done = run(main_class, *args, input=input)
    if done.returncode != 0:
        name = main_class.rsplit(".", 1)[-1]
        pytest.fail(f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """The suite's fresh topic name without '_': kafka-topics warns on a name with '_' or '.' (they
    collide in metric names), which would be a line more in the output the tests compare."""
    return topic_name(request.node.name).replace("_", "-")
