"""The tools against a three-broker ZooKeeper-mode cluster, through the entry point.

`delete-records` at the leader reaches the followers, so a new leader keeps the records deleted.

`topics --describe` with --under-replicated-partitions / --unavailable-partitions /
--under-min-isr-partitions / --at-min-isr-partitions once a broker is killed (its replicas leave the
ISR; a partition it alone held loses its leader), and `configs` for a
broker other than the one the tool first reached (a broker's configs are asked of that broker).

`leader-election`: a preferred election after the preferred replica came back, and an unclean one
of an offline partition whose only live replica is outside the ISR; records produced with acks=all
stay readable.
"""

from __future__ import annotations

import json
import subprocess

from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.client import KafkaClient
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import ElectLeadersRequest
from odradek.testing.cluster import eventually
from tests.cli.tooling import ok, run_odradek
from tests.exit_report import exit_report

DOWN = 3
FAILOVER_TIMEOUT_S = 60.0


def describe(bootstrap: str, topic: str, *flags: str, pattern: str = "{}-.*") -> list[str]:
    """`topics --describe` lines for the topics `pattern` (formatted with `topic`) matches."""
    regex = pattern.format(topic)
    return ok("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", regex, *flags).splitlines()


def test_partition_filters_and_broker_configs(start_cluster, unique_topic: str) -> None:
    cluster = start_cluster()
    topic = unique_topic.replace("_", "-")
    replicated, single = f"{topic}-replicated", f"{topic}-single"
    create = ["topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic"]
    ok(
        *create,
        replicated,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
    ok(*create, single, "--replica-assignment", f"{DOWN},1")
    eventually(lambda: describe(cluster.bootstrap, topic, "--under-replicated-partitions") == [] or None,
               FAILOVER_TIMEOUT_S, "every replica in sync")  # fmt: skip
    for flag in ("--unavailable-partitions", "--under-min-isr-partitions"):
        assert describe(cluster.bootstrap, topic, flag) == []
    assert describe(cluster.bootstrap, replicated, "--at-min-isr-partitions", pattern="{}") == []

    configs = [
        "configs",
        "--bootstrap-server",
        cluster.bootstrap,
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
    ]
    altered = ok(*configs, "--alter", "--add-config", "log.cleaner.threads=2")
    assert altered == "Completed updating config for broker 2.\n"
    described = ok(*configs, "--describe").splitlines()
    assert described[0] == "Dynamic configs for broker 2 are:"
    assert described[1].startswith("  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:")

    cluster.brokers[DOWN].kill()
    alive = ",".join(cluster.brokers[b].bootstrap for b in (1, 2))
    unavailable = eventually(
        lambda: describe(alive, topic, "--unavailable-partitions") or None,
        FAILOVER_TIMEOUT_S,
        "a leaderless partition",
    )
    assert unavailable == [f"\tTopic: {single}\tPartition: 0\tLeader: none\tReplicas: {DOWN}\tIsr: {DOWN}"]

    def shrunk() -> list[str] | None:
        lines = describe(alive, topic, "--under-replicated-partitions")
        return lines if len(lines) == 2 else None

    for partition, line in enumerate(
        eventually(shrunk, FAILOVER_TIMEOUT_S, "the ISRs without the dead broker")
    ):
        fields = dict(field.split(": ") for field in line.strip("\t").split("\t"))
        assert (fields["Topic"], fields["Partition"]) == (replicated, str(partition))
        assert sorted(fields["Replicas"].split(",")) == ["1", "2", "3"]
        assert sorted(fields["Isr"].split(",")) == ["1", "2"]


def test_deleted_records_stay_deleted_after_the_leader_dies(
    start_cluster, unique_topic: str, tmp_path
) -> None:
    cluster = start_cluster()
    create = ["topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", unique_topic]
    ok(*create, "--partitions", "1", "--replication-factor", "3")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    for i in range(10):
        producer.produce(unique_topic, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": unique_topic, "partition": 0, "offset": 6}]}))
    deleted = ok("delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(plan))
    assert deleted.splitlines()[-1] == f"partition: {unique_topic}-0\tlow_watermark: 6"
    producer.produce(unique_topic, b"after", partition=0)  # its replication carries the new log start
    assert producer.flush(30) == 0

    (line,) = [x for x in describe(cluster.bootstrap, unique_topic.rsplit("-", 1)[0]) if "\tPartition: 0" in x
               and f"Topic: {unique_topic}\t" in x]  # fmt: skip
    leader = int(line.split("\tLeader: ")[1].split("\t")[0])
    cluster.brokers[leader].kill()
    alive = ",".join(p.bootstrap for b, p in cluster.brokers.items() if b != leader)

    def low_watermark() -> int | None:
        consumer = Consumer({"bootstrap.servers": alive, "group.id": "low", "log_level": 3})
        try:
            return consumer.get_watermark_offsets(TopicPartition(unique_topic, 0), timeout=5)[0]
        except KafkaException:
            return None
        finally:
            consumer.close()

    assert eventually(low_watermark, FAILOVER_TIMEOUT_S, "a new leader's low watermark") == 6


def produce_all(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Produce `values` to partition 0 with acks=all; every one must be acknowledged."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3})
    for value in values:
        producer.produce(
            topic, value, partition=0, on_delivery=lambda err, _msg: err and failures.append(err)
        )
    assert producer.flush(60) == 0 and failures == []


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first `count` values of partition 0, from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "elect", "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(600):
            values += [m.value() for m in consumer.consume(count - len(values), timeout=0.1) if not m.error()]
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def leader_in_metadata(bootstrap: str, topic: str) -> int:
    """Partition 0's leader as a Metadata request answers."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def elect(bootstrap: str, election_type: str, topic: str) -> subprocess.CompletedProcess[str]:
    return run_odradek("leader-election", "--bootstrap-server", bootstrap, "--election-type", election_type,
                       "--topic", topic, "--partition", "0")  # fmt: skip


def lose_preferred_leadership(cluster, topic: str) -> None:
    """Broker 1 (partition 0's preferred replica) stops, broker 2 takes over, 1 comes back into the ISR."""
    cluster.brokers[1].stop()
    eventually(lambda: cluster.state(topic, 0)["leader"] == 2, FAILOVER_TIMEOUT_S, "broker 2 leads")
    cluster.brokers[1].start()
    eventually(lambda: 1 in cluster.state(topic, 0)["isr"], FAILOVER_TIMEOUT_S, "broker 1 back in the ISR")
    assert leader_in_metadata(cluster.bootstrap, topic) == 2


def test_a_preferred_election_moves_leadership_back_without_losing_records(
    start_cluster, unique_topic
) -> None:
    """Broker 1, the preferred replica, stops and comes back (auto leader rebalance off): broker 2 still
    leads until `leader-election --election-type preferred`; every acks=all record stays readable.
    confluent-kafka's AdminClient.elect_leaders then answers the same election as already done, and
    elects broker 1 again after a second restart."""
    cluster = start_cluster(**{"auto.leader.rebalance.enable": "false"})
    ok("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", unique_topic,
       "--replica-assignment", "1:2:3")  # fmt: skip
    before = [b"before-%d" % i for i in range(10)]
    produce_all(cluster.bootstrap, unique_topic, before)
    lose_preferred_leadership(cluster, unique_topic)

    done = elect(cluster.bootstrap, "preferred", unique_topic)
    assert (done.returncode, done.stdout) == (
        0, f"Successfully completed leader election (PREFERRED) for partitions {unique_topic}-0\n"
    ), exit_report(done)  # fmt: skip
    assert cluster.state(unique_topic, 0)["leader"] == 1
    eventually(
        lambda: leader_in_metadata(cluster.bootstrap, unique_topic) == 1, 30, "Metadata names broker 1"
    )
    after = [b"after-%d" % i for i in range(10)]
    produce_all(cluster.bootstrap, unique_topic, after)
    assert read_all(cluster.bootstrap, unique_topic, 20) == before + after

    again = elect(cluster.bootstrap, "PREFERRED", unique_topic)
    assert again.stdout == f"Valid replica already elected for partitions {unique_topic}-0\n"
    other = cluster.brokers[next(b for b in cluster.brokers if b != cluster.controller())]
    asked = [ElectLeadersRequest.TopicPartitions(topic=unique_topic, partitions=[0])]
    with KafkaClient(other.bootstrap) as client:
        refused = client.connect_to(other.host, other.port).request(
            ApiKey.ELECT_LEADERS, ElectLeadersRequest(topic_partitions=asked)
        )
    assert refused.error_code == ErrorCode.NOT_CONTROLLER  # not the controller: the client looks again
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
    partition = [TopicPartition(unique_topic, 0)]
    (error,) = admin.elect_leaders(ElectionType.PREFERRED, partition).result(timeout=30).values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED

    lose_preferred_leadership(cluster, unique_topic)
    assert list(admin.elect_leaders(ElectionType.PREFERRED, partition).result(timeout=30).values()) == [None]
    assert cluster.state(unique_topic, 0)["leader"] == 1
    assert read_all(cluster.bootstrap, unique_topic, 20) == before + after


def test_an_unclean_election_brings_an_offline_partition_back(start_cluster, unique_topic) -> None:
    """Replicas 2 and 3: 3 dies (leaving the ISR), then 2 (the partition is offline with ISR [2]); 3
    comes back outside the ISR and, unclean.leader.election.enable being off, the partition stays
    offline until `leader-election --election-type unclean`, which makes 3 leader. The records
    were on 3 before it died, so they all read back."""
    cluster = start_cluster()
    ok("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", unique_topic,
       "--replica-assignment", "2:3")  # fmt: skip
    values = [b"v%d" % i for i in range(10)]
    produce_all(cluster.bootstrap, unique_topic, values)
    cluster.brokers[3].kill()
    eventually(lambda: cluster.state(unique_topic, 0)["isr"] == [2], FAILOVER_TIMEOUT_S, "ISR without 3")
    cluster.brokers[2].kill()
    eventually(
        lambda: cluster.state(unique_topic, 0)["leader"] == -1, FAILOVER_TIMEOUT_S, "the partition offline"
    )
    cluster.brokers[3].start()
    eventually(lambda: 3 in cluster.live_broker_ids(), FAILOVER_TIMEOUT_S, "broker 3 registered")
    alive = ",".join(cluster.brokers[b].bootstrap for b in (1, 3))
    refused = elect(alive, "preferred", unique_topic)
    assert refused.returncode == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in refused.stdout, exit_report(
        refused
    )
    assert cluster.state(unique_topic, 0)["leader"] == -1

    done = elect(alive, "unclean", unique_topic)
    assert (done.returncode, done.stdout) == (
        0, f"Successfully completed leader election (UNCLEAN) for partitions {unique_topic}-0\n"
    ), exit_report(done)  # fmt: skip
    assert (cluster.state(unique_topic, 0)["leader"], cluster.state(unique_topic, 0)["isr"]) == (3, [3])
    eventually(lambda: leader_in_metadata(alive, unique_topic) == 3, 30, "Metadata names broker 3")
    assert read_all(alive, unique_topic, 10) == values
