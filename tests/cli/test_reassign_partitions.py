"""`odradek reassign-partitions` against a three-broker ZooKeeper-mode cluster, through the entry point.

A partition written with acks=all moves from brokers [1, 2] to [2, 3]: --generate, --execute and
--verify print what Kafka's tool prints, Metadata shows the new replicas and ISR, the removed
replica's log is deleted, and every record is read back from the new replicas with the removed
broker dead. Reassignments in progress are listed (by the tool and by kafka-python's admin client)
and cancelled. A low --throttle keeps a move of several MB in progress; raising it lets the move
finish, and --verify then clears the throttles. A controller killed mid-move leaves the reassignment
to the next one, which lists and finishes it; a broker that is not the controller answers
NOT_CONTROLLER. One cluster serves every test of the module.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonPartition
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from odradek.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from odradek.testing.cluster import LocalCluster, eventually
from tests.cli.tooling import ok, run_odradek
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS

MOVE_TIMEOUT_S = 60.0
RECORDS = 2000
THROTTLE = 50_000  # bytes/s
THROTTLED_BYTES = 4 * 1024 * 1024
STILL_MOVING_AFTER_S = 8.0


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    made = LocalCluster(
        tmp_path_factory.mktemp("reassign"),
        3,
        zookeeper_connect=zookeeper.connect_string,
        session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
    )
    try:
        made.start()
        made.wait_for_controller()
        yield made
    finally:
        made.close()


def tool(cluster: LocalCluster, *args: str) -> str:
    return ok("reassign-partitions", "--bootstrap-server", cluster.bootstrap, *args)


def plan(path: Path, topic: str, *moves: tuple[int, list[int]]) -> str:
    partitions = [{"topic": topic, "partition": p, "replicas": r} for p, r in moves]
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def create(cluster: LocalCluster, topic: str, assignment: str) -> None:
    ok(
        "topics",
        "--bootstrap-server",
        cluster.bootstrap,
        "--create",
        "--topic",
        topic,
        "--replica-assignment",
        assignment,
    )
    eventually(lambda: replicas_and_isr(cluster, topic, 0)[1] or None, MOVE_TIMEOUT_S, f"{topic} online")


def produce(cluster: LocalCluster, topic: str, count: int, size: int = 100) -> list[bytes]:
    values = [f"{i:08d}".encode().ljust(size, b".") for i in range(count)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _m: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures
    return values


def replicas_and_isr(cluster: LocalCluster, topic: str, partition: int) -> tuple[list[int], list[int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(partition)
    return (list(found.replicas), sorted(found.isrs)) if found is not None else ([], [])


def verified(cluster: LocalCluster, path: str) -> str | None:
    out = tool(cluster, "--verify", "--reassignment-json-file", path)
    return out if "still in progress" not in out else None


def test_a_partition_moves_to_new_brokers_and_keeps_every_record(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path
) -> None:
    topic = unique_topic.replace("_", "-")
    create(cluster, topic, "1:2,2:3")
    values = produce(cluster, topic, RECORDS)

    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = tool(
        cluster, "--generate", "--topics-to-move-json-file", str(to_move), "--broker-list", "2,3"
    ).splitlines()
    assert generated[0] == "Current partition replica assignment"
    assert json.loads(generated[1])["partitions"][0] == {
        "topic": topic,
        "partition": 0,
        "replicas": [1, 2],
        "log_dirs": ["any", "any"],
    }
    assert generated[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(generated[4])["partitions"]
    assert all(set(p["replicas"]) == {2, 3} for p in proposed)

    path = plan(tmp_path / "move.json", topic, (0, [2, 3]))
    executed = tool(cluster, "--execute", "--reassignment-json-file", path).splitlines()
    current = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}],
    }
    assert executed[:3] == [
        "Current partition replica assignment",
        "",
        json.dumps(current, separators=(",", ":")),
    ]
    assert executed[4:] == [
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignment for {topic}-0",
    ]
    done = eventually(lambda: verified(cluster, path), MOVE_TIMEOUT_S, "the move done").splitlines()
    assert done[:2] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
    ]
    assert done[2:] == [
        "",
        "Clearing broker-level throttles on brokers 1,2,3",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    assert eventually(
        lambda: replicas_and_isr(cluster, topic, 0) == ([2, 3], [2, 3]) or None, MOVE_TIMEOUT_S, "metadata"
    )
    assert replicas_and_isr(cluster, topic, 1)[0] == [2, 3]  # untouched
    eventually(
        lambda: not list(cluster.data_dir.glob(f"broker-1/**/{topic}-0")) or None, MOVE_TIMEOUT_S, "deleted"
    )

    cluster.brokers[1].kill()
    try:
        assert consume(cluster, topic, len(values)) == values
    finally:
        eventually(lambda: 1 not in cluster.live_broker_ids() or None, MOVE_TIMEOUT_S, "broker 1 gone")
        cluster.brokers[1].restart()
        cluster.wait_for_controller(MOVE_TIMEOUT_S)


def consume(cluster: LocalCluster, topic: str, count: int) -> list[bytes]:
    alive = ",".join(cluster.brokers[b].bootstrap for b in (2, 3))
    consumer = Consumer(
        {"bootstrap.servers": alive, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[bytes] = []
    deadline = time.monotonic() + MOVE_TIMEOUT_S
    try:
        while len(read) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    return read


def test_a_throttled_move_is_listed_and_completes_once_the_throttle_is_raised(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path
) -> None:
    topic = unique_topic.replace("_", "-")
    create(cluster, topic, "1:2")
    produce(cluster, topic, THROTTLED_BYTES // 10_000, size=10_000)
    path = plan(tmp_path / "move.json", topic, (0, [2, 3]))
    started = time.monotonic()
    executed = tool(
        cluster, "--execute", "--reassignment-json-file", path, "--throttle", str(THROTTLE)
    ).splitlines()
    assert executed[-3:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
        "throttle is removed.",
        f"The inter-broker throttle limit was set to {THROTTLE} B/s",
        f"Successfully started partition reassignment for {topic}-0",
    ]
    listed = tool(cluster, "--list").splitlines()
    assert listed == [
        "Current partition reassignments:",
        f"{topic}-0: replicas: 2,3,1. adding: 3. removing: 1.",
    ]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        ongoing = admin.list_partition_reassignments()
    finally:
        admin.close()
    assert ongoing[KafkaPythonPartition(topic, 0)] == {
        "replicas": [2, 3, 1],
        "adding_replicas": [3],
        "removing_replicas": [1],
    }
    time.sleep(max(0.0, STILL_MOVING_AFTER_S - (time.monotonic() - started)))
    verifying = run_odradek(
        "reassign-partitions",
        "--bootstrap-server",
        cluster.bootstrap,
        "--verify",
        "--reassignment-json-file",
        path,
    )
    assert f"Reassignment of partition {topic}-0 is still in progress." in verifying.stdout
    progress = re.fullmatch(
        r"Progress: 0 of 1 partition reassignments complete; "
        r"replicas being added hold (\d+) of (\d+) bytes \((\d+)%\)\n",
        verifying.stderr,
    )
    assert progress is not None, verifying.stderr
    copied, total, share = map(int, progress.groups())
    assert 0 < copied < total and total >= THROTTLED_BYTES and share == 100 * copied // total

    raised = tool(
        cluster, "--execute", "--additional", "--reassignment-json-file", path, "--throttle", "100000000"
    )
    assert "The inter-broker throttle limit was set to 100000000 B/s" in raised
    eventually(lambda: verified(cluster, path), MOVE_TIMEOUT_S, "the move done")
    print(
        f"throttled move of {THROTTLED_BYTES} bytes: in progress for {time.monotonic() - started:.1f}s in all"
    )
    assert replicas_and_isr(cluster, topic, 0) == ([2, 3], [2, 3])
    described = ok(
        "configs",
        "--bootstrap-server",
        cluster.bootstrap,
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
        "--describe",
    )
    assert "throttled.rate" not in described
    assert tool(cluster, "--list") == "No partition reassignments found.\n"


def start_slow_move(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path, target: list[int]
) -> tuple[str, str]:
    """A topic on brokers 1 and 2 with 6 MB in partition 0, moving to `target` at 10 kB/s: still
    in progress for minutes. Returns the topic and the reassignment file."""
    topic = unique_topic.replace("_", "-")
    create(cluster, topic, "1:2")
    produce(cluster, topic, 600, size=10_000)  # several windows of the throttle
    path = plan(tmp_path / "move.json", topic, (0, target))
    tool(cluster, "--execute", "--reassignment-json-file", path, "--throttle", "10000")
    return topic, path


def test_a_reassignment_in_progress_is_cancelled(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path
) -> None:
    topic, path = start_slow_move(cluster, unique_topic, tmp_path, [3, 1])
    refused = run_odradek(
        "reassign-partitions",
        "--bootstrap-server",
        cluster.bootstrap,
        "--execute",
        "--reassignment-json-file",
        path,
    )
    assert refused.returncode == 1 and refused.stderr.startswith(
        "Cannot execute because there is an existing partition assignment."
    )
    cancelled = tool(cluster, "--cancel", "--reassignment-json-file", path).splitlines()
    assert cancelled[0] == f"Successfully cancelled partition reassignment for: {topic}-0"
    assert tool(cluster, "--list") == "No partition reassignments found.\n"
    assert eventually(
        lambda: replicas_and_isr(cluster, topic, 0) == ([1, 2], [1, 2]) or None, MOVE_TIMEOUT_S, "reverted"
    )
    again = tool(cluster, "--cancel", "--reassignment-json-file", path).splitlines()
    assert again[0] == "None of the specified partition reassignments are active."


def test_bad_reassignments_are_one_line_errors(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path
) -> None:
    topic = unique_topic.replace("_", "-")
    create(cluster, topic, "1:2")
    cases = {
        "unknown broker": (plan(tmp_path / "a.json", topic, (0, [1, 7])), "Error: Unknown broker id 7"),
        "unknown partition": (
            plan(tmp_path / "b.json", topic, (5, [1, 2])),
            f"Error: Unable to find partition: {topic}-5",
        ),
        "duplicates": (
            plan(tmp_path / "c.json", topic, (0, [1, 1])),
            "Error: Partition replica lists may not contain duplicate entries",
        ),
    }
    for what, (path, message) in cases.items():
        done = run_odradek(
            "reassign-partitions",
            "--bootstrap-server",
            cluster.bootstrap,
            "--execute",
            "--reassignment-json-file",
            path,
        )
        assert done.returncode == 1 and done.stderr.startswith(message), (what, done.stderr)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)  # a second client, to the controller
    try:
        answered = admin.alter_partition_reassignments({KafkaPythonPartition(topic, 0): [1, 9]})
        cancelled = admin.alter_partition_reassignments({KafkaPythonPartition(topic, 0): None})
    finally:
        admin.close()
    assert answered[KafkaPythonPartition(topic, 0)] is InvalidReplicationAssignmentError
    assert cancelled[KafkaPythonPartition(topic, 0)] is NoReassignmentInProgressError
    (tmp_path / "bad.json").write_text("{not json")
    done = run_odradek(
        "reassign-partitions",
        "--bootstrap-server",
        cluster.bootstrap,
        "--verify",
        "--reassignment-json-file",
        str(tmp_path / "bad.json"),
    )
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1


def test_a_new_controller_resumes_a_reassignment_in_progress(
    cluster: LocalCluster, unique_topic: str, tmp_path: Path
) -> None:
    topic, path = start_slow_move(cluster, unique_topic, tmp_path, [2, 3])
    old = cluster.controller()
    assert old is not None
    cluster.brokers[old].kill()
    eventually(lambda: old not in cluster.live_broker_ids() or None, MOVE_TIMEOUT_S, f"broker {old} gone")
    eventually(lambda: cluster.controller() not in (None, old) or None, MOVE_TIMEOUT_S, "a new controller")
    alive = ",".join(p.bootstrap for b, p in cluster.brokers.items() if b != old)
    listed = ok("reassign-partitions", "--bootstrap-server", alive, "--list").splitlines()
    assert listed == [
        "Current partition reassignments:",
        f"{topic}-0: replicas: 2,3,1. adding: 3. removing: 1.",
    ]
    cluster.brokers[old].restart()
    cluster.wait_for_controller(MOVE_TIMEOUT_S)
    tool(cluster, "--execute", "--additional", "--reassignment-json-file", path, "--throttle", "100000000")
    eventually(lambda: verified(cluster, path), MOVE_TIMEOUT_S, "the move done")
    assert eventually(
        lambda: replicas_and_isr(cluster, topic, 0) == ([2, 3], [2, 3]) or None, MOVE_TIMEOUT_S, "moved"
    )


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster: LocalCluster) -> None:
    controller = cluster.wait_for_controller(MOVE_TIMEOUT_S)
    other = next(process for broker_id, process in cluster.brokers.items() if broker_id != controller)
    with KafkaClient(other.bootstrap) as client:
        connection = client.connect_to(other.host, other.port)
        listed = connection.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest())
        altered = connection.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, AlterPartitionReassignmentsRequest()
        )
    assert listed.error_code == altered.error_code == ErrorCode.NOT_CONTROLLER
