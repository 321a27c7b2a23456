"""Kafka 4.4's share group tools against an odradek single node and against a Kafka 4.4 broker, the
same output asserted on both: kafka-configs setting a group's share.auto.offset.reset (a GROUP
config resource), the console share consumer (ConsoleShareConsumer) reading a topic through a share
group, and kafka-share-groups (ShareGroupCommand): --list [--state], --describe --members/--state
[--verbose] with a member, and with the group empty --reset-offsets, --describe (offsets),
--delete-offsets and --delete.

Where the two brokers may differ without a bug, the comparison leaves it out: member ids, the
coordinator's port, group and member epochs (Kafka bumps the group epoch when it initializes the
share-partitions; odradek initializes them on the partition leader), and start offsets while a
member has consumed (Kafka keeps the start offset at the first acknowledged batch until its state is
compacted; odradek moves it past the acknowledged records); they agree after a reset.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer, ShareConsumer

from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess
from tests.kafka_reference.conftest import CONFIGS, TOOLS, TOPICS, require_kafka, run, run_ok

pytestmark = pytest.mark.slow  # JVM starts: a minute or two on 2 cores

SHARE_GROUPS = f"{TOOLS}.consumer.group.ShareGroupCommand"
CONSOLE_SHARE_CONSUMER = f"{TOOLS}.consumer.ConsoleShareConsumer"
SETTINGS: dict[str, object] = {
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 3,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}
GROUP, TOPIC = "share-tool-group", "share-tool-topic"
DEADLINE_S = 60.0
ALL_GROUP_CONFIGS = [
    f"All configs for group {GROUP} are:",
    *(
        f"  {name}={value} sensitive=false synonyms={{{synonyms}}}"
        for name, value, synonyms in (
            (
                "consumer.assignment.interval.ms",
                "1000",
                "DEFAULT_CONFIG:group.consumer.assignment.interval.ms=1000",
            ),
            (
                "consumer.heartbeat.interval.ms",
                "5000",
                "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000",
            ),
            (
                "consumer.session.timeout.ms",
                "45000",
                "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000",
            ),
            (
                "errors.deadletterqueue.copy.record.enable",
                "false",
                "DEFAULT_CONFIG:errors.deadletterqueue.copy.record.enable=false",
            ),
            ("errors.deadletterqueue.topic.name", "", "DEFAULT_CONFIG:errors.deadletterqueue.topic.name="),
            (
                "share.assignment.interval.ms",
                "1000",
                "DEFAULT_CONFIG:group.share.assignment.interval.ms=1000",
            ),
            (
                "share.auto.offset.reset",
                "earliest",
                "DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
                "DEFAULT_CONFIG:share.auto.offset.reset=latest",
            ),
            ("share.delivery.count.limit", "5", "DEFAULT_CONFIG:group.share.delivery.count.limit=5"),
            ("share.heartbeat.interval.ms", "5000", "DEFAULT_CONFIG:group.share.heartbeat.interval.ms=5000"),
            (
                "share.isolation.level",
                "read_uncommitted",
                "DEFAULT_CONFIG:share.isolation.level=read_uncommitted",
            ),
            (
                "share.partition.max.record.locks",
                "2000",
                "DEFAULT_CONFIG:group.share.partition.max.record.locks=2000",
            ),
            (
                "share.record.lock.duration.ms",
                "30000",
                "DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000",
            ),
            ("share.renew.acknowledge.enable", "true", "DEFAULT_CONFIG:share.renew.acknowledge.enable=true"),
            ("share.session.timeout.ms", "45000", "DEFAULT_CONFIG:group.share.session.timeout.ms=45000"),
            (
                "streams.assignment.interval.ms",
                "1000",
                "DEFAULT_CONFIG:group.streams.assignment.interval.ms=1000",
            ),
            ("streams.assignor.name", "sticky", "DEFAULT_CONFIG:group.streams.assignors=sticky"),
            (
                "streams.heartbeat.interval.ms",
                "5000",
                "DEFAULT_CONFIG:group.streams.heartbeat.interval.ms=5000",
            ),
            (
                "streams.initial.rebalance.delay.ms",
                "3000",
                "DEFAULT_CONFIG:group.streams.initial.rebalance.delay.ms=3000",
            ),
            ("streams.num.standby.replicas", "0", "DEFAULT_CONFIG:group.streams.num.standby.replicas=0"),
            (
                "streams.rack.aware.assignment.tags",
                "",
                "DEFAULT_CONFIG:group.streams.rack.aware.assignment.tags=",
            ),
            ("streams.session.timeout.ms", "45000", "DEFAULT_CONFIG:group.streams.session.timeout.ms=45000"),
        )
    ),
]


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str

    def args(self, *args: str) -> list[str]:
        return ["--bootstrap-server", self.bootstrap, *args]


@pytest.fixture(scope="module", params=["odradek", "kafka"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    require_kafka(kafka_reference.KRAFT_VERSION)
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "odradek":
        with BrokerProcess(
            root / "data", output_path=root / "out", broker_id=1, overrides=SETTINGS
        ) as broker:
            yield Target("odradek", broker.bootstrap)
    else:
        with kafka_reference.KafkaBroker(root, overrides=SETTINGS) as kafka:
            yield Target("kafka", kafka.bootstrap)


def share_groups(target: Target, *args: str) -> list[str]:
    return run_ok(SHARE_GROUPS, *target.args(*args)).splitlines()


def test_share_group_tools(target: Target) -> None:
    args = ["--create", "--topic", TOPIC, "--partitions", "2", "--replication-factor", "1"]
    assert run_ok(TOPICS, *target.args(*args)) == f"Created topic {TOPIC}.\n"
    config = ["--alter", "--entity-type", "groups", "--entity-name", GROUP]
    altered = run_ok(CONFIGS, *target.args(*config, "--add-config", "share.auto.offset.reset=earliest"))
    assert altered == f"Completed updating config for group {GROUP}.\n"
    describe = ["--describe", "--entity-type", "groups", "--entity-name", GROUP]
    assert run_ok(CONFIGS, *target.args(*describe)).splitlines() == [
        f"Dynamic configs for group {GROUP} are:",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
    ]
    assert run_ok(CONFIGS, *target.args(*describe, "--all")).splitlines() == ALL_GROUP_CONFIGS
    refused = run(CONFIGS, *target.args(*config, "--add-config", "share.record.lock.duration.ms=1"))
    assert refused.returncode == 1
    assert "Invalid value 1 for configuration share.record.lock.duration.ms: Value must be at least 1000" in (
        refused.stderr
    )
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for i in range(10):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    consumed = run(
        CONSOLE_SHARE_CONSUMER,
        *target.args("--topic", TOPIC, "--group", GROUP, "--max-messages", "10", "--timeout-ms", "30000"),
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(f"v{i}" for i in range(10))
    assert "Processed a total of 10 messages" in consumed.stderr

    _with_a_member(target)
    _when_empty(target)


def _with_a_member(target: Target) -> None:
    consumer = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": GROUP, "client.id": "cid"})
    consumer.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + DEADLINE_S
        members: list[str] = []
        while time.monotonic() < deadline:
            consumer.poll(0.5)
            members = share_groups(target, "--describe", "--group", GROUP, "--members", "--verbose")
            if len(members) == 3 and members[2].endswith(f"{TOPIC}:0,1"):
                break
        assert members[0] == ""
        assert re.fullmatch(
            r"GROUP +CONSUMER-ID +HOST +CLIENT-ID +#PARTITIONS  MEMBER-EPOCH  ASSIGNMENT", members[1]
        )
        assert re.fullmatch(rf"{GROUP} \S+ +/127\.0\.0\.1 +cid +2 +\d+ +{TOPIC}:0,1", members[2]), members
        assert share_groups(target, "--list") == [GROUP]
        assert share_groups(target, "--list", "--state") == ["GROUP            STATE", f"{GROUP} Stable"]
        state = share_groups(target, "--describe", "--group", GROUP, "--state")
        assert state[1] == "GROUP            COORDINATOR (ID)          STATE           #MEMBERS"
        assert re.sub(r":\d+ ", ":PORT ", state[2]) == f"{GROUP} 127.0.0.1:PORT  (1)      Stable          1"
        verbose = share_groups(target, "--describe", "--group", GROUP, "--state", "--verbose")
        assert verbose[1].split() == [
            "GROUP",
            "COORDINATOR",
            "(ID)",
            "STATE",
            "GROUP-EPOCH",
            "ASSIGNMENT-EPOCH",
            "#MEMBERS",
        ]
        refused = run(
            SHARE_GROUPS,
            *target.args("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--dry-run"),
        )
        assert (refused.returncode, refused.stderr.strip()) == (1, f"Share group '{GROUP}' is not empty.")
        deletion = share_groups(target, "--delete", "--group", GROUP)
        assert deletion == [
            "",
            "Error: Deletion of some share groups failed:",
            f"* Group '{GROUP}' could not be deleted due to: "
            f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{GROUP}' is not EMPTY.",
        ]
    finally:
        consumer.close()


def _when_empty(target: Target) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while "Empty" not in share_groups(target, "--describe", "--group", GROUP, "--state")[2]:
        assert time.monotonic() < deadline, "the group did not empty"
        time.sleep(0.5)
    reset = ["--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"]
    assert sorted(share_groups(target, *reset)[2:]) == [
        f"{GROUP} {TOPIC} 0          0",
        f"{GROUP} {TOPIC} 1          0",
    ]
    assert share_groups(target, "--describe", "--group", GROUP, "--offsets", "--verbose") == [
        "",
        "GROUP            TOPIC            PARTITION  LEADER-EPOCH  START-OFFSET  LAG",
        f"{GROUP} {TOPIC} 0          0             0             5",
        f"{GROUP} {TOPIC} 1          0             0             5",
    ]
    latest = ["--reset-offsets", "--group", GROUP, "--all-topics", "--to-latest", "--dry-run"]
    assert sorted(share_groups(target, *latest)[2:]) == [
        f"{GROUP} {TOPIC} 0          5",
        f"{GROUP} {TOPIC} 1          5",
    ]
    assert share_groups(target, "--delete-offsets", "--group", GROUP, "--topic", TOPIC) == [
        "",
        "TOPIC            STATUS",
        f"{TOPIC} Successful",
    ]
    assert share_groups(target, "--describe", "--group", GROUP) == [
        "",
        f"Share group '{GROUP}' has no offset information.",
    ]
    assert share_groups(target, "--delete", "--group", GROUP) == [
        f"Deletion of requested share groups ('{GROUP}') was successful."
    ]
    assert share_groups(target, "--list") == []
