"""`odradek groups` (the kafka-consumer-groups.sh of odradek) against a real broker process.

Kafka's tool is the oracle for what is shown: per partition the committed offset, the log end offset
and the lag, with the owning member; a reset moves committed offsets only with --execute and only
while the group has no active members; a --to-offset outside the log is clamped to it.
"""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from tests.compat import helpers


def groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "groups",
            "--bootstrap-server",
            bootstrap,
            "--timeout",
            "20",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(bootstrap: str, *args: str) -> str:
    result = groups(bootstrap, *args)
    assert result.returncode == 0, f"odradek groups {args} exited {result.returncode}: {result.stderr}"
    return result.stdout


def table(output: str, first_column: str) -> list[list[str]]:
    lines = [line.split() for line in output.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[0] == first_column)
    return lines[start + 1 :]


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: list[int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **helpers.QUIET})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)], asynchronous=False
        )
    finally:
        consumer.close()


def test_list_describe_reset_delete(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 2)
    helpers.produce(broker.bootstrap, unique_topic, [b"a%d" % i for i in range(10)], partition=0)
    helpers.produce(broker.bootstrap, unique_topic, [b"b%d" % i for i in range(4)], partition=1)
    group = f"group-{unique_topic}"
    commit_offsets(broker.bootstrap, group, unique_topic, [6, 4])

    assert group in ok(broker.bootstrap, "list").split()
    assert [group, "Empty"] in table(ok(broker.bootstrap, "list", "--state"), "GROUP")

    described = groups(broker.bootstrap, "describe", group)
    assert described.stderr == f"\nConsumer group '{group}' has no active members.\n"  # Kafka's, on stderr
    described = described.stdout
    assert table(described, "GROUP") == [
        [group, unique_topic, "0", "6", "10", "4", "-", "-", "-"],
        [group, unique_topic, "1", "4", "4", "0", "-", "-", "-"],
    ]

    dry = ok(broker.bootstrap, "reset-offsets", "--group", group, "--topic", unique_topic, "--to-earliest")
    assert table(dry, "GROUP") == [[group, unique_topic, "0", "0"], [group, unique_topic, "1", "0"]]
    assert table(ok(broker.bootstrap, "describe", group), "GROUP")[0][3] == "6"  # nothing committed

    args = ["reset-offsets", "--group", group, "--topic", unique_topic, "--to-offset", "7", "--execute"]
    assert table(ok(broker.bootstrap, *args), "GROUP") == [
        [group, unique_topic, "0", "7"],
        [group, unique_topic, "1", "4"],
    ]
    rows = table(ok(broker.bootstrap, "describe", group), "GROUP")
    assert [row[3:6] for row in rows] == [["7", "10", "3"], ["4", "4", "0"]]

    args = ["reset-offsets", "--group", group, "--topic", f"{unique_topic}:1", "--to-earliest", "--execute"]
    assert table(ok(broker.bootstrap, *args), "GROUP") == [[group, unique_topic, "1", "0"]]
    assert [row[3] for row in table(ok(broker.bootstrap, "describe", group), "GROUP")] == ["7", "0"]

    assert "was successful" in ok(broker.bootstrap, "delete", group)
    assert group not in ok(broker.bootstrap, "list").split()
    missing = groups(broker.bootstrap, "describe", group)
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_active_group_shows_owners_and_refuses_reset(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"v%d" % i for i in range(5)])
    group = f"group-{unique_topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "cli-watched",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **helpers.QUIET,
        }
    )
    try:
        consumer.subscribe([unique_topic])
        read = 0
        deadline = time.monotonic() + helpers.TIMEOUT_S
        while read < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read += 1
                consumer.commit(message=message, asynchronous=False)
        ((_, topic, partition, current, end, lag, consumer_id, host, client_id),) = table(
            ok(broker.bootstrap, "describe", group), "GROUP"
        )
        assert (topic, partition, current, end, lag) == (unique_topic, "0", "2", "5", "3")
        assert consumer_id.startswith("cli-watched-") and host == "/127.0.0.1" and client_id == "cli-watched"

        refused = groups(
            broker.bootstrap,
            "reset-offsets",
            "--group",
            group,
            "--topic",
            unique_topic,
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1 and "inactive" in refused.stderr
        assert table(ok(broker.bootstrap, "describe", group), "GROUP")[0][3] == "2"
    finally:
        consumer.close()


def test_connection_options_before_or_after_the_action(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    group = f"group-{unique_topic}"
    commit_offsets(broker.bootstrap, group, unique_topic, [0])
    options = ["--bootstrap-server", broker.bootstrap, "--timeout", "20"]
    outputs = []
    for argv in (["groups", *options, "describe", group], ["groups", "describe", group, *options]):
        done = subprocess.run(
            [sys.executable, "-m", "odradek", *argv], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        outputs.append(table(done.stdout, "GROUP"))
    assert outputs[0] == outputs[1] == [[group, unique_topic, "0", "0", "0", "0", "-", "-", "-"]]
