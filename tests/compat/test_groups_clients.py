"""Group consumers of aiokafka, kafka-python and kcat (-G) against a real broker process.

Apache Kafka's behaviour is the oracle: two members of one group split the topic's partitions
between them (each client's own assignor: aiokafka round robin, kafka-python range), together read
every record exactly once, and their commits are what a later member of the group resumes from.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import warnings
from collections import Counter

from aiokafka import AIOKafkaConsumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as ConfluentPartition

from tests.compat import helpers

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="(read|open)_text is deprecated", category=DeprecationWarning)
    from kafka import KafkaConsumer

TIMEOUT_S = helpers.TIMEOUT_S
PARTITIONS = 4


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    admin = helpers.admin(bootstrap)
    request = ConsumerGroupTopicPartitions(group, [ConfluentPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    return [tp.offset for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)]


def produce_everywhere(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    produced = set()
    for partition in range(PARTITIONS):
        offsets = helpers.produce(
            bootstrap, topic, [b"r%d" % i for i in range(per_partition)], partition=partition
        )
        produced |= {(partition, offset) for offset in offsets}
    return produced


def split_between_two(assignments: list[set[int]]) -> bool:
    first, second = assignments
    return bool(first) and bool(second) and not first & second and first | second == set(range(PARTITIONS))


def test_aiokafka_group_members_split_partitions_and_commit(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    group = f"group-{unique_topic}"

    async def scenario() -> list[tuple[int, int]]:
        members = [
            AIOKafkaConsumer(
                unique_topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            for _ in range(2)
        ]
        for member in members:
            await member.start()
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not split_between_two([{tp.partition for tp in m.assignment()} for m in members]):
                assert time.monotonic() < deadline, "the two members never split the partitions"
                await asyncio.gather(*(m.getmany(timeout_ms=100) for m in members))
            produced = await asyncio.to_thread(produce_everywhere, broker.bootstrap, unique_topic, 25)
            consumed: list[tuple[int, int]] = []
            while len(consumed) < len(produced):
                assert time.monotonic() < deadline + TIMEOUT_S, f"read {len(consumed)} of {len(produced)}"
                for member in members:
                    batches = await member.getmany(timeout_ms=100)
                    consumed += [(r.partition, r.offset) for records in batches.values() for r in records]
                    await member.commit()
            assert set(consumed) == produced
            return consumed
        finally:
            for member in members:
                await member.stop()

    consumed = asyncio.run(scenario())
    assert not [r for r, n in Counter(consumed).items() if n > 1]
    assert committed(broker.bootstrap, group, unique_topic, PARTITIONS) == [25] * PARTITIONS


def test_kafka_python_group_members_split_partitions_and_commit(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    group = f"group-{unique_topic}"
    members = [
        KafkaConsumer(
            unique_topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not split_between_two([{tp.partition for tp in m.assignment()} for m in members]):
            assert time.monotonic() < deadline, "the two members never split the partitions"
            for member in members:
                member.poll(timeout_ms=100)
        produced = produce_everywhere(broker.bootstrap, unique_topic, 25)
        consumed: list[tuple[int, int]] = []
        while len(consumed) < len(produced):
            assert time.monotonic() < deadline + TIMEOUT_S, f"read {len(consumed)} of {len(produced)}"
            for member in members:
                batches = member.poll(timeout_ms=100)
                consumed += [(r.partition, r.offset) for records in batches.values() for r in records]
                member.commit()
    finally:
        for member in members:
            member.close()
    assert not [r for r, n in Counter(consumed).items() if n > 1]
    assert set(consumed) == produced
    assert committed(broker.bootstrap, group, unique_topic, PARTITIONS) == [25] * PARTITIONS


def kcat_group(bootstrap: str, group: str, topic: str, count: int) -> list[bytes]:
    binary = shutil.which("kcat")
    assert binary is not None, "kcat is not installed (make test installs it)"
    args = [binary, "-b", bootstrap, "-G", group, "-c", str(count), "-f", "%p:%o:%s\n", "-q"]
    args += ["-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", topic]
    result = subprocess.run(args, capture_output=True, timeout=60)
    assert result.returncode == 0, f"kcat -G exited {result.returncode}: {result.stderr.decode()}"
    return result.stdout.splitlines()


def test_kcat_balanced_consumer_commits_and_resumes(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"first-%d" % i for i in range(10)])
    group = f"group-{unique_topic}"

    lines = kcat_group(broker.bootstrap, group, unique_topic, 10)
    assert lines == [b"0:%d:first-%d" % (i, i) for i in range(10)]
    assert committed(broker.bootstrap, group, unique_topic, 1) == [10]

    helpers.produce(broker.bootstrap, unique_topic, [b"second-%d" % i for i in range(3)])
    assert kcat_group(broker.bootstrap, group, unique_topic, 3) == [
        b"0:%d:second-%d" % (10 + i, i) for i in range(3)
    ]
