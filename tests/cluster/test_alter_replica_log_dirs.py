"""A follower's replica moved between its broker's two log dirs (AlterReplicaLogDirs, kafka-python's
admin client) while an acks=all producer writes (confluent-kafka) on a real three-broker cluster:
the move completes while the follower keeps fetching, the follower stays in the ISR, its moved log
ends byte for byte the leader's, and everything acknowledged reads back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from kafka import errors as kafka_errors

from odradek.testing.cluster import LocalCluster, eventually
from tests.compat.helpers import admin, consume, produce
from tests.compat.test_alter_replica_log_dirs import RECORD, BackgroundProducer

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


def log_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def replica_dirs(client: KafkaAdminClient, broker_id: int, topic: str) -> set[tuple[str, bool]]:
    (answer,) = client.describe_log_dirs({topic: [0]}, brokers=[broker_id])
    return {
        (result["log_dir"], partition["is_future_key"])
        for result in answer["log_dirs"]
        for entry in result["topics"]
        for partition in entry["partitions"]
    }


def test_a_follower_moves_between_log_dirs_under_acks_all(
    start_cluster: Callable[..., LocalCluster], unique_topic: str
) -> None:
    cluster = start_cluster()
    follower = cluster.brokers[2]
    dir_b = (cluster.data_dir / "broker-2-b").resolve()
    follower.overrides["log.dirs"] = f"{follower.data_dir},{dir_b}"
    follower.restart()
    cluster.wait_for_controller(30)  # broker 2 is back in every broker's metadata, the controller's too

    topic = NewTopic(
        unique_topic,
        num_partitions=1,
        replica_assignment=[[1, 2, 3]],
        config={"segment.bytes": str(256 * 1024)},
    )
    creator = admin(cluster.bootstrap)  # must outlive its futures
    creator.create_topics([topic], operation_timeout=30)[unique_topic].result(30)
    eventually(lambda: len((cluster.state(unique_topic, 0) or {}).get("isr", ())) == 3 or None, 30, "ISR")
    produce(cluster.bootstrap, unique_topic, [b"%d:" % i + RECORD for i in range(3000)], acks="all")

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    writer = BackgroundProducer(cluster.bootstrap, unique_topic)
    try:
        eventually(lambda: len(writer.acked) > 100 or None, TIMEOUT_S, "live acknowledgements")
        (error,) = client.alter_replica_log_dirs({(unique_topic, 0, 2): str(dir_b)}).values()
        assert error is kafka_errors.NoError
        eventually(
            lambda: replica_dirs(client, 2, unique_topic) == {(str(dir_b), False)} or None,
            TIMEOUT_S,
            "the move's end",
        )
        acked_at_swap = len(writer.acked)
        eventually(lambda: len(writer.acked) > acked_at_swap + 100 or None, TIMEOUT_S, "acks after the move")
    finally:
        writer.stop()
        client.close()
    assert writer.errors == []

    total = 3000 + len(writer.acked)
    leader_log = cluster.data_dir / "broker-1" / f"{unique_topic}-0"
    moved_log = dir_b / f"{unique_topic}-0"
    eventually(
        lambda: log_bytes(moved_log) == log_bytes(leader_log) or None, TIMEOUT_S, "the follower caught up"
    )
    assert sorted(cluster.state(unique_topic, 0)["isr"]) == [1, 2, 3]  # type: ignore[index]
    assert not list(follower.data_dir.glob(f"{unique_topic}-0*"))
    got = [m.value() for m in consume(cluster.bootstrap, unique_topic, total)]
    assert got == [b"%d:" % i + RECORD for i in range(3000)] + writer.acked
