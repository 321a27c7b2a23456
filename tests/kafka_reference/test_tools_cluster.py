"""Kafka's own command-line tools (Kafka 4.x's jars) against an odradek cluster of three brokers on
ZooKeeper, and the same commands against a Kafka 4.x cluster of three nodes, asserting the same
output: topics (create with replication factor 3, describe showing leaders and ISRs on the three
brokers, alter partitions, delete), reassign-partitions (generate, execute with --throttle, the throttles
it sets, verify clearing them), leader-election (preferred, after a reassignment that put another
replica first), log-dirs across the brokers, and the tools that find a coordinator or a leader on
one of the three: consumer-groups (describe, reset-offsets), transactions (describe) and
delete-records.

Both clusters are brokers 1, 2 and 3 with the same settings (odradek's each in a rack of its own,
Kafka's in none: either way a topic's replicas and leaders are spread over the three brokers).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing import kafka_reference
from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.kafka_reference.conftest import (
    CONFIGS,
    DELETE_RECORDS,
    GET_OFFSETS,
    GROUPS,
    LEADER_ELECTION,
    LOG_DIRS,
    REASSIGN,
    TOPICS,
    TRANSACTIONS,
    require_kafka,
    run,
    run_ok,
)

pytestmark = pytest.mark.slow  # two clusters, about 30 JVM starts

SETTINGS: dict[str, object] = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
}
BROKERS = (1, 2, 3)
SETTLE_S = 20.0


@dataclass(frozen=True)
class Cluster:
    name: str  # "odradek" or "kafka"
    bootstrap: str
    log_dirs: dict[int, str]  # each broker's only log directory

    def args(self, *args: str) -> list[str]:
        return ["--bootstrap-server", self.bootstrap, *args]


@pytest.fixture(scope="module", params=["odradek", "kafka"])
def cluster(
    request: pytest.FixtureRequest, zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    require_kafka(kafka_reference.KRAFT_VERSION)  # the tools are Kafka 4.x's
    root = tmp_path_factory.mktemp(f"{request.param}-cluster")
    if request.param == "odradek":
        with LocalCluster(
            root,
            3,
            zookeeper_connect=zookeeper.connect_string,
            session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
            overrides=SETTINGS,
        ) as made:
            made.wait_for_controller()
            dirs = {broker_id: str(process.data_dir) for broker_id, process in made.brokers.items()}
            yield Cluster("odradek", made.bootstrap, dirs)
    else:
        with kafka_reference.KafkaCluster(root, overrides=SETTINGS) as kafka:
            dirs = {broker.broker_id: str(broker.work_dir / "data") for broker in kafka.brokers}
            yield Cluster("kafka", kafka.bootstrap, dirs)


def _produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(count):
        producer.produce(topic, key=f"k{index}".encode(), value=f"v{index}".encode())
    assert producer.flush(30) == 0


Partitions = list[dict[str, str]]


def _describe(
    cluster: Cluster, topic: str, settled: Callable[[Partitions], bool] = lambda _: True
) -> tuple[str, Partitions]:
    """kafka-topics --describe: the topic's line, and each partition's fields by name. Asked again
    (for up to SETTLE_S) while it fails or `settled` says no: the broker that answers learns a change from the
    controller after the request that made it was answered, in Kafka as in odradek."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        done = run(TOPICS, *cluster.args("--describe", "--topic", topic))
        if done.returncode != 0:  # a broker that has not heard of the topic yet
            assert time.monotonic() < deadline, done.stdout + done.stderr
            continue
        head, *lines = done.stdout.splitlines()
        partitions = [
            {key: value for key, _, value in (field.partition(": ") for field in line.split("\t")[1:])}
            for line in lines
        ]
        if settled(partitions) or time.monotonic() > deadline:
            return head, partitions


def _ids(text: str) -> list[int]:
    return [int(broker_id) for broker_id in text.split(",")]


def _full(partition: dict[str, str]) -> bool:
    """Every replica of the partition in its ISR."""
    return sorted(_ids(partition["Isr"])) == sorted(_ids(partition["Replicas"]))


def test_topics_on_three_brokers(cluster: Cluster, unique_topic: str) -> None:
    create = ["--create", "--topic", unique_topic, "--partitions", "3", "--replication-factor", "3"]
    assert run_ok(TOPICS, *cluster.args(*create)) == f"Created topic {unique_topic}.\n"
    head, partitions = _describe(cluster, unique_topic, lambda found: all(_full(p) for p in found))
    assert "\tPartitionCount: 3\tReplicationFactor: 3\t" in head
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    for partition in partitions:
        replicas = _ids(partition["Replicas"])
        assert sorted(replicas) == list(BROKERS)
        assert int(partition["Leader"]) == replicas[0]  # the preferred replica leads
        assert sorted(_ids(partition["Isr"])) == list(BROKERS)
        assert (partition["Elr"], partition["LastKnownElr"]) == ("", "")
    assert sorted(int(p["Leader"]) for p in partitions) == list(BROKERS)  # one leader on each broker

    assert run_ok(TOPICS, *cluster.args("--alter", "--topic", unique_topic, "--partitions", "5")) == ""
    head, partitions = _describe(
        cluster, unique_topic, lambda found: len(found) == 5 and all(_full(p) for p in found)
    )
    assert "\tPartitionCount: 5\tReplicationFactor: 3\t" in head
    assert all(sorted(_ids(p["Replicas"])) == list(BROKERS) for p in partitions)
    _produce(cluster, unique_topic, 10)
    offsets = run_ok(GET_OFFSETS, *cluster.args("--topic", unique_topic)).splitlines()
    assert sorted(line.rsplit(":", 2)[1] for line in offsets) == ["0", "1", "2", "3", "4"]
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets) == 10

    assert run_ok(TOPICS, *cluster.args("--delete", "--topic", unique_topic)) == ""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    eventually(
        lambda: unique_topic not in admin.list_topics(timeout=10).topics, 15, f"{unique_topic} deleted"
    )


def _dynamic(described: str) -> list[str]:
    """The `name=value` of each config kafka-configs --describe lists (without its synonyms)."""
    return [line.split(" sensitive=")[0].strip() for line in described.splitlines()[1:]]


def _verify_until_complete(cluster: Cluster, plan: Path, partitions: list[str]) -> list[str]:
    """kafka-reassign-partitions --verify, run again until it reports every move complete (what its
    documentation asks for): that run's lines."""
    deadline = time.monotonic() + 30
    while True:
        verified = run_ok(REASSIGN, *cluster.args("--verify", "--reassignment-json-file", str(plan)))
        lines = [line for line in verified.splitlines() if line]
        if all(f"Reassignment of partition {p} is completed." in lines for p in partitions):
            return lines
        assert time.monotonic() < deadline, verified


def test_reassign_partitions_with_a_throttle(cluster: Cluster, unique_topic: str, tmp_path: Path) -> None:
    create = ["--create", "--topic", unique_topic, "--replica-assignment", "1:2,2:1"]
    assert run_ok(TOPICS, *cluster.args(*create)) == f"Created topic {unique_topic}.\n"
    _produce(cluster, unique_topic, 20)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": unique_topic}], "version": 1}))
    generate = ["--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3"]
    current_head, current, proposed_head, proposed = [
        line for line in run_ok(REASSIGN, *cluster.args(*generate)).splitlines() if line
    ]
    assert (current_head, proposed_head) == (
        "Current partition replica assignment",
        "Proposed partition reassignment configuration",
    )
    dirs = cluster.log_dirs
    assert json.loads(current) == {
        "version": 1,
        "partitions": [
            {"topic": unique_topic, "partition": 0, "replicas": [1, 2], "log_dirs": [dirs[1], dirs[2]]},
            {"topic": unique_topic, "partition": 1, "replicas": [2, 1], "log_dirs": [dirs[2], dirs[1]]},
        ],
    }
    moves = json.loads(proposed)["partitions"]
    assert [(move["partition"], sorted(move["replicas"])) for move in moves] == [(0, [2, 3]), (1, [2, 3])]

    plan = tmp_path / "plan.json"
    plan.write_text(proposed)
    executed = run_ok(
        REASSIGN, *cluster.args("--execute", "--reassignment-json-file", str(plan), "--throttle", "10000000")
    )
    assert "Warning: You must run --verify periodically, until the reassignment completes" in executed
    assert "The inter-broker throttle limit was set to 10000000 B/s" in executed
    assert executed.endswith(
        f"Successfully started partition reassignments for {unique_topic}-0,{unique_topic}-1\n"
    )
    # the tool throttles the moving replicas' traffic: the new (broker 3) as followers, the old as leaders
    topic_configs = ["--entity-type", "topics", "--entity-name", unique_topic, "--describe"]
    assert _dynamic(run_ok(CONFIGS, *cluster.args(*topic_configs))) == [
        "follower.replication.throttled.replicas=0:3,1:3",
        "leader.replication.throttled.replicas=0:1,0:2,1:1,1:2",
    ]
    for broker_id in BROKERS:
        broker_configs = ["--entity-type", "brokers", "--entity-name", str(broker_id), "--describe"]
        assert _dynamic(run_ok(CONFIGS, *cluster.args(*broker_configs))) == [
            "follower.replication.throttled.rate=10000000",
            "leader.replication.throttled.rate=10000000",
        ]

    partitions = [f"{unique_topic}-0", f"{unique_topic}-1"]
    verified = _verify_until_complete(cluster, plan, partitions)
    assert verified == [
        "Status of partition reassignment:",
        *(f"Reassignment of partition {p} is completed." for p in partitions),
        "Clearing broker-level throttles on brokers 1,2,3",
        f"Clearing topic-level throttles on topic {unique_topic}",
    ]
    moved = [move["replicas"] for move in moves]
    _, described = _describe(
        cluster,
        unique_topic,
        lambda found: [_ids(p["Replicas"]) for p in found] == moved and all(_full(p) for p in found),
    )
    assert [_ids(p["Replicas"]) for p in described] == moved
    assert [sorted(_ids(p["Isr"])) for p in described] == [[2, 3], [2, 3]]
    assert (
        run_ok(CONFIGS, *cluster.args(*topic_configs)) == f"Dynamic configs for topic {unique_topic} are:\n"
    )

    # broker 1 drops its replicas once the controller tells it to, after the move completed
    deadline = time.monotonic() + SETTLE_S
    while True:
        lines = run_ok(LOG_DIRS, *cluster.args("--describe", "--topic-list", unique_topic)).splitlines()
        assert lines[:2] == [
            "Querying brokers for log directories information",
            "Received log directory information from brokers 1,2,3",
        ]
        held = {}
        for broker in json.loads(lines[2])["brokers"]:
            (log_dir,) = broker["logDirs"]
            assert (log_dir["logDir"], log_dir["error"]) == (cluster.log_dirs[broker["broker"]], None)
            held[broker["broker"]] = sorted(p["partition"] for p in log_dir["partitions"])
            assert all(p["size"] > 0 for p in log_dir["partitions"]), log_dir
        if held[1] == [] or time.monotonic() > deadline:
            break
    assert held == {1: [], 2: partitions, 3: partitions}


def test_preferred_leader_election(cluster: Cluster, unique_topic: str, tmp_path: Path) -> None:
    create = ["--create", "--topic", unique_topic, "--replica-assignment", "1:2:3"]
    assert run_ok(TOPICS, *cluster.args(*create)) == f"Created topic {unique_topic}.\n"
    elect = ["--election-type", "preferred", "--topic", unique_topic, "--partition", "0"]
    assert (
        run_ok(LEADER_ELECTION, *cluster.args(*elect))
        == f"Valid replica already elected for partitions {unique_topic}-0\n"
    )
    plan = tmp_path / "reorder.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": unique_topic, "partition": 0, "replicas": [2, 1, 3]}]}
        )
    )
    run_ok(REASSIGN, *cluster.args("--execute", "--reassignment-json-file", str(plan)))
    _verify_until_complete(cluster, plan, [f"{unique_topic}-0"])
    (partition,) = _describe(cluster, unique_topic, lambda found: found[0]["Replicas"] == "2,1,3")[1]
    assert (partition["Leader"], partition["Replicas"]) == ("1", "2,1,3")  # a reorder keeps the leader

    assert (
        run_ok(LEADER_ELECTION, *cluster.args(*elect))
        == f"Successfully completed leader election (PREFERRED) for partitions {unique_topic}-0\n"
    )
    (partition,) = _describe(cluster, unique_topic, lambda found: found[0]["Leader"] == "2")[1]
    assert (partition["Leader"], partition["Replicas"]) == ("2", "2,1,3")


def test_groups_transactions_and_records_on_three_brokers(
    cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    group, transactional_id = f"{unique_topic}-g", f"{unique_topic}-txn"
    create = ["--create", "--topic", unique_topic, "--partitions", "3", "--replication-factor", "3"]
    assert run_ok(TOPICS, *cluster.args(*create)) == f"Created topic {unique_topic}.\n"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(3):
        producer.produce(unique_topic, f"v{index}".encode(), partition=0)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(unique_topic, 0, 3)], asynchronous=False)
    consumer.close()

    head, *rows = [
        line.split()
        for line in run_ok(GROUPS, *cluster.args("--describe", "--group", group)).splitlines()
        if line
    ]
    assert (
        head == "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID".split()
    )
    assert rows == [[group, unique_topic, "0", "3", "4", "1", "-", "-", "-"]]  # the commit marker at 3
    reset = [
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        f"{unique_topic}:0",
        "--to-earliest",
        "--execute",
    ]
    assert run_ok(GROUPS, *cluster.args(*reset)).split("\n")[-2].split() == [group, unique_topic, "0", "0"]

    head, row = run_ok(
        TRANSACTIONS, *cluster.args("describe", "--transactional-id", transactional_id)
    ).splitlines()
    values = dict(zip(head.split(), row.split(), strict=False))
    assert int(values["CoordinatorId"]) in BROKERS
    assert (values["TransactionalId"], values["TransactionState"]) == (transactional_id, "CompleteCommit")

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": unique_topic, "partition": 0, "offset": 2}], "version": 1})
    )
    assert run_ok(DELETE_RECORDS, *cluster.args("--offset-json-file", str(offsets))).splitlines()[-1] == (
        f"partition: {unique_topic}-0\tlow_watermark: 2"
    )
