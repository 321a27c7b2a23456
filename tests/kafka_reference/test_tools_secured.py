"""Kafka's own command-line tools (Kafka 4.x's jars) over SASL_SSL against an odradek single node with
ACLs on, and the security parts against a Kafka 4.x broker set up the same way, for comparison.

Both brokers have a SASL_SSL listener (a certificate from a CA made at test time, which the tools
trust through `ssl.truststore.type=PEM`), PLAIN users admin and alice, SCRAM users made by the
configs tool, Kafka's ACL authorizer with `allow.everyone.if.no.acl.found=false` and User:admin a
super user. Every tool gets a `--command-config` properties file naming the mechanism, the user and
the truststore. Admin runs every tool over SASL_SSL against odradek (the PLAINTEXT tests,
test_tools.py, compare the same commands' output with Kafka's); the security flow (a SCRAM user made
with kafka-configs, refused by the console clients until kafka-acls grants it, the acls tool refused
to a user who is not a super user) runs against both brokers and asserts the same output.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess, free_port
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
    PRODUCER_PERF,
    REASSIGN,
    TOPICS,
    TRANSACTIONS,
    require_kafka,
    run,
    run_ok,
)
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    PLAIN_MODULE,
    SCRAM_MODULE,
    jaas,
    sasl_overrides,
)
from tests.security.tls_broker import Pki, make_pki

pytestmark = pytest.mark.slow  # about 60 JVM starts over TLS, and a Kafka broker

LISTENER = "sasl_ssl"
SETTINGS: dict[str, object] = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@dataclass(frozen=True)
class Secured:
    """A broker's SASL_SSL listener and the files a tool needs to use it."""

    name: str  # "odradek" or "kafka"
    bootstrap: str
    log_dir: str
    ca: Path
    root: Path

    def properties(self, mechanism: str, user: str, password: str) -> Path:
        """A Kafka client's properties file for `user` over SASL_SSL."""
        module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        path = self.root / f"{user}-{mechanism}-{uuid.uuid4().hex[:6]}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={self.ca}\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config={jaas(module, username=user, password=password)}\n"
        )
        return path

    def as_user(self, properties: Path, *args: str) -> list[str]:
        return ["--bootstrap-server", self.bootstrap, "--command-config", str(properties), *args]

    def admin(self, *args: str) -> list[str]:
        """A tool's arguments as User:admin (PLAIN, a super user)."""
        return self.as_user(self.properties("PLAIN", ADMIN, ADMIN_PASSWORD), *args)

    def confluent(self) -> dict[str, object]:
        """confluent-kafka's settings as User:admin, for the tests' own set-up."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca),
            "sasl.mechanism": "PLAIN",
            "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD,
        }


@contextlib.contextmanager
def _odradek(root: Path, pki: Pki) -> Iterator[Secured]:
    port = free_port()
    overrides = sasl_overrides(
        LISTENER,
        **{
            "broker.id": 1,
            "listeners": f"SASL_SSL://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "super.users": f"User:{ADMIN}",
            **pki.ssl_settings(client_auth="none"),
            **SETTINGS,
        },
    )
    data = root / "data"
    with BrokerProcess(data, port=port, overrides=overrides, output_path=root / "broker.out") as broker:
        yield Secured("odradek", broker.bootstrap, str(data), pki.ca.cert_path, root)


@contextlib.contextmanager
def _kafka(root: Path, pki: Pki) -> Iterator[Secured]:
    """Kafka 4.x with a SASL_SSL listener for the tools beside the PLAINTEXT one its controller and
    start-up probe use (User:ANONYMOUS, a super user there)."""
    port, plain, controller = free_port(), free_port(), free_port()
    secured = f"SASL_SSL://127.0.0.1:{port}"
    overrides = sasl_overrides(
        LISTENER,
        **{
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},{secured}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},{secured}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
            "super.users": f"User:{ADMIN};User:ANONYMOUS",
            **pki.ssl_settings(client_auth="none"),
            **SETTINGS,
        },
    )
    broker = kafka_reference.KafkaBroker(
        root / "kafka", port=plain, controller_port=controller, overrides=overrides
    )
    with broker:
        yield Secured("kafka", f"127.0.0.1:{port}", str(root / "kafka" / "data"), pki.ca.cert_path, root)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Secured]]:
    """Each target's broker, started on first use and kept for the module."""
    require_kafka(kafka_reference.KRAFT_VERSION)  # the tools are Kafka 4.x's
    started: dict[str, Secured] = {}
    with contextlib.ExitStack() as stack:

        def get(name: str) -> Secured:
            if name not in started:
                root = tmp_path_factory.mktemp(f"{name}-sasl-ssl")
                make = _odradek if name == "odradek" else _kafka
                started[name] = stack.enter_context(make(root, make_pki(root)))
            return started[name]

        yield get


@pytest.fixture(params=["odradek", "kafka"])
def target(request: pytest.FixtureRequest, brokers: Callable[[str], Secured]) -> Secured:
    """Each broker in turn: for the tests that compare odradek's answers with Kafka's."""
    return brokers(request.param)


@pytest.fixture
def odradek(brokers: Callable[[str], Secured]) -> Secured:
    return brokers("odradek")


def _create(target: Secured, topic: str, partitions: int = 1) -> None:
    """The topic, made with confluent-kafka (a JVM start fewer than kafka-topics)."""
    admin = AdminClient(target.confluent())
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(target: Secured, topic: str, count: int) -> None:
    producer = Producer({**target.confluent(), "acks": "all"})
    for index in range(count):
        producer.produce(topic, key=f"k{index}".encode(), value=f"v{index}".encode())
    assert producer.flush(30) == 0


def _entries(output: str) -> set[str]:
    """The ACL entries an acls tool's output lists, one per (principal, host, operation, permission)."""
    return {line.strip() for line in output.splitlines() if line.strip().startswith("(principal=")}


def _acl_entry(user: str, operation: str) -> str:
    return f"(principal=User:{user}, host=*, operation={operation}, permissionType=ALLOW)"


def test_scram_user_acls_and_console_clients(target: Secured, unique_topic: str) -> None:
    """A SCRAM-SHA-256 user made with kafka-configs is refused by the console clients until kafka-acls
    grants it a producer's and a consumer's ACLs; alice (PLAIN, no ACL, no super user) can neither change
    ACLs, describe the group nor create a topic."""
    user, password, group = f"u-{uuid.uuid4().hex[:8]}", "scram-secret", f"{unique_topic}-g"
    _create(target, unique_topic)
    entity = ["--entity-type", "users", "--entity-name", user]
    scram = f"SCRAM-SHA-256=[iterations=8192,password={password}]"
    assert run_ok(CONFIGS, *target.admin(*entity, "--alter", "--add-config", scram)) == (
        f"Completed updating config for user {user}.\n"
    )
    assert run_ok(CONFIGS, *target.admin(*entity, "--describe")) == (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192\n"
    )
    scram_user = target.properties("SCRAM-SHA-256", user, password)
    producer = target.as_user(scram_user, "--topic", unique_topic)
    refused = run(CONSOLE_PRODUCER, *producer, input="refused\n")
    assert (
        f"TopicAuthorizationException: Not authorized to access topics: [{unique_topic}]" in refused.stderr
    ), refused.stderr

    principal = ["--allow-principal", f"User:{user}"]
    added = run_ok(ACLS, *target.admin("--add", *principal, "--producer", "--topic", unique_topic))
    assert _entries(added) == {_acl_entry(user, op) for op in ("WRITE", "DESCRIBE", "CREATE")}
    assert run_ok(CONSOLE_PRODUCER, *producer, input="one\ntwo\n") == ""

    consumer = target.as_user(scram_user, "--topic", unique_topic, "--group", group, "--from-beginning")
    consumer += ["--max-messages", "2", "--timeout-ms", "30000"]
    refused = run(CONSOLE_CONSUMER, *consumer)
    assert f"GroupAuthorizationException: Not authorized to access group: {group}" in refused.stderr, (
        refused.stderr
    )
    run_ok(ACLS, *target.admin("--add", *principal, "--consumer", "--topic", unique_topic, "--group", group))
    listed = run_ok(ACLS, *target.admin("--list", "--topic", unique_topic))
    resource = f"ResourcePattern(resourceType=TOPIC, name={unique_topic}, patternType=LITERAL)"
    assert listed.startswith(f"Current ACLs for resource `{resource}`:\n")
    assert _entries(listed) == {_acl_entry(user, op) for op in ("WRITE", "DESCRIBE", "CREATE", "READ")}
    consumed = run(CONSOLE_CONSUMER, *consumer)
    assert (consumed.returncode, consumed.stdout) == (0, "one\ntwo\n"), consumed.stderr

    alice = target.properties("PLAIN", ALICE, ALICE_PASSWORD)
    denied = run(ACLS, *target.as_user(alice, "--add", "--allow-principal", "User:alice", "--cluster"))
    assert denied.returncode == 1
    assert "ClusterAuthorizationException" in denied.stdout + denied.stderr, denied.stdout + denied.stderr
    denied = run(GROUPS, *target.as_user(alice, "--describe", "--group", group))
    assert denied.stdout == (  # exit status 0, as the tool has it
        "\nError: Executing consumer group command failed due to org.apache.kafka.common.errors."
        "GroupAuthorizationException: FindCoordinator request for groupId "
        f"`CoordinatorKey(idValue='{group}', type=GROUP)` failed due to authorization failure\n"
    )
    denied = run(TOPICS, *target.as_user(alice, "--create", "--topic", f"{unique_topic}-alice"))
    assert denied.returncode == 1
    assert "TopicAuthorizationException: Authorization failed." in denied.stdout + denied.stderr, (
        denied.stdout + denied.stderr
    )

    run_ok(ACLS, *target.admin("--remove", "--force", "--topic", unique_topic))
    run_ok(ACLS, *target.admin("--remove", "--force", "--group", group))
    assert run_ok(ACLS, *target.admin("--list", "--topic", unique_topic)) == ""


def test_topics(odradek: Secured, unique_topic: str) -> None:
    create = ["--create", "--topic", unique_topic, "--partitions", "2", "--replication-factor", "1"]
    assert run_ok(TOPICS, *odradek.admin(*create)) == f"Created topic {unique_topic}.\n"
    assert run_ok(TOPICS, *odradek.admin("--alter", "--topic", unique_topic, "--partitions", "3")) == ""
    head, *partitions = run_ok(TOPICS, *odradek.admin("--describe", "--topic", unique_topic)).splitlines()
    assert re.fullmatch(
        rf"Topic: {unique_topic}\tTopicId: [\w-]{{22}}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: ",
        head,
    ), head
    assert partitions == [
        f"\tTopic: {unique_topic}\tPartition: {index}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
        for index in range(3)
    ]
    assert run_ok(TOPICS, *odradek.admin("--delete", "--topic", unique_topic)) == ""


def test_configs(odradek: Secured, unique_topic: str) -> None:
    _create(odradek, unique_topic)
    topic = ["--entity-type", "topics", "--entity-name", unique_topic]
    run_ok(CONFIGS, *odradek.admin(*topic, "--alter", "--add-config", "cleanup.policy=compact"))
    assert run_ok(CONFIGS, *odradek.admin(*topic, "--describe")).splitlines() == [
        f"Dynamic configs for topic {unique_topic} are:",
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]
    broker = ["--entity-type", "brokers", "--entity-name", "1"]
    run_ok(CONFIGS, *odradek.admin(*broker, "--alter", "--add-config", "log.cleaner.threads=2"))
    assert (
        run_ok(CONFIGS, *odradek.admin(*broker, "--describe"))
        .splitlines()[1]
        .startswith("  log.cleaner.threads=2 sensitive=false")
    )
    run_ok(CONFIGS, *odradek.admin(*broker, "--alter", "--delete-config", "log.cleaner.threads"))
    client = ["--entity-type", "clients", "--entity-name", "secured-app"]
    run_ok(CONFIGS, *odradek.admin(*client, "--alter", "--add-config", "producer_byte_rate=1048576"))
    assert run_ok(CONFIGS, *odradek.admin(*client, "--describe")) == (
        "Quota configs for client-id 'secured-app' are producer_byte_rate=1048576.0\n"
    )


def test_consumer_groups_offsets_and_records(odradek: Secured, unique_topic: str, tmp_path: Path) -> None:
    group = f"{unique_topic}-g"
    _create(odradek, unique_topic)
    _produce(odradek, unique_topic, 5)
    consumer = odradek.admin("--topic", unique_topic, "--group", group, "--from-beginning")
    consumer += ["--max-messages", "5"]
    consumed = run(CONSOLE_CONSUMER, *consumer, "--timeout-ms", "30000")
    assert consumed.stdout == "".join(f"v{index}\n" for index in range(5)), consumed.stderr
    assert group in run_ok(GROUPS, *odradek.admin("--list")).splitlines()
    row = run_ok(GROUPS, *odradek.admin("--describe", "--group", group)).split("\n")[-2]
    assert row.split() == [group, unique_topic, "0", "5", "5", "0", "-", "-", "-"]
    reset = ["--reset-offsets", "--group", group, "--topic", unique_topic, "--to-offset", "1", "--execute"]
    assert run_ok(GROUPS, *odradek.admin(*reset)).split("\n")[-2].split() == [group, unique_topic, "0", "1"]
    deleted = run_ok(GROUPS, *odradek.admin("--delete", "--group", group))
    assert deleted == f"Deletion of requested consumer groups ('{group}') was successful.\n"

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": unique_topic, "partition": 0, "offset": 2}], "version": 1})
    )
    assert run_ok(DELETE_RECORDS, *odradek.admin("--offset-json-file", str(offsets))).splitlines()[-1] == (
        f"partition: {unique_topic}-0\tlow_watermark: 2"
    )
    earliest = run_ok(GET_OFFSETS, *odradek.admin("--topic", unique_topic, "--time", "earliest"))
    assert earliest == f"{unique_topic}:0:2\n"


def test_perf_tests(odradek: Secured, unique_topic: str) -> None:
    _create(odradek, unique_topic)
    admin = str(odradek.properties("PLAIN", ADMIN, ADMIN_PASSWORD))
    produce = ["--topic", unique_topic, "--num-records", "2000", "--record-size", "100", "--throughput", "-1"]
    produced = run_ok(
        PRODUCER_PERF,
        *produce,
        "--command-config",
        admin,
        "--command-property",
        f"bootstrap.servers={odradek.bootstrap}",
    )
    assert re.match(r"2000 records sent, [\d.]+ records/sec", produced.splitlines()[-1]), produced
    consumed = run_ok(
        CONSUMER_PERF,
        *odradek.as_user(Path(admin), "--topic", unique_topic, "--num-records", "2000", "--timeout", "30000"),
    )
    head, row = consumed.splitlines()
    values = dict(zip(head.split(", "), row.split(", "), strict=True))
    assert (values["data.consumed.in.nMsg"], values["data.consumed.in.MB"]) == ("2000", "0.1907")


def test_log_dirs_leader_election_and_reassignment(
    odradek: Secured, unique_topic: str, tmp_path: Path
) -> None:
    _create(odradek, unique_topic)
    lines = run_ok(LOG_DIRS, *odradek.admin("--describe", "--topic-list", unique_topic)).splitlines()
    assert lines[1] == "Received log directory information from brokers 1"
    ((log_dir,),) = [broker["logDirs"] for broker in json.loads(lines[2])["brokers"]]
    assert log_dir["logDir"] == odradek.log_dir
    assert [partition["partition"] for partition in log_dir["partitions"]] == [f"{unique_topic}-0"]

    elect = ["--election-type", "preferred", "--topic", unique_topic, "--partition", "0"]
    assert run_ok(LEADER_ELECTION, *odradek.admin(*elect)) == (
        f"Valid replica already elected for partitions {unique_topic}-0\n"
    )

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": unique_topic}], "version": 1}))
    generate = ["--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1"]
    proposed = run_ok(REASSIGN, *odradek.admin(*generate)).splitlines()[-1]
    assert json.loads(proposed)["partitions"] == [
        {"topic": unique_topic, "partition": 0, "replicas": [1], "log_dirs": ["any"]}
    ]
    move = tmp_path / "move.json"
    move.write_text(proposed)
    executed = run_ok(
        REASSIGN, *odradek.admin("--execute", "--reassignment-json-file", str(move), "--throttle", "1000000")
    )
    assert executed.endswith(f"Successfully started partition reassignment for {unique_topic}-0\n")
    verified = run_ok(REASSIGN, *odradek.admin("--verify", "--reassignment-json-file", str(move)))
    assert f"Reassignment of partition {unique_topic}-0 is completed." in verified.splitlines()


def test_transactions(odradek: Secured, unique_topic: str) -> None:
    transactional_id = f"{unique_topic}-txn"
    producer = Producer({**odradek.confluent(), "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(unique_topic, b"in a transaction")
    producer.commit_transaction(30)

    listed = [line.split() for line in run_ok(TRANSACTIONS, *odradek.admin("list")).splitlines()]
    assert [row[3] for row in listed if row[0] == transactional_id] == ["CompleteCommit"]
    head, row = run_ok(
        TRANSACTIONS, *odradek.admin("describe", "--transactional-id", transactional_id)
    ).splitlines()
    values = dict(zip(head.split(), row.split(), strict=False))
    assert (values["TransactionalId"], values["TransactionState"]) == (transactional_id, "CompleteCommit")
