"""Share groups end to end with confluent-kafka's ShareConsumer (librdkafka 2.16) against a broker
process: membership (ShareGroupHeartbeat), assignment of shared partitions, delivery through
ShareFetch, the group's share.auto.offset.reset set as a GROUP config, delivery counts after a
consumer dies holding records, and records acquired before a broker restart acknowledged after it.

The broker runs with a one-second acquisition lock and a six-second share session timeout; waits
are poll loops with generous deadlines, never timing assertions.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from odradek.client import KafkaClient
from odradek.client.share_admin import ShareAdmin
from odradek.protocol.errors import KafkaError
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok

SETTINGS = {
    "group.share.record.lock.duration.ms": 1000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.session.timeout.ms": 6000,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.min.heartbeat.interval.ms": 500,
    "share.coordinator.state.topic.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
}
DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("share-consumers")
    with BrokerProcess(root / "data", overrides=SETTINGS, output_path=root / "broker.out") as process:
        yield process


def bootstrap(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.port}"


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)


def earliest(admin: AdminClient, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (a GROUP config resource)."""
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(servers: str, topic: str, count: int, partitions: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": servers})
    values = set()
    for i in range(count):
        value = f"{topic}-{i}".encode()
        producer.produce(topic, value=value, partition=i % partitions)
        values.add(value)
    assert producer.flush(30) == 0
    return values


def members_holding_partitions(servers: str, group: str) -> int:
    with KafkaClient(servers) as client:
        try:
            report = ShareAdmin(client, 10).describe_share(group)
        except KafkaError:  # not created yet
            return 0
    return sum(1 for member in report.members if member.partitions)


def share_consumer(servers: str, group: str, topic: str, **extra: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": servers, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def test_group_config_share_auto_offset_reset_is_described(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(broker)})
    earliest(admin, "described")
    resource = ConfigResource(ConfigResource.Type.GROUP, "described")
    described = next(iter(admin.describe_configs([resource]).values())).result(timeout=30)
    assert described["share.auto.offset.reset"].value == "earliest"
    assert described["share.isolation.level"].value == "read_uncommitted"
    bad = ConfigResource(
        ConfigResource.Type.GROUP,
        "described",
        incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "sometimes", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(Exception, match="INVALID_CONFIG|sometimes"):
        next(iter(admin.incremental_alter_configs([bad]).values())).result(timeout=30)


def test_five_consumers_over_twelve_partitions_receive_every_record(broker: BrokerProcess) -> None:
    servers = bootstrap(broker)
    admin = AdminClient({"bootstrap.servers": servers})
    create_topic(admin, "five", 12)
    earliest(admin, "five-group")
    consumers = [share_consumer(servers, "five-group", "five") for _ in range(5)]
    seen: dict[bytes, int] = {}
    by_consumer = [0] * 5
    try:
        deadline = time.monotonic() + DEADLINE_S
        # the records go out once every member holds partitions: else the first member to join may
        # read them all before the others are assigned any
        while members_holding_partitions(servers, "five-group") < 5 and time.monotonic() < deadline:
            for consumer in consumers:
                assert [m for m in consumer.poll(0.1) if m.error() is None] == []
        expected = produce(servers, "five", 600, 12)
        while not expected <= seen.keys() and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                for message in consumer.poll(0.2):
                    if message.error() is not None:
                        continue
                    seen[message.value()] = max(seen.get(message.value(), 0), message.delivery_count())
                    by_consumer[index] += 1
    finally:
        for consumer in consumers:
            consumer.close()
    assert expected <= seen.keys()
    assert all(count >= 1 for count in seen.values())
    assert sum(1 for n in by_consumer if n) >= 2  # the partitions were spread over the members


KILLED_CONSUMER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    got = [m for m in c.poll(0.5) if m.error() is None]
    if got:
        print(len(got), flush=True)
        time.sleep(3600)  # holds its records, never acknowledges
"""


def test_records_of_a_killed_consumer_are_delivered_again(broker: BrokerProcess, tmp_path: Path) -> None:
    servers = bootstrap(broker)
    admin = AdminClient({"bootstrap.servers": servers})
    create_topic(admin, "killed", 1)
    earliest(admin, "killed-group")
    expected = produce(servers, "killed", 50, 1)
    script = tmp_path / "holder.py"
    script.write_text(KILLED_CONSUMER)
    holder = subprocess.Popen(
        [sys.executable, str(script), servers, "killed-group", "killed"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip(), "the holding consumer got no records"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    consumer = share_consumer(servers, "killed-group", "killed")
    counts: dict[bytes, int] = {}
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not expected <= counts.keys() and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    counts[message.value()] = message.delivery_count()
    finally:
        consumer.close()
    assert expected <= counts.keys()
    # the records the killed consumer held come back after their lock expired: second delivery
    assert any(count >= 2 for count in counts.values())


def test_a_broker_restart_between_acquisition_and_acknowledgement(tmp_path: Path) -> None:
    """Records acquired before the broker restarts and acknowledged after it: none is lost, every one
    is delivered again after the restart (acquisitions are not written), and once acknowledged by
    the new session nothing more comes; the group's membership and configs survive the restart."""
    with BrokerProcess(tmp_path / "data", overrides=SETTINGS, output_path=tmp_path / "broker.out") as process:
        servers = bootstrap(process)
        admin = AdminClient({"bootstrap.servers": servers})
        create_topic(admin, "restart", 2)
        earliest(admin, "restart-group")
        expected = produce(servers, "restart", 40, 2)
        consumer = share_consumer(
            servers, "restart-group", "restart", **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            held: list[object] = []
            deadline = time.monotonic() + DEADLINE_S
            while not held and time.monotonic() < deadline:
                held = [m for m in consumer.poll(0.5) if m.error() is None]
            assert held, "nothing was acquired before the restart"
            process.restart(hard=True)
            for message in held:
                consumer.acknowledge(message)
            try:
                consumer.commit_sync()
            except Exception:  # noqa: BLE001 - the session died with the broker: Kafka's clients see an error
                pass
            counts: dict[bytes, int] = {}
            deadline = time.monotonic() + DEADLINE_S
            while not expected <= counts.keys() and time.monotonic() < deadline:
                batch = [m for m in consumer.poll(0.5) if m.error() is None]
                for message in batch:
                    counts[message.value()] = message.delivery_count()
                    consumer.acknowledge(message)
                if batch:
                    consumer.commit_sync()
            assert expected <= counts.keys()
        finally:
            consumer.close()
        assert "restart-group" in run_tool_list(servers)
        late = share_consumer(servers, "restart-group", "restart")
        try:
            leftovers = [m for _ in range(6) for m in late.poll(0.5) if m.error() is None]
        finally:
            late.close()
        assert leftovers == []


def run_tool_list(servers: str) -> list[str]:
    return ok("share-groups", "--bootstrap-server", servers, "--list").split()
