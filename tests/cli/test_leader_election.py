"""`odradek leader-election` through the entry point against a single broker, whose one replica per
partition already leads: Kafka's "Valid replica already elected" line, the error line and exit
status of an unknown partition, --all-topic-partitions (nothing needed an election), the JSON
file, and the option checks (Kafka's messages, usage errors). Elections that move leaders run
against a cluster in test_tools_on_a_cluster.py."""

from __future__ import annotations

import json

from tests.cli.test_delete_records_and_log_dirs import create_topic
from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report


def elect(bootstrap: str, *args: str):
    return run_odradek("leader-election", "--bootstrap-server", bootstrap, *args)


def test_a_single_nodes_leaders_are_already_elected(tool_broker, unique_topic, tmp_path) -> None:
    bootstrap = tool_broker.bootstrap
    create_topic(bootstrap, unique_topic, 2)
    done = ok("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
              "--topic", unique_topic, "--partition", "1")  # fmt: skip
    assert done == f"Valid replica already elected for partitions {unique_topic}-1\n"

    plan = tmp_path / "partitions.json"
    plan.write_text(json.dumps({"partitions": [{"topic": unique_topic, "partition": p} for p in (0, 1, 5)]}))
    failed = elect(bootstrap, "--election-type", "UNCLEAN", "--path-to-json-file", str(plan))
    assert failed.returncode == 1, exit_report(failed)
    assert failed.stdout.splitlines() == [
        f"Valid replica already elected for partitions {unique_topic}-0, {unique_topic}-1",
        f"Error completing leader election (UNCLEAN) for partition: {unique_topic}-5: "
        "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.",
    ]
    assert failed.stderr == "1 replica(s) could not be elected\n"

    everything = elect(bootstrap, "--election-type", "Preferred", "--all-topic-partitions")
    assert (everything.returncode, everything.stdout, everything.stderr) == (0, "", "")


def test_option_and_file_errors_are_one_line(tool_broker, tmp_path) -> None:
    bootstrap = tool_broker.bootstrap
    usage = {
        ("--election-type", "preferred"): "One and only one of the following options is required",
        ("--election-type", "preferred", "--topic", "t"): "Missing required option(s): partition",
        ("--election-type", "preferred", "--all-topic-partitions", "--partition", "0"): (
            "Option partition is only allowed if topic is used"
        ),
        ("--election-type", "sideways", "--all-topic-partitions"): "expected PREFERRED or UNCLEAN",
        ("--all-topic-partitions",): "--election-type",
    }
    for args, message in usage.items():
        done = elect(bootstrap, *args)
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1, args

    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0}] * 2}))
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"version": 1}))
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_SSL\n")
    failures = {
        (
            "--path-to-json-file",
            str(twice),
        ): "Error: Replica election data contains duplicate partitions: t-0",
        ("--path-to-json-file", str(missing)): 'Error: Replica election data is missing "partitions" field',
        ("--path-to-json-file", str(tmp_path / "none.json")): "Error: cannot read",
        (
            "--all-topic-partitions",
            "--admin.config",
            str(config),
        ): f"Error: --admin.config {config}: Invalid value 'GSSAPI' for configuration sasl.mechanism",
    }
    for args, message in failures.items():
        done = elect(bootstrap, "--election-type", "preferred", *args)
        assert done.returncode == 1 and done.stderr.startswith(message), (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1
