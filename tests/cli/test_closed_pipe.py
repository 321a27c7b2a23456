"""A tool whose reader goes away (`odradek dump-log ... | head -1`) ends quietly: nothing on stderr
that blames a file or the cluster, no traceback, exit status 141 as SIGPIPE gives a Unix tool."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.tooling import ENTRY_POINT

QUIET = {"log_level": 3}
RECORDS = 5000  # their dump is far more than a pipe holds
BROKEN_PIPE = 141


@pytest.fixture
def filled_topic(tool_broker, unique_topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": tool_broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": tool_broker.bootstrap, **QUIET})
    for i in range(RECORDS):
        producer.produce(unique_topic, b"value-%d-" % i + b"x" * 100, partition=0)
    assert producer.flush(30) == 0
    return unique_topic


def first_line_then_close(*args: str) -> tuple[int, str, str]:
    """Run the tool, read one line of its stdout, close the pipe; its status, that line and its stderr."""
    assert ENTRY_POINT is not None
    with subprocess.Popen(
        [ENTRY_POINT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read()
        return process.wait(timeout=60), line, stderr


def test_dump_log_into_a_closed_pipe(tool_broker, filled_topic: str) -> None:
    log = Path(tool_broker.data_dir) / f"{filled_topic}-0" / "00000000000000000000.log"
    status, line, stderr = first_line_then_close("dump-log", "--files", str(log), "--print-data-log")
    assert (status, line, stderr) == (BROKEN_PIPE, f"Dumping {log}\n", "")


def test_console_consumer_into_a_closed_pipe(tool_broker, filled_topic: str) -> None:
    status, line, stderr = first_line_then_close(
        "console-consumer", "--bootstrap-server", tool_broker.bootstrap, "--topic", filled_topic,
        "--from-beginning", "--max-messages", str(RECORDS),
    )  # fmt: skip
    assert (status, line) == (BROKEN_PIPE, "value-0-" + "x" * 100 + "\n")
    assert stderr.startswith("Processed a total of ") and len(stderr.splitlines()) == 1, stderr
