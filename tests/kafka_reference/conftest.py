"""Fixtures of the side-by-side tests with Apache Kafka (issue 34): the pinned Kafka versions, skipped
in one line where Java or their jars are missing (tools/install-deps.sh fetches them; CI has both, so
there they run), and `run`, which runs one of Kafka's command-line tools by its main class."""

from __future__ import annotations

import subprocess

import pytest

from odradek.testing import kafka_reference


def require_kafka(version: str) -> None:
    """Skip the test, in one line, when Kafka `version` cannot run here."""
    reason = kafka_reference.missing(version)
    if reason is not None:
        pytest.skip(reason)


def run(main_class: str, *args: str, input: str | None = None, check: bool = True) -> str:
    """stdout of Kafka 4.x's tool `main_class` run with `args`; with `check`, a nonzero exit fails the
    test with the tool's output."""
    done = kafka_reference.run_tool(kafka_reference.KRAFT_VERSION, main_class, args, input=input)
    if check and done.returncode != 0:
        pytest.fail(
            f"{main_class.rsplit('.', 1)[-1]} {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout


def run_failing(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The tool's run, expected to fail: exit status and output for the test to assert."""
    return kafka_reference.run_tool(kafka_reference.KRAFT_VERSION, main_class, args)
