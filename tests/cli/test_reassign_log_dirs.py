"""`odradek reassign-partitions` moving a replica between a broker's two log dirs (the file's
"log_dirs"), as kafka-reassign-partitions.sh does: --execute with --replica-alter-log-dirs-throttle
sets the throttle and starts the move, --verify reports it in progress while the throttle holds it
back, a resubmission with --additional raises the throttle, --verify reports it completed and clears
the throttle, --cancel moves a replica in progress back; a log_dirs list of the wrong size is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok, run_odradek
from tests.compat import helpers

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture
def two_dir_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    dirs = ",".join(str(tmp_path / d) for d in ("dir-a", "dir-b"))
    with BrokerProcess(
        tmp_path / "dir-a", overrides={"log.dirs": dirs}, output_path=tmp_path / "broker.out", broker_id=1
    ) as broker:
        yield broker


def reassign(boot: str, plan: Path, action: str, *extra: str) -> str:
    return ok(
        "reassign-partitions",
        "--bootstrap-server",
        boot,
        action,
        "--reassignment-json-file",
        str(plan),
        *extra,
    )


def write_plan(path: Path, topic: str, log_dir: str) -> Path:
    entry = {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [log_dir]}
    path.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    return path


def broker_configs(boot: str) -> str:
    return ok(
        "configs", "--bootstrap-server", boot, "--describe", "--entity-type", "brokers", "--entity-name", "1"
    )


def verify_until(boot: str, plan: Path, line: str) -> str:
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while True:
        verified = reassign(boot, plan, "--verify")
        if line in verified.splitlines() or time.monotonic() > deadline:
            return verified
        time.sleep(0.2)


def test_a_log_dir_move_through_execute_verify_and_cancel(
    two_dir_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    boot = two_dir_broker.bootstrap
    topic = unique_topic.replace("_", "-")
    dir_a, dir_b = (str((tmp_path / d).resolve()) for d in ("dir-a", "dir-b"))
    helpers.create_topic(boot, topic, config={"segment.bytes": str(256 * 1024)})
    helpers.produce(boot, topic, [b"%d:" % i + b"x" * 1000 for i in range(3000)])
    plan = tmp_path / "plan.json"
    entry = {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dir_b, dir_a]}
    plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    refused = run_odradek(
        "reassign-partitions", "--bootstrap-server", boot, "--verify", "--reassignment-json-file", str(plan)
    )
    assert (refused.returncode, refused.stderr) == (
        1,
        f"Error: Size of replicas list [1] is different from size of log dirs list [{dir_b},{dir_a}] "
        f"for partition {topic}-0\n",
    )

    plan = write_plan(plan, topic, dir_b)
    executed = reassign(boot, plan, "--execute", "--replica-alter-log-dirs-throttle", "1000").splitlines()
    assert "The replica-alter-dir throttle limit was set to 1000 B/s" in executed
    assert executed[-2:] == [
        f"Successfully started partition reassignment for {topic}-0",
        f"Successfully started log directory move for: {topic}-0-1",
    ]
    assert f"{THROTTLE}=1000" in broker_configs(boot)
    verified = reassign(boot, plan, "--verify")
    assert verified.splitlines()[:3] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of replica {topic}-0-1 is still in progress.",  # held back by the throttle
    ]
    assert "Clearing" not in verified and f"{THROTTLE}=1000" in broker_configs(boot)

    reassign(boot, plan, "--execute", "--additional", "--replica-alter-log-dirs-throttle", "1000000000")
    verified = verify_until(boot, plan, f"Reassignment of replica {topic}-0-1 completed successfully.")
    assert verified.splitlines()[2:] == [
        f"Reassignment of replica {topic}-0-1 completed successfully.",
        "Clearing broker-level throttles on broker 1",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    assert THROTTLE not in broker_configs(boot)
    assert [p.name for p in Path(dir_b).glob(f"{topic}-0*")] == [f"{topic}-0"]
    assert len(helpers.consume(boot, topic, 3000)) == 3000

    back = write_plan(tmp_path / "back.json", topic, dir_a)
    reassign(boot, back, "--execute", "--replica-alter-log-dirs-throttle", "1000")
    assert f"Reassignment of replica {topic}-0-1 is still in progress." in reassign(boot, back, "--verify")
    cancelled = reassign(boot, back, "--cancel").splitlines()
    assert cancelled == [
        "None of the specified partition reassignments are active.",
        f"Successfully started log directory move for: {topic}-0-1",
        "Clearing broker-level throttles on broker 1",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    assert reassign(boot, back, "--verify").splitlines()[2] == (
        f"Partition {topic}-0 on broker 1 is not being moved from log dir {dir_b} to {dir_a}."
    )
    assert [p.name for p in Path(dir_b).glob(f"{topic}-0*")] == [f"{topic}-0"]
    assert not list(Path(dir_a).glob(f"{topic}-0*"))
