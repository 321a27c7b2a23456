"""`odradek reassign-partitions` against a single node (its own controller): a plan that keeps the
partition on the node starts and completes at once, one naming another broker is refused as Kafka's
tool refuses an unknown broker, and --generate over the one broker proposes it."""

from __future__ import annotations

import json
from pathlib import Path

from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok, run_odradek


def test_a_single_node_keeps_its_partitions(
    tool_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    boot = tool_broker.bootstrap
    topic = unique_topic.replace("_", "-")
    ok("topics", "--bootstrap-server", boot, "--create", "--topic", topic, "--partitions", "2")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]})
    )
    executed = ok(
        "reassign-partitions", "--bootstrap-server", boot, "--execute", "--reassignment-json-file", str(plan)
    )
    assert executed.splitlines()[-1] == f"Successfully started partition reassignment for {topic}-0"
    verified = ok(
        "reassign-partitions", "--bootstrap-server", boot, "--verify", "--reassignment-json-file", str(plan)
    )
    assert verified.splitlines()[:2] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
    ]
    assert (
        ok("reassign-partitions", "--bootstrap-server", boot, "--list")
        == "No partition reassignments found.\n"
    )

    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]})
    )
    refused = run_odradek(
        "reassign-partitions", "--bootstrap-server", boot, "--execute", "--reassignment-json-file", str(plan)
    )
    assert (refused.returncode, refused.stderr) == (1, "Error: Unknown broker id 2\n")

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = ok(
        "reassign-partitions",
        "--bootstrap-server",
        boot,
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "1",
    ).splitlines()
    assert json.loads(generated[4])["partitions"] == [
        {"topic": topic, "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in (0, 1)
    ]


def test_generate_names_a_broker_that_is_not_in_the_cluster(
    tool_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    topic = unique_topic.replace("_", "-")
    ok("topics", "--bootstrap-server", tool_broker.bootstrap, "--create", "--topic", topic)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    refused = run_odradek("reassign-partitions", "--bootstrap-server", tool_broker.bootstrap, "--generate",
                          "--topics-to-move-json-file", str(topics), "--broker-list", "1,9")  # fmt: skip
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", "Error: Unknown broker id 9\n")
