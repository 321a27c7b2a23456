"""`odradek share-groups` line by line against a broker process, with a confluent-kafka ShareConsumer
as the group's member: --list [--state], --describe with its offsets, members and state tables
(--verbose), --delete refused while the group has members, --reset-offsets refused then done once
it is empty (--dry-run, --execute, --to-earliest / --to-latest / --to-datetime), --delete-offsets
and --delete, each printed as Kafka 4.4's kafka-share-groups prints it (checked against Kafka's own
tool in tests/kafka_reference/test_share_tools.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok, run_odradek
from tests.share.test_share_consumers import SETTINGS

GROUP, TOPIC = "tool-group", "tool-topic"
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("share-tools")
    with BrokerProcess(root / "data", overrides=SETTINGS, output_path=root / "broker.out") as process:
        yield process


def tool(broker: BrokerProcess, *args: str) -> list[str]:
    return ok("share-groups", "--bootstrap-server", broker.bootstrap, *args).splitlines()


def until(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_share_groups_tool(broker: BrokerProcess) -> None:
    servers = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        future.result(timeout=30)
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.GROUP, GROUP, incremental_configs=[earliest])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": servers})
    for i in range(10):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": servers, "group.id": GROUP, "client.id": "cid"})
    consumer.subscribe([TOPIC])
    received = 0
    try:
        deadline = time.monotonic() + DEADLINE_S
        while received < 10 and time.monotonic() < deadline:
            received += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        assert received == 10
        consumer.poll(0.5)  # acknowledges the last records
        _with_a_member(broker)
    finally:
        consumer.close()
    state = ["--describe", "--group", GROUP, "--state"]
    until(lambda: tool(broker, *state)[2].split()[3] == "Empty", "the group to empty")
    _without_members(broker)


def _with_a_member(broker: BrokerProcess) -> None:
    assert tool(broker, "--list") == [GROUP]
    assert tool(broker, "--list", "--state") == ["GROUP           STATE", f"{GROUP}      Stable"]
    assert tool(broker, "--list", "--state", "Empty") == ["GROUP           STATE"]
    offsets = tool(broker, "--describe", "--group", GROUP)
    assert offsets[:2] == ["", "GROUP           TOPIC           PARTITION  START-OFFSET  LAG"]
    for line, partition in zip(offsets[2:], (0, 1), strict=True):
        assert re.fullmatch(rf"{GROUP}      {TOPIC}      {partition}          \d+ +0", line), line
    verbose = tool(broker, "--describe", "--group", GROUP, "--offsets", "--verbose")
    assert verbose[1] == "GROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET  LAG"
    assert re.fullmatch(rf"{GROUP}      {TOPIC}      0          0             \d+ +0", verbose[2])
    members = tool(broker, "--describe", "--group", GROUP, "--members", "--verbose")
    assert members[0] == ""
    assert re.fullmatch(
        r"GROUP +CONSUMER-ID +HOST +CLIENT-ID +#PARTITIONS  MEMBER-EPOCH  ASSIGNMENT", members[1]
    )
    assert re.fullmatch(rf"{GROUP} +\S+ +/127\.0\.0\.1 +cid +2 +\d+ +{TOPIC}:0,1", members[2]), members[2]
    state = tool(broker, "--describe", "--group", GROUP, "--state", "--verbose")
    assert (
        state[1]
        == "GROUP           COORDINATOR (ID)          STATE           GROUP-EPOCH  ASSIGNMENT-EPOCH  #MEMBERS"
    )
    assert re.fullmatch(rf"{GROUP}      127\.0\.0\.1:\d+  \(0\) +Stable +\d+ +\d+ +1", state[2]), state[2]
    refused = run_odradek(
        "share-groups", "--bootstrap-server", broker.bootstrap, "--delete", "--group", GROUP
    )
    assert refused.returncode == 1
    assert refused.stdout.splitlines() == [
        "",
        "Error: Deletion of some share groups failed:",
        f"* Group '{GROUP}' could not be deleted due to: "
        f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{GROUP}' is not EMPTY.",
    ]
    busy = run_odradek(
        "share-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", GROUP,
        "--topic", TOPIC, "--to-earliest", "--dry-run",
    )  # fmt: skip
    assert busy.returncode == 1 and busy.stderr == f"Share group '{GROUP}' is not empty.\n"


def _without_members(broker: BrokerProcess) -> None:
    state = run_odradek(
        "share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", GROUP, "--state"
    )
    assert state.stdout.splitlines()[2].split()[3:] == ["Empty", "0"]
    assert state.stderr == f"\nShare group '{GROUP}' has no active members.\n"
    reset = ["--reset-offsets", "--group", GROUP, "--topic", TOPIC]
    # the rows in the order of Kafka's HashMap of partitions: for this topic, 0 then 1
    head = "GROUP           TOPIC           PARTITION  NEW-OFFSET"
    assert tool(broker, *reset, "--to-earliest", "--dry-run") == [
        "",
        head,
        f"{GROUP}      {TOPIC}      0          0",
        f"{GROUP}      {TOPIC}      1          0",
    ]
    assert tool(broker, *reset, "--to-latest", "--execute")[2:] == [
        f"{GROUP}      {TOPIC}      0          5",
        f"{GROUP}      {TOPIC}      1          5",
    ]
    back = ["--reset-offsets", "--group", GROUP, "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000"]
    assert tool(broker, *back, "--execute")[2:] == [
        f"{GROUP}      {TOPIC}      0          0",
        f"{GROUP}      {TOPIC}      1          0",
    ]
    assert tool(broker, "--describe", "--group", GROUP)[2:] == [
        f"{GROUP}      {TOPIC}      0          0             5",
        f"{GROUP}      {TOPIC}      1          0             5",
    ]
    assert tool(broker, "--delete-offsets", "--group", GROUP, "--topic", TOPIC) == [
        "",
        "TOPIC           STATUS",
        f"{TOPIC}      Successful",
    ]
    assert tool(broker, "--describe", "--group", GROUP) == [
        "",
        f"Share group '{GROUP}' has no offset information.",
    ]
    assert tool(broker, "--delete", "--group", GROUP) == [
        f"Deletion of requested share groups ('{GROUP}') was successful."
    ]
    assert tool(broker, "--list") == []
    missing = run_odradek(
        "share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", GROUP
    )
    assert missing.returncode == 1
    assert missing.stdout.splitlines() == [
        "",
        "Error: Executing share group command failed due to "
        f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {GROUP} not found.",
    ]
