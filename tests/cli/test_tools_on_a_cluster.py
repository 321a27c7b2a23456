"""The tools against a three-broker ZooKeeper-mode cluster, through the entry point.

`delete-records` at the leader reaches the followers, so a new leader keeps the records deleted.

`topics --describe` with --under-replicated-partitions / --unavailable-partitions /
--under-min-isr-partitions / --at-min-isr-partitions once a broker is killed (its replicas leave the
ISR; a partition it alone held loses its leader), and `configs` for a
broker other than the one the tool first reached (a broker's configs are asked of that broker).
"""

from __future__ import annotations

import json

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from odradek.testing.cluster import eventually
from tests.cli.tooling import ok

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
