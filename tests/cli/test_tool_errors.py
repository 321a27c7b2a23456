"""Every Kafka-style tool facing a cluster nobody can reach (a closed port on 127.0.0.1): one stderr line
per connection retry and a last one saying it gave up, exit status 1, never a traceback."""

from __future__ import annotations

import pytest

from odradek.testing.broker import free_port
from tests.cli.tooling import run_odradek
from tests.exit_report import exit_report

TOOLS = {
    "topics": ["--list", "--connect-timeout", "1"],
    "configs": ["--topic", "t", "--describe", "--connect-timeout", "1"],
    "consumer-groups": ["--list", "--connect-timeout", "1"],
    "log-dirs": ["--describe", "--connect-timeout", "1"],
    "leader-election": ["--election-type", "preferred", "--all-topic-partitions", "--connect-timeout", "1"],
    "reassign-partitions": ["--list", "--connect-timeout", "1"],
    "console-consumer": ["--topic", "t", "--max-messages", "1"],
    "producer-perf-test": ["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"],
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_an_unreachable_cluster_is_reported_in_one_line(tool: str) -> None:
    address = f"127.0.0.1:{free_port()}"
    option = ["--producer-props", f"bootstrap.servers={address}"] if tool == "producer-perf-test" else [
        "--bootstrap-server", address]  # fmt: skip
    done = run_odradek(tool, *TOOLS[tool], *option)
    *retries, last = done.stderr.splitlines()
    refused = f"odradek {tool}: cannot reach {address} (connection refused)"
    assert done.returncode == 1, exit_report(done)
    assert retries and all(line.startswith(f"{refused}, retrying for ") for line in retries)
    assert last.startswith(f"{refused}; gave up after")
    assert "Processed a total" not in done.stderr and "records sent" not in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--execute"],  # no --reassignment-json-file
        ["--generate", "--broker-list", "1,2"],  # no --topics-to-move-json-file
        ["--list", "--throttle", "100"],
        ["--list", "--verify"],
    ],
)
def test_reassign_partitions_usage_errors_exit_2_in_one_line(args: list[str]) -> None:
    done = run_odradek("reassign-partitions", "--bootstrap-server", "127.0.0.1:1", *args)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("odradek reassign-partitions: ")
