"""The tools against a three-broker ZooKeeper-mode cluster, through the entry point.

`topics --describe` with --under-replicated-partitions / --unavailable-partitions once a broker is
killed (its replicas leave the ISR; a partition it alone held loses its leader), and `configs` for a
broker other than the one the tool first reached (a broker's configs are asked of that broker).
"""

from __future__ import annotations

from odradek.testing.cluster import eventually
from tests.cli.tooling import ok

DOWN = 3
FAILOVER_TIMEOUT_S = 60.0


def describe(bootstrap: str, topic: str, *flags: str) -> list[str]:
    return ok(
        "topics", "--bootstrap-server", bootstrap, "--describe", "--topic", f"{topic}-.*", *flags
    ).splitlines()


def test_partition_filters_and_broker_configs(start_cluster, unique_topic: str) -> None:
    cluster = start_cluster()
    topic = unique_topic.replace("_", "-")
    replicated, single = f"{topic}-replicated", f"{topic}-single"
    create = ["topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic"]
    ok(*create, replicated, "--partitions", "2", "--replication-factor", "3")
    ok(*create, single, "--replica-assignment", f"{DOWN},1")
    eventually(lambda: describe(cluster.bootstrap, topic, "--under-replicated-partitions") == [] or None,
               FAILOVER_TIMEOUT_S, "every replica in sync")  # fmt: skip
    assert describe(cluster.bootstrap, topic, "--unavailable-partitions") == []

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
