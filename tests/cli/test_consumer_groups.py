"""`odradek consumer-groups` (kafka-consumer-groups) run through the entry point against a broker process.

Output lines are Kafka's ConsumerGroupCommand's (its fixed column widths, its notes on stderr; Kafka
4's columns for consumer-protocol groups); committed offsets are read back with confluent-kafka, a
client that is not the tool's own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

QUIET = {"log_level": 3}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)


def produce(
    bootstrap: str, topic: str, partition: int, count: int, timestamps: list[int] | None = None
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(count):
        stamp = {"timestamp": timestamps[i]} if timestamps else {}
        producer.produce(topic, b"v%d" % i, partition=partition, **stamp)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET, **conf}
    )


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    client = consumer(bootstrap, group)
    try:
        client.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        client.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    client = consumer(bootstrap, group)
    try:
        found = client.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return [tp.offset for tp in found]
    finally:
        client.close()


def groups(bootstrap: str, *args: str) -> str:
    return ok("consumer-groups", "--bootstrap-server", bootstrap, *args)


def row(*cells: str, widths: tuple[int, ...]) -> str:
    return " ".join([c.ljust(w) for c, w in zip(cells, widths, strict=False)] + list(cells[len(widths) :]))


@pytest.fixture
def group(unique_topic: str) -> str:
    return f"group-{unique_topic}"


@pytest.fixture
def active(tool_broker, unique_topic: str, group: str) -> Iterator[Consumer]:
    """A member of `group` owning both partitions of `unique_topic`; offset 1 of partition 0 committed."""
    create_topic(tool_broker.bootstrap, unique_topic, 2)
    produce(tool_broker.bootstrap, unique_topic, 0, 3)
    member = consumer(
        tool_broker.bootstrap, group, **{"client.id": "watched", "auto.offset.reset": "earliest"}
    )
    member.subscribe([unique_topic])
    deadline = time.monotonic() + 30
    while len(member.assignment()) < 2 and time.monotonic() < deadline:
        member.poll(0.2)
    assert len(member.assignment()) == 2
    member.commit(offsets=[TopicPartition(unique_topic, 0, 1)], asynchronous=False)
    yield member
    member.close()


def test_describe_list_and_delete_an_empty_group(tool_broker, unique_topic: str, group: str) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    produce(bootstrap, unique_topic, 0, 10)
    commit(bootstrap, group, unique_topic, {0: 6, 1: 0})

    listed = groups(bootstrap, "--list").splitlines()
    assert group in listed
    assert row(group, "Empty", widths=(len(group),)) in groups(bootstrap, "--list", "--state").splitlines()
    assert group not in groups(bootstrap, "--list", "--state", "Stable")

    described = run_odradek(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert described.stderr == f"\nConsumer group '{group}' has no active members.\n"
    widths = (len(group), len(unique_topic), 10, 15, 15, 15, 15, 15)
    assert described.stdout.split("\n") == [
        "",
        row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
            "CLIENT-ID", widths=widths),
        row(group, unique_topic, "0", "6", "10", "4", "-", "-", "-", widths=widths),
        row(group, unique_topic, "1", "0", "0", "0", "-", "-", "-", widths=widths),
        "",
        "",
    ]  # fmt: skip

    deleted = groups(bootstrap, "--delete", "--group", group)
    assert deleted == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in groups(bootstrap, "--list").splitlines()
    gone = run_odradek("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert (gone.returncode, gone.stdout) == (1, ""), exit_report(gone)
    assert gone.stderr == f"\nError: Consumer group '{group}' does not exist.\n"


def test_an_active_group_shows_members_state_and_refuses_a_reset(
    tool_broker, unique_topic: str, group: str, active: Consumer
) -> None:
    bootstrap = tool_broker.bootstrap
    offsets = groups(bootstrap, "--describe", "--group", group, "--offsets").splitlines()
    cells = [line.split() for line in offsets[2:4]]
    assert [c[:6] for c in cells] == [
        [group, unique_topic, "0", "1", "3", "2"],
        [group, unique_topic, "1", "-", "0", "-"],
    ]
    member_id = cells[0][6]
    assert member_id.startswith("watched-") and cells[0][7:] == ["/127.0.0.1", "watched"]

    widths = (len(group), len(member_id), 15, 15, 15)
    assert groups(bootstrap, "--describe", "--group", group, "--members", "--verbose").split("\n") == [
        "",
        row("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", widths=widths) + " ASSIGNMENT",
        row(group, member_id, "/127.0.0.1", "watched", "2", widths=widths) + f" {unique_topic}(0,1)",
        "",
        "",
    ]
    state = groups(bootstrap, "--describe", "--group", group, "--state").split("\n")
    coordinator = f"{tool_broker.bootstrap}  (1)"
    first = max(25, len(coordinator))
    assert state == [
        "",
        row(
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS",
            widths=(first, 25, 20, 15),
        ),
        row(group, coordinator, "range", "Stable", "1", widths=(first, 25, 20, 15)),
        "",
    ]

    refused = run_odradek("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets",
                          "--group", group, "--topic", unique_topic, "--to-earliest",
                          "--execute")  # fmt: skip
    assert refused.returncode == 1 and refused.stdout == "", exit_report(refused)
    assert refused.stderr == (
        f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state "
        "is Stable.\n"
    )
    assert committed(bootstrap, group, unique_topic, 1) == [1]


def test_a_consumer_protocol_group_shows_its_epochs_and_assignments(
    tool_broker, unique_topic: str, group: str
) -> None:
    """A KIP-848 group (group.protocol=consumer) described through ConsumerGroupDescribe, in Kafka 4's
    --verbose columns: the member's epoch and assignment, the target assignment and its epoch."""
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    member = consumer(bootstrap, group, **{"group.protocol": "consumer", "client.id": "kip848"})
    member.subscribe([unique_topic])
    try:
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2 and time.monotonic() < deadline:
            member.poll(0.2)
        assert len(member.assignment()) == 2
        verbose = groups(bootstrap, "--describe", "--group", group, "--members", "--verbose").split("\n")
        member_id, epoch = verbose[2].split()[1], verbose[2].split()[5]
        assert int(epoch) >= 1
        widths = (len(group), len(member_id), 15, 15, 15, 15, 20, 15, 20)
        assert verbose == [
            "",
            row("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", widths=widths) + " ",
            row(group, member_id, "/127.0.0.1", "kip848", "2", epoch, f"{unique_topic}:0,1", epoch,
                f"{unique_topic}:0,1", widths=widths) + " ",
            "",
            "",
        ]  # fmt: skip
        listed = groups(bootstrap, "--list", "--type", "--state").splitlines()
        assert listed[0].split() == ["GROUP", "TYPE", "STATE"]
        assert [group, "Consumer", "Stable"] in [line.split() for line in listed]
        assert group not in groups(bootstrap, "--list", "--type", "classic")
        state = groups(bootstrap, "--describe", "--group", group, "--state", "--verbose").split("\n")
        coordinator = f"{bootstrap}  (1)"
        widths = (max(25, len(coordinator)), 25, 20, 15, 15, 25)
        assert state[1:3] == [
            row("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS", widths=widths),
            row(group, coordinator, "uniform", "Stable", epoch, epoch, "1", widths=widths),
        ]  # fmt: skip
    finally:
        member.close()
    state = groups(bootstrap, "--describe", "--group", group, "--state").split("\n")[2].split()
    assert state[3:] == ["uniform", "Empty", "0"]


def reset(bootstrap: str, group: str, *args: str) -> list[str]:
    return groups(bootstrap, "--reset-offsets", "--group", group, *args).split("\n")


def new_offsets(group: str, topic: str, offsets: dict[int, int]) -> list[str]:
    widths = (30, 30, 10, 15)
    return [
        "",
        row("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", widths=widths),
        *(row(group, topic, str(p), str(o), widths=widths) for p, o in offsets.items()),
        "",
        "",
    ]


def test_reset_offsets_targets(tool_broker, unique_topic: str, group: str) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    base = int(time.time() * 1000) - 3 * 3600 * 1000
    stamps = [base + i * 1000 for i in range(8)] + [int(time.time() * 1000)] * 2
    produce(bootstrap, unique_topic, 0, 10, stamps)
    produce(bootstrap, unique_topic, 1, 4)
    commit(bootstrap, group, unique_topic, {0: 6, 1: 2})

    dry = run_odradek("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                      "--topic", unique_topic, "--to-earliest")  # fmt: skip
    assert dry.stderr.startswith("WARN: No action will be performed as the --execute option is missing.In a")
    assert dry.stdout.split("\n") == new_offsets(group, unique_topic, {0: 0, 1: 0})
    assert committed(bootstrap, group, unique_topic, 2) == [6, 2]

    shifted = reset(bootstrap, group, "--topic", unique_topic, "--shift-by", "-3", "--execute")
    below = (
        f"New offset (-1) is lower than earliest offset for topic partition {unique_topic}-1. "
        "Value will be set to 0"
    )
    assert shifted == [below, *new_offsets(group, unique_topic, {0: 3, 1: 0})]
    assert committed(bootstrap, group, unique_topic, 2) == [3, 0]

    moment = datetime.fromtimestamp((base + 5000) / 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    at_time = reset(bootstrap, group, "--topic", f"{unique_topic}:0", "--to-datetime", moment, "--execute")
    assert at_time == new_offsets(group, unique_topic, {0: 5})
    by_duration = reset(
        bootstrap, group, "--topic", f"{unique_topic}:0", "--by-duration", "PT1H", "--dry-run"
    )
    assert by_duration == new_offsets(group, unique_topic, {0: 8})

    clamped = reset(bootstrap, group, "--all-topics", "--to-offset", "7", "--execute")
    notice = (
        f"New offset (7) is higher than latest offset for topic partition {unique_topic}-1. "
        "Value will be set to 4"
    )
    assert clamped == [notice, *new_offsets(group, unique_topic, {0: 7, 1: 4})]
    assert committed(bootstrap, group, unique_topic, 2) == [7, 4]

    current = reset(bootstrap, group, "--topic", unique_topic, "--to-current", "--dry-run")
    assert current == new_offsets(group, unique_topic, {0: 7, 1: 4})
    latest = reset(bootstrap, group, "--topic", unique_topic, "--to-latest", "--execute")
    assert latest == new_offsets(group, unique_topic, {0: 10, 1: 4})
    assert committed(bootstrap, group, unique_topic, 2) == [10, 4]


def test_reset_over_many_partitions_reports_progress(tool_broker, unique_topic: str, group: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 250)
    done = run_odradek("consumer-groups", "--bootstrap-server", tool_broker.bootstrap, "--reset-offsets",
                       "--group", group, "--topic", unique_topic, "--to-earliest", "--execute")  # fmt: skip
    assert done.returncode == 0, exit_report(done)
    *_, last = done.stderr.splitlines()
    prefix = f"odradek consumer-groups: group '{group}': new offsets for 250/250 partitions ("
    assert last.startswith(prefix) and last.endswith(" partitions/s)")
    assert len(done.stdout.splitlines()) == 3 + 250  # a blank line, the header, the rows, a blank line
    assert committed(tool_broker.bootstrap, group, unique_topic, 250) == [0] * 250


def test_delete_offsets(tool_broker, unique_topic: str, group: str) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    commit(bootstrap, group, unique_topic, {0: 0, 1: 0})
    out = groups(bootstrap, "--delete-offsets", "--group", group, "--topic", f"{unique_topic}:1")
    widths = (30, 15, 15)
    assert out.split("\n") == [
        f"Request succeed for deleting offsets with topic {unique_topic} group {group}",
        "",
        row("TOPIC", "PARTITION", "STATUS", widths=widths),
        row(unique_topic, "1", "Successful", widths=widths),
        "",
    ]
    assert committed(bootstrap, group, unique_topic, 2) == [0, -1001]


def test_usage_errors(tool_broker) -> None:
    for args, message in [
        (["--describe"], "--group or --all-groups is required"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes should be defined"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--by-duration", "1h"], "expected an ISO 8601"),
    ]:
        done = run_odradek("consumer-groups", "--bootstrap-server", tool_broker.bootstrap, *args)
        (line,) = done.stderr.splitlines()
        assert done.returncode == 2 and line.startswith("odradek consumer-groups: ") and message in line, (
            exit_report(done)
        )


def test_a_failed_deletion_keeps_its_lines_together_on_stderr(
    tool_broker, unique_topic: str, group: str, active: Consumer
) -> None:
    idle = f"idle-{unique_topic}"
    commit(tool_broker.bootstrap, idle, unique_topic, {0: 1})
    done = run_odradek(
        "consumer-groups", "--bootstrap-server", tool_broker.bootstrap, "--delete", "--group", group,
        "--group", idle,
    )  # fmt: skip
    assert done.returncode == 1, exit_report(done)
    assert done.stderr == (
        f"\nError: Deletion of some consumer groups failed:\n"
        f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP\n"
    )
    assert done.stdout == f"\nThese consumer groups were deleted successfully: '{idle}'\n"
    assert idle not in groups(tool_broker.bootstrap, "--list").splitlines()
