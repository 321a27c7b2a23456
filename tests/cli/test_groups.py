"""`odradek groups` and the command line's usage errors, without a broker.

The options go before or after the action; a malformed bootstrap is a usage error (exit 2, one line
naming the option); an unreachable broker (a closed port on 127.0.0.1) is retried for --connect-timeout
with one line per retry, then reported in one line with exit 1; an unknown host (the reserved `.invalid`
TLD) is reported at once. Never a traceback. Against a real broker: tests/compat/test_groups_cli.py.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from odradek.cli.main import build_parser
from odradek.testing.broker import free_port
from tests.exit_report import exit_report

UNKNOWN_HOST = "no-such-broker.invalid"
PROBES = 3
ACTIONS = {
    "list": ["list", "--state"],
    "describe": ["describe", "g1"],
    "delete": ["delete", "g1"],
    "reset-offsets": ["reset-offsets", "--group", "g1", "--topic", "t:0,1", "--to-latest", "--execute"],
}
OPTIONS = ["--bootstrap-server", "h1:9092,h2:9093", "--timeout", "7", "--connect-timeout", "2"]


def odradek(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=60
    )
    return done, time.monotonic() - started


def stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stderr
    return done.stderr.splitlines()


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("where", ["before", "after", "split"])
def test_connection_options_go_before_or_after_the_action(action: str, where: str) -> None:
    argv = {
        "before": ["groups", *OPTIONS, *ACTIONS[action]],
        "after": ["groups", *ACTIONS[action], *OPTIONS],
        "split": ["groups", *OPTIONS[:2], *ACTIONS[action], *OPTIONS[2:]],
    }[where]
    args = build_parser().parse_args(argv)
    assert (args.action, args.bootstrap_server, args.timeout, args.connect_timeout) == (
        action,
        "h1:9092,h2:9093",
        7.0,
        2.0,
    )


def test_an_option_after_the_action_wins_over_the_same_option_before_it() -> None:
    argv = ["groups", "--bootstrap-server", "a:1", "list", "--bootstrap-server", "b:2"]
    assert build_parser().parse_args(argv).bootstrap_server == "b:2"


def test_options_default_when_given_nowhere() -> None:
    args = build_parser().parse_args(["groups", "list", "--bootstrap-server", "a:1"])
    assert (args.timeout, args.connect_timeout) == (30.0, 5.0)


@pytest.mark.parametrize("where", ["before", "after"])
def test_malformed_bootstrap_is_a_usage_error_naming_the_option(where: str) -> None:
    option = ["--bootstrap-server", "127.0.0.1"]
    argv = ["groups", *option, "list"] if where == "before" else ["groups", "list", *option]
    done, _ = odradek(*argv)
    (line,) = stderr_lines(done)
    assert done.returncode == 2, exit_report(done)
    assert "argument --bootstrap-server: bad bootstrap server '127.0.0.1': expected HOST:PORT" in line


def test_missing_bootstrap_is_a_usage_error() -> None:
    done, _ = odradek("groups", "describe", "g1")
    (line,) = stderr_lines(done)
    assert done.returncode == 2, exit_report(done)
    assert line.startswith("odradek groups: the following arguments are required: --bootstrap-server")


def test_bad_topic_spec_is_a_usage_error_before_any_connection() -> None:
    port = free_port()
    done, _ = odradek(
        "groups", "reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest",
        "--bootstrap-server", f"127.0.0.1:{port}",
    )  # fmt: skip
    (line,) = stderr_lines(done)
    assert done.returncode == 2 and "argument --topic: bad partition list in 't:x'" in line, exit_report(done)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_unreachable_broker_is_retried_then_reported_in_one_line(action: str) -> None:
    _, start_up = odradek("groups", "--help")  # interpreter start and imports, on this machine now
    worst = 0.0
    for _ in range(PROBES if action == "list" else 1):
        port = free_port()
        done, elapsed = odradek("groups", *ACTIONS[action], "--bootstrap-server", f"127.0.0.1:{port}",
                                "--connect-timeout", "1")  # fmt: skip
        worst = max(worst, elapsed)
        *retries, last = stderr_lines(done)
        refused = f"odradek groups: cannot reach 127.0.0.1:{port} (connection refused)"
        assert done.returncode == 1 and done.stdout == "", exit_report(done)
        assert retries and retries[0] == f"{refused}, retrying for 1 s"
        assert all(line.startswith(f"{refused}, retrying for ") for line in retries)
        assert last.startswith(f"{refused}; gave up after")
    # the 1 s window, not the default 5 s, plus the start measured above and a margin for a busy machine
    assert worst < start_up + 1 + 3, f"worst of the probes: {worst:.2f} s; start-up alone {start_up:.2f} s"


def test_unknown_host_is_reported_at_once() -> None:
    done, elapsed = odradek("groups", "list", "--bootstrap-server", f"{UNKNOWN_HOST}:9092")
    assert stderr_lines(done) == [
        f"odradek groups: unknown host {UNKNOWN_HOST} (no address for {UNKNOWN_HOST}:9092)"
    ]
    assert done.returncode == 1, exit_report(done)
    assert elapsed < 30


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--bogus"], "odradek serve: unrecognized arguments: --bogus (see 'odradek serve --help')"),
        (["serve", "--log-level", "LOUD"], "odradek serve: argument --log-level: invalid choice: 'LOUD'"),
        (["serve", "--config"], "odradek serve: argument --config: expected one argument"),
        (["nonsense"], "odradek: argument COMMAND: invalid choice: 'nonsense'"),
    ],
)
def test_argument_errors_are_one_line_with_exit_2(argv: list[str], expected: str) -> None:
    done, _ = odradek(*argv)
    (line,) = stderr_lines(done)
    assert done.returncode == 2 and line.startswith(expected), exit_report(done)
