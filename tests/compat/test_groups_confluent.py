"""Consumer groups with confluent-kafka (librdkafka) against a real broker process.

Apache Kafka's behaviour is the oracle: members of one group split the partitions (eager `range` and
incremental `cooperative-sticky`), a member joining or leaving mid-stream moves partitions without
losing or repeating a record when every record is committed synchronously before the next poll,
committed offsets survive a broker restart and a kill -9, and the AdminClient lists, describes,
reads the offsets of and deletes groups.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from tests.compat import helpers

TIMEOUT_S = helpers.TIMEOUT_S
PARTITIONS = 6


class GroupMember:
    """One consumer of the group. It records (partition, offset) of a record only once that record's
    offset is committed. `start()` polls it from its own thread, as an application does: one thread
    polling several consumers that commit synchronously can stall a rebalance (a commit waits on the
    coordinator connection behind its member's parked JoinGroup while another member's revocation
    waits for that same thread to poll)."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str, name: str) -> None:
        self.name = name
        self.assigned: frozenset[int] = frozenset()
        self.consumed: list[tuple[int, int]] = []
        self.failed_commits = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                **helpers.QUIET,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = self.assigned | {p.partition for p in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = self.assigned - {p.partition for p in partitions}

    def poll_once(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        if message.error() is not None:
            raise KafkaException(message.error())
        try:
            self.consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            # Not committed (REBALANCE_IN_PROGRESS while the group completes a rebalance): read it
            # again if the partition stays here, else its next owner reads it from the last commit.
            self.failed_commits += 1
            try:
                self.consumer.seek(TopicPartition(message.topic(), message.partition(), message.offset()))
            except KafkaException:
                pass
            return
        self.consumed.append((message.partition(), message.offset()))

    def start(self) -> GroupMember:
        self._thread = threading.Thread(target=self._run, name=f"member-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll_once()
        except BaseException as exc:
            self.failure = exc

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT_S)
        self.consumer.close()


def poll_until(members: list[GroupMember], done: Callable[[], bool], what: str) -> None:
    """Poll the members from this thread until `done()`."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll_once()


def wait_until(members: list[GroupMember], done: Callable[[], bool], what: str) -> None:
    """Wait for `done()` while the members poll from their own threads."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        for member in members:
            assert member.failure is None, f"{member.name} failed: {member.failure!r}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def produce_round_robin(bootstrap: str, topic: str, count: int, tag: str) -> set[tuple[int, int]]:
    produced: set[tuple[int, int]] = set()
    for partition in range(PARTITIONS):
        values = [b"%s-%d-%d" % (tag.encode(), partition, i) for i in range(count // PARTITIONS)]
        offsets = helpers.produce(bootstrap, topic, values, partition=partition)
        produced |= {(partition, offset) for offset in offsets}
    return produced


def total(members: list[GroupMember]) -> list[tuple[int, int]]:
    return [record for member in members for record in list(member.consumed)]


def covers_all_partitions(members: list[GroupMember]) -> bool:
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_member_joining_and_leaving_mid_stream_consumes_every_record_once(
    broker, unique_topic: str, strategy: str
) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, PARTITIONS)
    group = f"group-{unique_topic}"
    produced = produce_round_robin(broker.bootstrap, unique_topic, 120, "first")
    first = GroupMember(broker.bootstrap, group, unique_topic, strategy, "first").start()
    second = GroupMember(broker.bootstrap, group, unique_topic, strategy, "second").start()
    members = [first, second]
    everyone = [first, second]
    try:
        wait_until(members, lambda: len(total(everyone)) >= 40, "the first records")
        third = GroupMember(broker.bootstrap, group, unique_topic, strategy, "third").start()
        members.append(third)
        everyone.append(third)
        wait_until(members, lambda: len(set(total(everyone))) == len(produced), "the first batch")
        wait_until(
            members,
            lambda: covers_all_partitions(members) and all(m.assigned for m in members),
            "3-way split",
        )

        produced |= produce_round_robin(broker.bootstrap, unique_topic, 120, "second")
        wait_until(
            members, lambda: len(set(total(everyone))) >= len(produced) - 60, "part of the second batch"
        )
        first.close()
        members.remove(first)
        wait_until(members, lambda: len(set(total(everyone))) == len(produced), "the second batch")
        wait_until(members, lambda: covers_all_partitions(members), "the survivors to own every partition")

        produced |= produce_round_robin(broker.bootstrap, unique_topic, 60, "third")
        wait_until(members, lambda: len(set(total(everyone))) == len(produced), "the third batch")
    finally:
        for member in members:
            member.close()

    consumed = total(everyone)
    duplicates = [record for record, n in Counter(consumed).items() if n > 1]
    assert not duplicates, f"records consumed twice: {duplicates[:10]}"
    assert set(consumed) == produced
    assert first.consumed and third.consumed, "every member took part"


def test_committed_offsets_resume_in_a_new_consumer(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"v%d" % i for i in range(10)])
    group = f"group-{unique_topic}"
    consume_and_commit(broker.bootstrap, group, unique_topic, 4)
    member = GroupMember(broker.bootstrap, group, unique_topic, "range", "resumer")
    try:
        poll_until([member], lambda: len(member.consumed) == 6, "the rest of the records")
    finally:
        member.close()
    assert [offset for _, offset in member.consumed] == list(range(4, 10))


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    member = GroupMember(bootstrap, group, topic, "range", "committer")
    try:
        poll_until([member], lambda: len(member.consumed) >= count, f"{count} records")
    finally:
        member.close()


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_offsets_survive_broker_restart(make_broker, unique_topic: str, hard: bool) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"v%d" % i for i in range(10)])
    group = f"group-{unique_topic}"
    consume_and_commit(broker.bootstrap, group, unique_topic, 7)
    assert helpers.committed(broker.bootstrap, group, unique_topic) == [7]

    broker.restart(hard=hard)

    assert helpers.committed(broker.bootstrap, group, unique_topic) == [7]
    member = GroupMember(broker.bootstrap, group, unique_topic, "range", "after-restart")
    try:
        poll_until([member], lambda: len(member.consumed) == 3, "the uncommitted records")
    finally:
        member.close()
    assert [offset for _, offset in member.consumed] == [7, 8, 9]


def test_admin_lists_describes_reads_offsets_and_deletes_groups(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 2)
    helpers.produce(broker.bootstrap, unique_topic, [b"a%d" % i for i in range(10)], partition=0)
    helpers.produce(broker.bootstrap, unique_topic, [b"b%d" % i for i in range(5)], partition=1)
    group = f"group-{unique_topic}"
    admin = helpers.admin(broker.bootstrap)
    member = GroupMember(broker.bootstrap, group, unique_topic, "range", "described")
    try:
        poll_until([member], lambda: len(member.consumed) == 15, "every record")
        listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].state == ConsumerGroupState.STABLE
        assert not mine[0].is_simple_consumer_group

        description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(
            TIMEOUT_S
        )
        assert description.state == ConsumerGroupState.STABLE
        assert description.partition_assignor == "range" and not description.is_simple_consumer_group
        assert description.coordinator.id == 0
        (described,) = description.members
        assert described.client_id == "described" and described.host.endswith("127.0.0.1")
        assert sorted(tp.partition for tp in described.assignment.topic_partitions) == [0, 1]

        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()

    assert helpers.committed(broker.bootstrap, group, unique_topic, 2) == [10, 5]
    empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}, request_timeout=TIMEOUT_S).result(
        TIMEOUT_S
    )
    assert group in {g.group_id for g in empty.valid}
    admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert group not in {g.group_id for g in listed.valid}
    gone = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    assert gone.state == ConsumerGroupState.DEAD
    assert helpers.committed(broker.bootstrap, group, unique_topic, 2) == [-1001, -1001]  # OFFSET_INVALID


def test_lag_is_log_end_minus_committed(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    helpers.produce(broker.bootstrap, unique_topic, [b"v%d" % i for i in range(12)])
    group = f"group-{unique_topic}"
    consume_and_commit(broker.bootstrap, group, unique_topic, 5)
    (offset,) = helpers.committed(broker.bootstrap, group, unique_topic)
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **helpers.QUIET})
    try:
        _, high = probe.get_watermark_offsets(TopicPartition(unique_topic, 0), timeout=TIMEOUT_S)
    finally:
        probe.close()
    assert (offset, high, high - offset) == (5, 12, 7)
