"""`odradek console-producer` and `console-consumer` through the entry point against a broker process.

What the producer wrote is read back with confluent-kafka's own consumer; what the consumer prints is
compared byte for byte with Kafka's DefaultMessageFormatter layout of those records.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.producer import partition_for_key
from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

QUIET = {"log_level": 3}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)


def read_all(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", **QUIET})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        messages = consumer.consume(count, timeout=30)
        assert all(m.error() is None for m in messages)
        return messages
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        return consumer.committed([TopicPartition(topic, partition)], timeout=30)[0].offset
    finally:
        consumer.close()


def console_producer(bootstrap: str, topic: str, stdin: str, *args: str):
    return run_odradek(
        "console-producer", "--bootstrap-server", bootstrap, "--topic", topic, *args, stdin=stdin
    )


def test_lines_become_records_with_keys_and_headers(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 1)
    lines = "h1:x,h2:y|k1:v1\n|k2:v:2\nh3|null:v3\n"
    props = [
        "parse.headers=true",
        "headers.delimiter=|",
        "parse.key=true",
        "key.separator=:",
        "null.marker=null",
    ]
    done = console_producer(
        tool_broker.bootstrap, unique_topic, lines, *(a for p in props for a in ("--property", p))
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    got = read_all(tool_broker.bootstrap, unique_topic, 0, 3)
    assert [(m.headers(), m.key(), m.value()) for m in got] == [
        ([("h1", b"x"), ("h2", b"y")], b"k1", b"v1"),
        (None, b"k2", b"v:2"),
        ([("h3", None)], None, b"v3"),
    ]


def test_keys_go_to_the_java_partition(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 5)
    keys = [f"key-{i}" for i in range(20)]
    stdin = "".join(f"{k}\tvalue\n" for k in keys)
    done = console_producer(tool_broker.bootstrap, unique_topic, stdin, "--property", "parse.key=true")
    assert done.returncode == 0, exit_report(done)
    for partition in range(5):
        expected = [k for k in keys if partition_for_key(k.encode(), 5) == partition]
        got = read_all(tool_broker.bootstrap, unique_topic, partition, len(expected)) if expected else []
        assert [m.key().decode() for m in got] == expected


def test_a_line_without_the_separator_stops_the_producer(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 1)
    done = console_producer(
        tool_broker.bootstrap, unique_topic, "a\t1\nbroken\nc\t3\n", "--property", "parse.key=true"
    )
    assert (done.returncode, done.stderr) == (1, "Error: No key separator found on line number 2: 'broken'\n")
    assert [m.value() for m in read_all(tool_broker.bootstrap, unique_topic, 0, 1)] == [b"1"]


@pytest.fixture
def filled(tool_broker, unique_topic: str) -> list:
    """Four records in partition 0 of a two-partition topic (one with headers, one with a null key)."""
    create_topic(tool_broker.bootstrap, unique_topic, 2)
    producer = Producer({"bootstrap.servers": tool_broker.bootstrap, **QUIET})
    for i in range(4):
        headers = [("a", b"1"), ("b", None)] if i == 1 else None
        producer.produce(unique_topic, b"value-%d" % i, None if i == 2 else b"key-%d" % i, 0, headers=headers)
    assert producer.flush(30) == 0
    return read_all(tool_broker.bootstrap, unique_topic, 0, 4)


def consumer_args(bootstrap: str, topic: str, *args: str) -> list[str]:
    return ["console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, *args]


def test_consumer_prints_as_the_default_formatter(tool_broker, unique_topic: str, filled: list) -> None:
    props = ["print.timestamp", "print.partition", "print.offset", "print.headers", "print.key"]
    args = [a for p in props for a in ("--property", f"{p}=true")]
    args += ["--from-beginning", "--max-messages", "4", "--property", "key.separator=|"]
    done = run_odradek(*consumer_args(tool_broker.bootstrap, unique_topic, *args))
    assert done.returncode == 0 and done.stderr == "Processed a total of 4 messages\n"
    headers = {1: "a:1,b:null"}
    expected = [
        f"CreateTime:{m.timestamp()[1]}|Partition:0|Offset:{i}|{headers.get(i, 'NO_HEADERS')}|"
        f"{'null' if i == 2 else f'key-{i}'}|value-{i}"
        for i, m in enumerate(filled)
    ]
    assert done.stdout.splitlines() == expected


def test_consumer_partition_offset_and_timeout(tool_broker, unique_topic: str, filled: list) -> None:
    out = ok(*consumer_args(tool_broker.bootstrap, unique_topic, "--partition", "0", "--offset", "2",
                            "--timeout-ms", "3000", "--property", "print.value=false", "--property",
                            "print.offset=true"))  # fmt: skip
    assert out == "Offset:2\nOffset:3\n"
    empty = run_odradek(*consumer_args(tool_broker.bootstrap, unique_topic, "--partition", "1", "--offset",
                                       "earliest", "--timeout-ms", "1000"))  # fmt: skip
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "Processed a total of 0 messages\n")


def test_consumer_group_commits_what_it_read(tool_broker, unique_topic: str, filled: list) -> None:
    group = f"group-{unique_topic}"
    out = ok(*consumer_args(tool_broker.bootstrap, unique_topic, "--group", group, "--from-beginning",
                            "--max-messages", "3"))  # fmt: skip
    assert out == "value-0\nvalue-1\nvalue-2\n"
    assert committed(tool_broker.bootstrap, group, unique_topic, 0) == 3
    rest = ok(*consumer_args(tool_broker.bootstrap, unique_topic, "--group", group, "--timeout-ms", "4000"))
    assert rest == "value-3\n"


def test_consumer_usage_errors(tool_broker, unique_topic: str) -> None:
    for args, message in [
        (["--offset", "3"], "The partition is required when offset is specified."),
        (["--partition", "0", "--offset", "3", "--from-beginning"], "cannot be specified together"),
    ]:
        done = run_odradek(*consumer_args(tool_broker.bootstrap, unique_topic, *args))
        (line,) = done.stderr.splitlines()
        assert done.returncode == 2 and line.startswith("odradek console-consumer: ") and message in line, (
            exit_report(done)
        )


def test_consumer_reports_a_missing_topic_on_stderr_not_as_a_record(tool_broker, unique_topic: str) -> None:
    done = run_odradek(*consumer_args(tool_broker.bootstrap, unique_topic, "--timeout-ms", "3000"))
    *notes, last = done.stderr.splitlines()
    assert (done.returncode, done.stdout, last) == (0, "", "Processed a total of 0 messages"), exit_report(
        done
    )
    assert len(notes) == 1 and notes[0].startswith("odradek console-consumer: ") and unique_topic in notes[0]


def test_consumer_refuses_a_partition_the_topic_does_not_have(tool_broker, unique_topic: str) -> None:
    create_topic(tool_broker.bootstrap, unique_topic, 4)
    done = run_odradek(*consumer_args(tool_broker.bootstrap, unique_topic, "--partition", "9"), timeout=60)
    assert (done.returncode, done.stdout) == (1, ""), exit_report(done)
    assert done.stderr == f"Error: Topic {unique_topic} has no partition 9: its partitions are 0 to 3\n"
