"""Moves of a replica between a real broker's two log dirs (AlterReplicaLogDirs, KIP-113), through
kafka-python's admin client (alter_replica_log_dirs, describe_log_dirs) and alter_configs, with
confluent-kafka producing and consuming.

Apache Kafka's behaviour is the oracle: a move answers at once and copies in the background, the
copy shows in DescribeLogDirs as a future replica (is_future_key) in the destination dir, the swap
loses no acknowledged record while producers keep writing (acks=all), a broker killed mid-copy
resumes the move at restart, replica.alter.log.dirs.io.max.bytes.per.second holds the copy back,
an unknown path answers LOG_DIR_NOT_FOUND and a partition not hosted yet REPLICA_NOT_AVAILABLE (and
is then created in the dir named), an offline one KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers

pytestmark = pytest.mark.slow

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
RECORD = b"x" * 1000
IN_FLIGHT = 500


@pytest.fixture
def two_dir_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    overrides = {"log.dirs": ",".join(str(d) for d in dirs)}
    with BrokerProcess(
        tmp_path / "dir-a", overrides=overrides, output_path=tmp_path / "broker.out", broker_id=1
    ) as broker:
        yield broker


def log_dirs(broker: BrokerProcess) -> tuple[str, str]:
    root = broker.data_dir.parent
    return str((root / "dir-a").resolve()), str((root / "dir-b").resolve())


def admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)


def replicas(client: KafkaAdminClient, topic: str) -> dict[tuple[str, bool], int]:
    """(log dir, is future) -> size of the topic's partition 0, from DescribeLogDirs."""
    (answer,) = client.describe_log_dirs({topic: [0]})
    found = {}
    for result in answer["log_dirs"]:
        for entry in result["topics"]:
            for partition in entry["partitions"]:
                found[(result["log_dir"], partition["is_future_key"])] = partition["partition_size"]
    return found


def wait_until(condition, what: str, timeout: float = helpers.TIMEOUT_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached after {timeout}s")


def move(client: KafkaAdminClient, topic: str, path: str) -> type[Exception]:
    (error,) = client.alter_replica_log_dirs({(topic, 0, 1): path}).values()
    return error


def set_throttle(client: KafkaAdminClient, rate: int | None) -> None:
    """Set (or delete, with None) broker 1's dynamic replica.alter.log.dirs.io.max.bytes.per.second."""
    change = ("DELETE", None) if rate is None else ("SET", str(rate))
    client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={THROTTLE: change})])


def produce_values(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    helpers.produce(bootstrap, topic, [b"%d:" % i + RECORD for i in range(start, start + count)], acks="all")


def values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    messages = helpers.consume(bootstrap, topic, count)
    assert [m.offset() for m in messages] == list(range(count))
    return [m.value() for m in messages]


class BackgroundProducer:
    """confluent-kafka with acks=all producing numbered records until stopped; records every
    acknowledged value and every error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: list[bytes] = []
        self.errors: list[object] = []
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, **helpers.QUIET}
        )
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, b"live-%d" % sent, partition=0, on_delivery=self._on_delivery)
            sent += 1
            self._producer.poll(0.001)
            while len(self._producer) > IN_FLIGHT and not self._stop.is_set():
                self._producer.poll(0.01)  # at most IN_FLIGHT unacknowledged: the local queue never fills

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        assert self._producer.flush(helpers.TIMEOUT_S) == 0


def test_a_move_under_acks_all_load_loses_nothing(two_dir_broker: BrokerProcess, unique_topic: str) -> None:
    bootstrap = two_dir_broker.bootstrap
    dir_a, dir_b = log_dirs(two_dir_broker)
    helpers.create_topic(bootstrap, unique_topic, config={"segment.bytes": str(256 * 1024)})
    produce_values(bootstrap, unique_topic, 3000)
    client = admin(two_dir_broker)
    try:
        assert set(replicas(client, unique_topic)) == {(dir_a, False)}
        writer = BackgroundProducer(bootstrap, unique_topic)
        try:
            wait_until(lambda: len(writer.acked) > 100, "the first live acknowledgements")
            assert move(client, unique_topic, dir_b) is kafka_errors.NoError
            wait_until(lambda: set(replicas(client, unique_topic)) == {(dir_b, False)}, "the move's end")
            acked_at_swap = len(writer.acked)
            wait_until(lambda: len(writer.acked) > acked_at_swap + 100, "acknowledgements after the move")
        finally:
            writer.stop()
        assert writer.errors == []
        total = 3000 + len(writer.acked)
        got = values(bootstrap, unique_topic, total)
        assert got == [b"%d:" % i + RECORD for i in range(3000)] + writer.acked
        assert not list(Path(dir_a).glob(f"{unique_topic}-0*"))
        assert [p.name for p in Path(dir_b).glob(f"{unique_topic}-0*")] == [f"{unique_topic}-0"]
    finally:
        client.close()


def test_a_throttled_move_killed_mid_copy_resumes_at_restart(
    two_dir_broker: BrokerProcess, unique_topic: str
) -> None:
    bootstrap = two_dir_broker.bootstrap
    dir_a, dir_b = log_dirs(two_dir_broker)
    helpers.create_topic(bootstrap, unique_topic, config={"segment.bytes": str(256 * 1024)})
    produce_values(bootstrap, unique_topic, 4000)  # ~4 MB: the throttle holds back all but the first chunk
    client = admin(two_dir_broker)
    try:
        set_throttle(client, 1000)
        assert move(client, unique_topic, dir_b) is kafka_errors.NoError
        wait_until(lambda: replicas(client, unique_topic).get((dir_b, True), 0) > 0, "the first chunk copied")
        time.sleep(1.0)
        copying = replicas(client, unique_topic)
        assert set(copying) == {(dir_a, False), (dir_b, True)}
        assert 0 < copying[(dir_b, True)] < copying[(dir_a, False)]  # still copying: throttled
    finally:
        client.close()

    two_dir_broker.restart(hard=True)
    assert [p.name.endswith("-future") for p in Path(dir_b).glob(f"{unique_topic}-0*")] == [True]
    client = admin(two_dir_broker)
    try:
        wait_until(
            lambda: (dir_b, True) in replicas(client, unique_topic), "the future replica after restart"
        )
        produce_values(bootstrap, unique_topic, 100, start=4000)  # appends go on during the copy
        set_throttle(client, None)
        wait_until(lambda: set(replicas(client, unique_topic)) == {(dir_b, False)}, "the move's end")
    finally:
        client.close()
    assert values(bootstrap, unique_topic, 4100) == [b"%d:" % i + RECORD for i in range(4100)]
    two_dir_broker.restart()
    assert values(bootstrap, unique_topic, 4100)[-1] == b"4099:" + RECORD


def test_unknown_dirs_absent_replicas_and_no_op_moves(
    two_dir_broker: BrokerProcess, unique_topic: str
) -> None:
    bootstrap = two_dir_broker.bootstrap
    dir_a, dir_b = log_dirs(two_dir_broker)
    client = admin(two_dir_broker)
    try:
        assert move(client, unique_topic, "/no/such/dir") is kafka_errors.LogDirNotFoundError
        assert move(client, unique_topic, dir_b) is kafka_errors.ReplicaNotAvailableError
        helpers.create_topic(bootstrap, unique_topic)  # created where it was asked to go
        wait_until(lambda: set(replicas(client, unique_topic)) == {(dir_b, False)}, "the partition in dir b")
        assert move(client, unique_topic, dir_b) is kafka_errors.NoError  # already there: nothing to do
        assert set(replicas(client, unique_topic)) == {(dir_b, False)}
        assert [p.name for p in Path(dir_b).glob(f"{unique_topic}-0*")] == [f"{unique_topic}-0"]
        assert not list(Path(dir_a).glob(f"{unique_topic}-0*"))
        os.rename(dir_b, f"{dir_b}-away")  # an offline log dir
        try:
            assert move(client, unique_topic, dir_b) is kafka_errors.KafkaStorageError
        finally:
            os.rename(f"{dir_b}-away", dir_b)
    finally:
        client.close()
