"""Group consumers of aiokafka, kafka-python and kcat (-G) against a real broker process.

Apache Kafka's behaviour is the oracle: two members of one group split the topic's partitions
between them (each client's own assignor: aiokafka round robin, kafka-python range), together read
every record exactly once, and their commits are what a later member of the group resumes from.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence, Set

from aiokafka import AIOKafkaConsumer

from tests.compat import helpers

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="(read|open)_text is deprecated", category=DeprecationWarning)
    from kafka import KafkaConsumer

TIMEOUT_S = helpers.TIMEOUT_S
PARTITIONS = 4


def produce_everywhere(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    produced = set()
    for partition in range(PARTITIONS):
        offsets = helpers.produce(
            bootstrap, topic, [b"r%d" % i for i in range(per_partition)], partition=partition
        )
        produced |= {(partition, offset) for offset in offsets}
    return produced


def split_between_two(assignments: Sequence[Set[int]]) -> bool:
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
                metadata_max_age_ms=500,  # a leader that joined before it knew the partitions rejoins soon
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
    assert helpers.committed(broker.bootstrap, group, unique_topic, PARTITIONS) == [25] * PARTITIONS


def wait_until_known(consumer: KafkaConsumer, topic: str) -> None:
    """Until the consumer's metadata holds every partition of `topic`, before its first poll().

    kafka-python 3.0.12 joins the group in its first poll() without waiting for the metadata of the
    topics it subscribed to (its first Metadata request naming them leaves ~100 ms after the
    bootstrap one). A leader that assigned without the partitions ("No partition metadata for topic")
    rejoins when its metadata shows them, and such a rejoin is dropped half-way when a poll() returns
    between the leader's assignment and its SyncGroup answer: `join_group_async` loops only while
    `need_rejoin()`, which the assignment itself made false, so the member never applies its
    assignment nor heartbeats again, and its session expires. `topics()` is a blocking Metadata round
    trip; the coordinator sees its answer before it returns, so the first join assigns every partition.
    """
    deadline = time.monotonic() + TIMEOUT_S
    while topic not in consumer.topics() or consumer.partitions_for_topic(topic) != set(range(PARTITIONS)):
        assert time.monotonic() < deadline, f"kafka-python never saw the partitions of {topic}"


class KafkaPythonMember:
    """A kafka-python group consumer polled from its own thread, as an application runs it:
    kafka-python joins inside poll(), so one thread polling two members deadlocks a rebalance
    (the second member's JoinGroup waits for the first, which waits to be polled)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        wait_until_known(self.consumer, topic)
        self.assigned: frozenset[int] = frozenset()
        self.consumed: list[tuple[int, int]] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batches = self.consumer.poll(timeout_ms=100)
                records = [(r.partition, r.offset) for batch in batches.values() for r in batch]
                if records:
                    self.consumer.commit()
                    self.consumed += records
                self.assigned = frozenset(tp.partition for tp in self.consumer.assignment())
        except BaseException as exc:
            self.failure = exc
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S)


def wait_for(members: list[KafkaPythonMember], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert all(m.failure is None for m in members), [m.failure for m in members]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kafka_python_group_members_split_partitions_and_commit(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    group = f"group-{unique_topic}"
    members = [KafkaPythonMember(broker.bootstrap, group, unique_topic) for _ in range(2)]
    try:
        wait_for(
            members, lambda: split_between_two([m.assigned for m in members]), "the partitions to be split"
        )
        produced = produce_everywhere(broker.bootstrap, unique_topic, 25)
        wait_for(members, lambda: sum(len(m.consumed) for m in members) >= len(produced), "every record")
    finally:
        for member in members:
            member.stop()
    consumed = [record for member in members for record in member.consumed]
    assert not [r for r, n in Counter(consumed).items() if n > 1]
    assert set(consumed) == produced
    assert helpers.committed(broker.bootstrap, group, unique_topic, PARTITIONS) == [25] * PARTITIONS


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
    assert helpers.committed(broker.bootstrap, group, unique_topic, 1) == [10]

    helpers.produce(broker.bootstrap, unique_topic, [b"second-%d" % i for i in range(3)])
    assert kcat_group(broker.bootstrap, group, unique_topic, 3) == [
        b"0:%d:second-%d" % (10 + i, i) for i in range(3)
    ]
