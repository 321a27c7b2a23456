"""Kafka's own command-line tools (Kafka 4.x's jars, run by their main classes as bin/kafka-*.sh run
them) against an odradek single node, and the same commands against a Kafka 4.x broker: every test
runs once per target and asserts the same output on both, so a difference is odradek's.

Both brokers are broker id 1 with the same settings (Kafka's ACL authorizer allowing what no ACL
names, so `acls` has something to talk to). What the tools cannot do against odradek, and Kafka can,
is asserted as such at the end (docs/deviations.md lists): kafka-metadata-quorum needs KRaft.
Groups of the KIP-848 consumer protocol are described with Kafka 4's columns on both.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess
from tests.kafka_reference.conftest import (
    ACLS,
    CONFIGS,
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    CONSUMER_PERF,
    DELETE_RECORDS,
    GET_OFFSETS,
    GROUPS,
    LEADER_ELECTION,
    LOG_DIRS,
    METADATA_QUORUM,
    PRODUCER_PERF,
    REASSIGN,
    TOPICS,
    TRANSACTIONS,
    require_kafka,
    run,
    run_ok,
)

pytestmark = pytest.mark.slow  # about 70 JVM starts, 2-4 minutes on 2 cores: the file runs first

SETTINGS: dict[str, object] = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@dataclass(frozen=True)
class Target:
    name: str  # "odradek" or "kafka"
    bootstrap: str
    log_dir: str

    def args(self, *args: str) -> list[str]:
        return ["--bootstrap-server", self.bootstrap, *args]


@pytest.fixture(scope="module", params=["odradek", "kafka"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    require_kafka(kafka_reference.KRAFT_VERSION)  # the tools are Kafka 4.x's
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "odradek":
        data = root / "data"
        with BrokerProcess(data, output_path=root / "broker.out", broker_id=1, overrides=SETTINGS) as broker:
            yield Target("odradek", broker.bootstrap, str(data))
    else:
        with kafka_reference.KafkaBroker(root, overrides=SETTINGS) as kafka:
            yield Target("kafka", kafka.bootstrap, str(root / "data"))


def _produce(target: Target, topic: str, count: int, partitions: int = 0) -> None:
    """`count` keyed records; spread round-robin over `partitions` when given, else by their keys."""
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    for index in range(count):
        spread = {"partition": index % partitions} if partitions else {}
        producer.produce(topic, key=f"k{index}".encode(), value=f"v{index}".encode(), **spread)
    assert producer.flush(30) == 0


def _create(target: Target, topic: str, partitions: int = 1) -> None:
    args = ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
    assert run_ok(TOPICS, *target.args(*args)) == f"Created topic {topic}.\n"


def _describe_lines(target: Target, topic: str) -> list[str]:
    return run_ok(TOPICS, *target.args("--describe", "--topic", topic)).splitlines()


def test_topics_create_describe_alter_delete(target: Target, unique_topic: str) -> None:
    create = ["--create", "--topic", unique_topic, "--partitions", "2", "--replication-factor", "1"]
    created = run_ok(TOPICS, *target.args(*create, "--config", "retention.ms=86400000"))
    assert created == f"Created topic {unique_topic}.\n"
    head, *partitions = _describe_lines(target, unique_topic)
    fields = re.fullmatch(
        rf"Topic: {unique_topic}\tTopicId: [\w-]{{22}}\tPartitionCount: 2\tReplicationFactor: 1\t"
        r"Configs: (.*)",
        head,
    )
    assert fields is not None, head
    assert "retention.ms=86400000" in fields[1].split(",")
    assert partitions == [
        f"\tTopic: {unique_topic}\tPartition: {index}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
        for index in range(2)
    ]

    assert run_ok(TOPICS, *target.args("--alter", "--topic", unique_topic, "--partitions", "3")) == ""
    assert "PartitionCount: 3\t" in _describe_lines(target, unique_topic)[0]
    assert unique_topic in run_ok(TOPICS, *target.args("--list")).splitlines()

    assert run_ok(TOPICS, *target.args("--delete", "--topic", unique_topic)) == ""
    deadline = time.monotonic() + 15
    while unique_topic in run_ok(TOPICS, *target.args("--list")).splitlines():
        assert time.monotonic() < deadline, f"{unique_topic} still listed 15 s after its deletion"
    gone = run(TOPICS, *target.args("--describe", "--topic", unique_topic))
    assert gone.returncode == 1
    assert f"Topic '{unique_topic}' does not exist as expected" in gone.stdout + gone.stderr


def test_configs_topics(target: Target, unique_topic: str) -> None:
    _create(target, unique_topic)
    entity = ["--entity-type", "topics", "--entity-name", unique_topic]
    added = run_ok(
        CONFIGS,
        *target.args(*entity, "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=compact"),
    )
    assert added == f"Completed updating config for topic {unique_topic}.\n"
    head, compact, retention = run_ok(CONFIGS, *target.args(*entity, "--describe")).splitlines()
    assert head == f"Dynamic configs for topic {unique_topic} are:"
    assert compact == (
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}"
    )
    # Kafka 4.x names no DEFAULT_CONFIG synonym for retention.ms (log.retention.hours, as 3.9 did)
    assert retention.startswith(
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
    )

    deleted = run_ok(CONFIGS, *target.args(*entity, "--alter", "--delete-config", "retention.ms"))
    assert deleted == f"Completed updating config for topic {unique_topic}.\n"
    assert run_ok(CONFIGS, *target.args(*entity, "--describe")).splitlines()[1:] == [compact]


def test_configs_brokers(target: Target) -> None:
    entity = ["--entity-type", "brokers", "--entity-name", "1"]
    added = run_ok(CONFIGS, *target.args(*entity, "--alter", "--add-config", "log.cleaner.threads=2"))
    assert added == "Completed updating config for broker 1.\n"
    assert run_ok(CONFIGS, *target.args(*entity, "--describe")).splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
        "DEFAULT_CONFIG:log.cleaner.threads=1}",
    ]
    run_ok(CONFIGS, *target.args(*entity, "--alter", "--delete-config", "log.cleaner.threads"))
    assert run_ok(CONFIGS, *target.args(*entity, "--describe")) == "Dynamic configs for broker 1 are:\n"
    defaults = run_ok(CONFIGS, *target.args("--entity-type", "brokers", "--entity-default", "--describe"))
    assert defaults.splitlines()[0] == "Default configs for brokers in the cluster are:"


def test_configs_clients_and_users(target: Target) -> None:
    client = ["--entity-type", "clients", "--entity-name", "app-1"]
    quotas = "producer_byte_rate=1048576,consumer_byte_rate=2097152"
    assert run_ok(CONFIGS, *target.args(*client, "--alter", "--add-config", quotas)) == (
        "Completed updating config for client app-1.\n"
    )
    assert run_ok(CONFIGS, *target.args(*client, "--describe")) == (
        "Quota configs for client-id 'app-1' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n"
    )

    user = ["--entity-type", "users", "--entity-name", "alice"]
    scram = "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"
    assert run_ok(CONFIGS, *target.args(*user, "--alter", "--add-config", scram)) == (
        "Completed updating config for user alice.\n"
    )
    run_ok(CONFIGS, *target.args(*user, "--alter", "--add-config", "producer_byte_rate=1024"))
    assert run_ok(CONFIGS, *target.args(*user, "--describe")).splitlines() == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
    ]
    run_ok(CONFIGS, *target.args(*user, "--alter", "--delete-config", "SCRAM-SHA-256"))
    assert run_ok(CONFIGS, *target.args(*user, "--describe")) == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
    )


def _console_consume(target: Target, topic: str, group: str, count: int) -> tuple[str, str]:
    args = ["--topic", topic, "--from-beginning", "--max-messages", str(count), "--group", group]
    done = run(
        CONSOLE_CONSUMER,
        *target.args(*args, "--formatter-property", "print.key=true", "--timeout-ms", "30000"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


def test_console_producer_and_consumer(target: Target, unique_topic: str) -> None:
    _create(target, unique_topic)
    lines = "k1:v1\nk2:v2\nk3:v3\n"
    properties = ["--reader-property", "parse.key=true", "--reader-property", "key.separator=:"]
    assert run_ok(CONSOLE_PRODUCER, *target.args("--topic", unique_topic, *properties), input=lines) == ""
    consumed, summary = _console_consume(target, unique_topic, f"{unique_topic}-g", 3)
    assert consumed == "k1\tv1\nk2\tv2\nk3\tv3\n"
    assert "Processed a total of 3 messages" in summary


def test_consumer_groups_list_describe_reset_delete(target: Target, unique_topic: str) -> None:
    group = f"{unique_topic}-g"
    _create(target, unique_topic)
    _produce(target, unique_topic, 3)
    _console_consume(target, unique_topic, group, 3)
    assert group in run_ok(GROUPS, *target.args("--list")).splitlines()

    head, row = run_ok(GROUPS, *target.args("--describe", "--group", group)).split("\n")[-3:-1]
    columns = "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"
    assert head.split() == columns.split()
    assert row.split() == [group, unique_topic, "0", "3", "3", "0", "-", "-", "-"]

    reset = ["--reset-offsets", "--group", group, "--topic", unique_topic, "--to-earliest", "--execute"]
    head, row = run_ok(GROUPS, *target.args(*reset)).split("\n")[-3:-1]
    assert head.split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert row.split() == [group, unique_topic, "0", "0"]
    row = run_ok(GROUPS, *target.args("--describe", "--group", group)).split("\n")[-2]
    assert row.split()[3:6] == ["0", "3", "3"]  # current offset, log end, lag

    state = run_ok(GROUPS, *target.args("--describe", "--group", group, "--state")).split("\n")[-2]
    assert state.split() == [group, *target.bootstrap.split(), "(1)", "-", "Empty", "0"]

    deleted = run_ok(GROUPS, *target.args("--delete", "--group", group))
    assert deleted == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in run_ok(GROUPS, *target.args("--list")).splitlines()


def test_get_offsets_and_delete_records(target: Target, unique_topic: str, tmp_path: Path) -> None:
    _create(target, unique_topic)
    _produce(target, unique_topic, 5)
    assert run_ok(GET_OFFSETS, *target.args("--topic", unique_topic)) == f"{unique_topic}:0:5\n"
    assert (
        run_ok(GET_OFFSETS, *target.args("--topic", unique_topic, "--time", "-2")) == f"{unique_topic}:0:0\n"
    )

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": unique_topic, "partition": 0, "offset": 2}], "version": 1})
    )
    assert run_ok(DELETE_RECORDS, *target.args("--offset-json-file", str(offsets))).splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {unique_topic}-0\tlow_watermark: 2",
    ]
    assert (
        run_ok(GET_OFFSETS, *target.args("--topic", unique_topic, "--time", "earliest"))
        == f"{unique_topic}:0:2\n"
    )
    assert (
        run_ok(GET_OFFSETS, *target.args("--topic", unique_topic, "--time", "latest"))
        == f"{unique_topic}:0:5\n"
    )


def test_log_dirs(target: Target, unique_topic: str) -> None:
    _create(target, unique_topic)
    _produce(target, unique_topic, 2)
    lines = run_ok(LOG_DIRS, *target.args("--describe", "--topic-list", unique_topic)).splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1",
    ]
    described = json.loads(lines[2])
    assert described["version"] == 1
    (broker,) = described["brokers"]
    assert broker["broker"] == 1
    (log_dir,) = broker["logDirs"]
    assert (log_dir["logDir"], log_dir["error"]) == (target.log_dir, None)
    (partition,) = log_dir["partitions"]
    assert partition["partition"] == f"{unique_topic}-0"
    assert (partition["offsetLag"], partition["isFuture"]) == (0, False)
    assert partition["size"] > 0


def test_producer_and_consumer_perf_test(target: Target, unique_topic: str) -> None:
    _create(target, unique_topic)
    produce = ["--topic", unique_topic, "--num-records", "5000", "--record-size", "100", "--throughput", "-1"]
    produced = run_ok(
        PRODUCER_PERF, *produce, "--command-property", f"bootstrap.servers={target.bootstrap}", "acks=all"
    )
    assert re.fullmatch(
        r"5000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th.",
        produced.splitlines()[-1],
    ), produced

    consumed = run_ok(
        CONSUMER_PERF, *target.args("--topic", unique_topic, "--num-records", "5000", "--timeout", "30000")
    )
    head, row = consumed.splitlines()
    names = head.split(", ")
    assert names[:6] == [
        "start.time",
        "end.time",
        "data.consumed.in.MB",
        "MB.sec",
        "data.consumed.in.nMsg",
        "nMsg.sec",
    ]
    values = dict(zip(names, row.split(", "), strict=True))
    assert (values["data.consumed.in.nMsg"], values["data.consumed.in.MB"]) == ("5000", "0.4768")


def test_acls_add_list_remove(target: Target, unique_topic: str) -> None:
    resource = f"ResourcePattern(resourceType=TOPIC, name={unique_topic}, patternType=LITERAL)"
    entry = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    acl = ["--allow-principal", "User:alice", "--operation", "Read", "--topic", unique_topic]
    added = run_ok(ACLS, *target.args("--add", *acl))
    assert added == f"Adding ACLs for resource `{resource}`: \n \t{entry}\n\n"
    listed = run_ok(ACLS, *target.args("--list", "--topic", unique_topic))
    assert listed == f"Current ACLs for resource `{resource}`:\n\t{entry}\n\n"
    removed = run_ok(ACLS, *target.args("--remove", "--force", *acl))
    assert removed == ""  # with --force, nothing to confirm
    assert run_ok(ACLS, *target.args("--list", "--topic", unique_topic)) == ""


def test_leader_election(target: Target, unique_topic: str) -> None:
    _create(target, unique_topic)
    elect = ["--election-type", "preferred", "--topic", unique_topic, "--partition", "0"]
    assert (
        run_ok(LEADER_ELECTION, *target.args(*elect))
        == f"Valid replica already elected for partitions {unique_topic}-0\n"
    )


def test_transactions_list_describe(target: Target, unique_topic: str) -> None:
    transactional_id = f"{unique_topic}-txn"
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(unique_topic, b"in a transaction")
    producer.commit_transaction(30)

    listed = run_ok(TRANSACTIONS, *target.args("list")).splitlines()
    assert listed[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [line.split() for line in listed[1:] if line.split()[0] == transactional_id]
    assert (row[1], row[3]) == ("1", "CompleteCommit")

    head, row = run_ok(
        TRANSACTIONS, *target.args("describe", "--transactional-id", transactional_id)
    ).splitlines()
    values = dict(zip(head.split(), row.split(), strict=False))
    assert (values["CoordinatorId"], values["TransactionalId"]) == ("1", transactional_id)
    assert values["TransactionState"] == "CompleteCommit"


def test_reassign_partitions_generate_execute_verify(
    target: Target, unique_topic: str, tmp_path: Path
) -> None:
    _create(target, unique_topic)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": unique_topic}], "version": 1}))
    generated = run_ok(
        REASSIGN, *target.args("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    )
    current_head, current, proposed_head, proposed = [line for line in generated.splitlines() if line]
    assert (current_head, proposed_head) == (
        "Current partition replica assignment",
        "Proposed partition reassignment configuration",
    )
    assert json.loads(current)["partitions"] == [
        {"topic": unique_topic, "partition": 0, "replicas": [1], "log_dirs": [target.log_dir]}
    ]
    assert json.loads(proposed)["partitions"] == [
        {"topic": unique_topic, "partition": 0, "replicas": [1], "log_dirs": ["any"]}
    ]

    move = tmp_path / "move.json"
    move.write_text(proposed)
    executed = run_ok(
        REASSIGN, *target.args("--execute", "--reassignment-json-file", str(move), "--throttle", "50000000")
    )
    assert "The inter-broker throttle limit was set to 50000000 B/s" in executed
    assert executed.endswith(f"Successfully started partition reassignment for {unique_topic}-0\n")
    verified = run_ok(REASSIGN, *target.args("--verify", "--reassignment-json-file", str(move)))
    assert [line for line in verified.splitlines() if line] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {unique_topic}-0 is completed.",
        "Clearing broker-level throttles on broker 1",
        f"Clearing topic-level throttles on topic {unique_topic}",
    ]


def test_metadata_quorum_needs_kraft(target: Target) -> None:
    """kafka-metadata-quorum asks for DescribeQuorum, a KRaft API: odradek follows the ZooKeeper-mode
    design and does not serve it (docs/deviations.md)."""
    done = run(METADATA_QUORUM, *target.args("describe", "--status"))
    if target.name == "kafka":
        assert done.returncode == 0, done.stderr
        assert "LeaderId:               1" in done.stdout.splitlines()
    else:
        assert done.returncode == 1
        assert "The node does not support DESCRIBE_QUORUM" in done.stderr


def test_console_consumer_with_the_consumer_group_protocol(target: Target, unique_topic: str) -> None:
    """Kafka 4's Java consumer with group.protocol=consumer (KIP-848): ConsumerGroupHeartbeat for its
    assignment, then fetches, and commits with its member epoch on close."""
    group = f"{unique_topic}-g"
    _create(target, unique_topic)
    _produce(target, unique_topic, 1)
    args = ["--topic", unique_topic, "--from-beginning", "--max-messages", "1", "--group", group]
    done = run(
        CONSOLE_CONSUMER,
        *target.args(*args, "--command-property", "group.protocol=consumer", "--timeout-ms", "30000"),
    )
    assert (done.returncode, done.stdout) == (0, "v0\n"), done.stderr
    row = run_ok(GROUPS, *target.args("--describe", "--group", group)).split("\n")[-2]
    assert row.split() == [group, unique_topic, "0", "1", "1", "0", "-", "-", "-"]


def _consumer_protocol_member(target: Target, topic: str, group: str) -> Consumer:
    """A confluent-kafka consumer of `group` with the consumer group protocol that has read the topic's
    four records and committed them."""
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": "c0",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 60
    while read < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        read += message is not None and message.error() is None
    assert read == 4
    consumer.commit(asynchronous=False)
    return consumer


def _reconciled_member(target: Target, group: str, assignment: str) -> list[str]:
    """The --members --verbose row of the group's one member once it owns its whole target assignment."""
    deadline = time.monotonic() + 30
    while True:
        row = run_ok(GROUPS, *target.args("--describe", "--group", group, "--members", "--verbose"))
        cells = row.split("\n")[-2].split()
        if cells[6::2] == [assignment, assignment] or time.monotonic() > deadline:
            return cells
        time.sleep(0.5)


def test_consumer_groups_describe_a_consumer_protocol_group(target: Target, unique_topic: str) -> None:
    """kafka-consumer-groups on a KIP-848 group: ConsumerGroupDescribe's epochs and assignments in Kafka
    4's columns, ListGroups v5's type, and the offsets once the member has left."""
    group = f"{unique_topic}-g"
    _create(target, unique_topic, partitions=2)
    _produce(target, unique_topic, 4, partitions=2)
    consumer = _consumer_protocol_member(target, unique_topic, group)
    try:
        member = _reconciled_member(target, group, f"{unique_topic}:0,1")
        assert [member[0], *member[2:5]] == [group, "/127.0.0.1", "c0", "2"], member
        epoch = member[5]
        assert member[5:] == [epoch, f"{unique_topic}:0,1", epoch, f"{unique_topic}:0,1"], member
        state = run_ok(GROUPS, *target.args("--describe", "--group", group, "--state", "--verbose"))
        assert state.split("\n")[-2].split()[2:] == ["(1)", "uniform", "Stable", epoch, epoch, "1"]
        listed = run_ok(GROUPS, *target.args("--list", "--type")).splitlines()
        assert [group, "Consumer"] in [line.split() for line in listed]
    finally:
        consumer.close()
    state = run_ok(GROUPS, *target.args("--describe", "--group", group, "--state")).split("\n")[-2]
    assert state.split()[2:] == ["(1)", "uniform", "Empty", "0"]
    described = run_ok(GROUPS, *target.args("--describe", "--group", group)).splitlines()
    assert [line.split() for line in described if line.startswith(group)] == [
        [group, unique_topic, str(p), "2", "2", "0", "-", "-", "-"] for p in (0, 1)
    ]
