"""`python -m odradek.pipeline` facing a bootstrap it cannot use: one line, an exit status, bounded time.

No broker and no Spark: an unreachable broker is a closed port on 127.0.0.1, an unknown host a name
under the reserved `.invalid` TLD. What the pipeline does with a broker: tests/spark/test_pipeline.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from odradek.testing.broker import free_port
from tests.exit_report import exit_report

PROG = "python -m odradek.pipeline"
PROBES = 3


def pipeline(
    *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float, list[str]]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "odradek.pipeline", *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert "Traceback" not in done.stderr
    return done, time.monotonic() - started, done.stderr.splitlines()


def test_unreachable_broker_is_retried_then_reported_in_one_line() -> None:
    worst = 0.0
    for _ in range(PROBES):
        port = free_port()
        done, elapsed, lines = pipeline("--bootstrap-server", f"127.0.0.1:{port}", "--connect-timeout", "1")
        worst = max(worst, elapsed)
        *retries, last = lines
        refused = f"{PROG}: cannot reach 127.0.0.1:{port} (connection refused)"
        assert done.returncode == 1 and done.stdout == "", exit_report(done)
        assert retries and retries[0] == f"{refused}, retrying for 1 s"
        assert all(line.startswith(f"{refused}, retrying for ") for line in retries)
        assert last.startswith(f"{refused}; gave up after")
    assert worst < 1 + 4, f"worst of {PROBES} probes: {worst:.2f} s (a 1 s window plus interpreter start)"


def test_unknown_host_is_reported_at_once() -> None:
    done, elapsed, lines = pipeline("--bootstrap-server", "no-such-broker.invalid:9092")
    assert lines == [
        f"{PROG}: unknown host no-such-broker.invalid (no address for no-such-broker.invalid:9092)"
    ]
    assert done.returncode == 1 and elapsed < 30, exit_report(done)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--bootstrap-server", "127.0.0.1"],
            "argument --bootstrap-server/--bootstrap: bad bootstrap server '127.0.0.1': expected",
        ),
        (
            ["--bootstrap", "h:99999"],  # the older alias
            "argument --bootstrap-server/--bootstrap: bad bootstrap server 'h:99999': the port",
        ),
        ([], "the following arguments are required: --bootstrap-server/--bootstrap"),
        (
            ["--bootstrap-server", "h:1", "--connect-timeout", "-1"],
            "argument --connect-timeout: expected",
        ),
    ],
)
def test_usage_errors_name_the_option_and_exit_2(argv: list[str], expected: str) -> None:
    done, _, lines = pipeline(*argv)
    (line,) = lines
    assert done.returncode == 2 and line.startswith(f"{PROG}: {expected}"), exit_report(done)


def test_missing_java_is_said_before_connecting() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(sys.executable)  # the interpreter's directory holds no java
    done, _, lines = pipeline("--bootstrap-server", f"127.0.0.1:{free_port()}", env=env)
    (line,) = lines
    assert line.startswith(f"{PROG}: Spark needs Java 17: no java on PATH and no JAVA_HOME")
    assert done.returncode == 1, exit_report(done)
