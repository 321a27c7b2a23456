"""KIP-848 consumer groups with confluent-kafka (librdkafka 2.16, `group.protocol=consumer`) against a
real broker process: ConsumerGroupHeartbeat assignments, the server-side assignors, regex
subscriptions, ConsumerGroupDescribe through the AdminClient, committed offsets and a broker restart.

Each test waits with poll loops under generous deadlines (a loaded 2-core machine), never on timing.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException
from confluent_kafka.admin import ConsumerGroupDescription, NewPartitions

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers
from tests.consumer_protocol.conftest import BrokerFactory

DEADLINE_S = 60.0
PARTITIONS = 4


def unique(hint: str) -> str:
    return f"{hint}-{uuid.uuid4().hex[:10]}"


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **helpers.QUIET,
            **conf,
        }
    )


def fill(
    bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS, tag: str = "v"
) -> set[bytes]:
    """Create nothing; produce `per_partition` records to each partition; their values."""
    values: set[bytes] = set()
    for p in range(partitions):
        batch = [f"{tag}-{p}-{i}".encode() for i in range(per_partition)]
        helpers.produce(bootstrap, topic, batch, partition=p)
        values.update(batch)
    return values


def poll_until(consumers: list[Consumer], done: Callable[[], bool], seen: dict[int, list[bytes]]) -> None:
    """Poll every consumer in turn until `done()`; the values each read, by consumer index."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for the group"
        for index, member in enumerate(consumers):
            message = member.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.setdefault(index, []).append(message.value() or b"")


def assigned(member: Consumer) -> set[int]:
    return {tp.partition for tp in member.assignment()}


def describe(bootstrap: str, group: str) -> ConsumerGroupDescription:
    client = helpers.admin(bootstrap)  # must outlive the future
    result = client.describe_consumer_groups([group], request_timeout=helpers.TIMEOUT_S)
    return result[group].result(helpers.TIMEOUT_S)


def test_one_consumer_reads_every_record_of_a_multi_partition_topic(broker: BrokerProcess) -> None:
    topic, group = unique("all"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    expected = fill(broker.bootstrap, topic, 10)
    member = consumer(broker.bootstrap, group)
    try:
        member.subscribe([topic])
        seen: dict[int, list[bytes]] = {}
        poll_until([member], lambda: len(seen.get(0, [])) >= len(expected), seen)
        assert sorted(seen[0]) == sorted(expected)
        assert assigned(member) == set(range(PARTITIONS))
        description = describe(broker.bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER
        assert description.partition_assignor == "uniform"
        assert [m.member_id for m in description.members] == [member.memberid()]
    finally:
        member.close()


def test_two_consumers_share_the_partitions_and_one_takes_all_when_the_other_leaves(
    broker: BrokerProcess,
) -> None:
    topic, group = unique("share"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    first, second = consumer(broker.bootstrap, group), consumer(broker.bootstrap, group)
    try:
        first.subscribe([topic])
        second.subscribe([topic])
        seen: dict[int, list[bytes]] = {}
        poll_until(
            [first, second],
            lambda: len(assigned(first)) == len(assigned(second)) == PARTITIONS // 2,
            seen,
        )
        assert assigned(first).isdisjoint(assigned(second))
        assert assigned(first) | assigned(second) == set(range(PARTITIONS))
        second.close()
        poll_until([first], lambda: assigned(first) == set(range(PARTITIONS)), seen)
        expected = fill(broker.bootstrap, topic, 5)
        poll_until([first], lambda: expected <= set(seen.get(0, [])), seen)
    finally:
        first.close()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_each_remote_assignor_splits_the_partitions(broker: BrokerProcess, assignor: str) -> None:
    topic, group = unique(assignor), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [consumer(broker.bootstrap, group, **{"group.remote.assignor": assignor}) for _ in range(2)]
    try:
        for member in members:
            member.subscribe([topic])
        poll_until(members, lambda: all(len(assigned(m)) == PARTITIONS // 2 for m in members), {})
        description = describe(broker.bootstrap, group)
        assert description.partition_assignor == assignor
        assert len(description.members) == 2
        if assignor == "range":  # contiguous ranges, the first to the member id that sorts first
            by_id = sorted(members, key=lambda m: m.memberid())
            assert [assigned(m) for m in by_id] == [{0, 1}, {2, 3}]
    finally:
        for member in members:
            member.close()


def test_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    prefix, group = unique("rx"), unique("g")
    first = f"{prefix}-topic-a"
    helpers.create_topic(broker.bootstrap, first, 2)
    helpers.create_topic(broker.bootstrap, unique("elsewhere"), 1)
    member = consumer(broker.bootstrap, group)
    try:
        member.subscribe([f"^{prefix}-topic-.*"])
        poll_until([member], lambda: {tp.topic for tp in member.assignment()} == {first}, {})
        later = f"{prefix}-topic-b"
        helpers.create_topic(broker.bootstrap, later, 3)
        expected = fill(broker.bootstrap, later, 3, partitions=3)
        seen: dict[int, list[bytes]] = {}
        poll_until([member], lambda: expected <= set(seen.get(0, [])), seen)
        assert {(tp.topic, tp.partition) for tp in member.assignment()} == {
            (first, 0),
            (first, 1),
            (later, 0),
            (later, 1),
            (later, 2),
        }
    finally:
        member.close()


def test_committed_offsets_are_where_the_next_consumer_of_the_group_resumes(broker: BrokerProcess) -> None:
    topic, group = unique("resume"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    before = fill(broker.bootstrap, topic, 5, tag="before")
    member = consumer(broker.bootstrap, group)
    seen: dict[int, list[bytes]] = {}
    try:
        member.subscribe([topic])
        poll_until([member], lambda: len(seen.get(0, [])) >= len(before), seen)
        member.commit(asynchronous=False)
    finally:
        member.close()
    committed = helpers.committed(broker.bootstrap, group, topic, PARTITIONS)
    assert committed == [5] * PARTITIONS
    after = fill(broker.bootstrap, topic, 3, tag="after")
    successor = consumer(broker.bootstrap, group)
    seen = {}
    try:
        successor.subscribe([topic])
        poll_until([successor], lambda: len(seen.get(0, [])) >= len(after), seen)
        time.sleep(0.5)  # anything more it would read (nothing: it resumed at the commit)
        poll_until([successor], lambda: True, seen)
        assert set(seen[0]) == after
    finally:
        successor.close()


def test_a_broker_restart_keeps_the_group_its_epoch_and_assignment(make_broker: BrokerFactory) -> None:
    broker = make_broker()
    topic, group = unique("restart"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    member = consumer(broker.bootstrap, group)
    try:
        member.subscribe([topic])
        poll_until([member], lambda: assigned(member) == set(range(PARTITIONS)), {})
        # a second member joins and leaves: the group epoch moves past what a new group would start at
        visitor = consumer(broker.bootstrap, group)
        visitor.subscribe([topic])
        poll_until([member, visitor], lambda: len(assigned(visitor)) == PARTITIONS // 2, {})
        visitor.close()
        poll_until([member], lambda: assigned(member) == set(range(PARTITIONS)), {})
        before = describe(broker.bootstrap, group)
        assert [m.member_id for m in before.members] == [member.memberid()]
        epochs_before = logged_epochs(broker.output_tail(1 << 22), group)
        assert epochs_before and epochs_before[-1] >= 3, epochs_before
        log_size = len(broker.output_tail(1 << 22))

        broker.restart()
        expected = fill(broker.bootstrap, topic, 4, tag="after-restart")
        seen: dict[int, list[bytes]] = {}
        poll_until([member], lambda: expected <= set(seen.get(0, [])), seen)
        after = describe_when_loaded(broker.bootstrap, group)
        assert [m.member_id for m in after.members] == [member.memberid()]
        assert {tp.partition for tp in after.members[0].assignment.topic_partitions} == set(range(PARTITIONS))
        # the group came back from __consumer_offsets: it was not created again, and no epoch went back
        restarted_log = broker.output_tail(1 << 22)[log_size:]
        assert f"Consumer group {group} created" not in restarted_log
        assert all(epoch > epochs_before[-1] for epoch in logged_epochs(restarted_log, group))
    finally:
        member.close()


def describe_when_loaded(bootstrap: str, group: str) -> ConsumerGroupDescription:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return describe(bootstrap, group)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def logged_epochs(log: str, group: str) -> list[int]:
    """The group epochs a broker log shows (`Consumer group <g> moved to epoch N ...`), in order."""
    marker = f"Consumer group {group} moved to epoch "
    return [int(line.split(marker)[1].split()[0]) for line in log.splitlines() if marker in line]


def test_a_static_member_restarting_takes_over_its_partitions(broker: BrokerProcess) -> None:
    topic, group = unique("static"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    other = consumer(broker.bootstrap, group, **{"group.instance.id": "other"})
    first = consumer(broker.bootstrap, group, **{"group.instance.id": "instance-1"})
    try:
        other.subscribe([topic])
        first.subscribe([topic])
        poll_until([other, first], lambda: len(assigned(first)) == len(assigned(other)) == 2, {})
        held = assigned(first)
        epoch = logged_epochs(broker.output_tail(1 << 22), group)[-1]
        first.close()  # a static member leaves temporarily (epoch -2): its partitions stay its own
        successor = consumer(broker.bootstrap, group, **{"group.instance.id": "instance-1"})
        try:
            successor.subscribe([topic])
            poll_until([other, successor], lambda: assigned(successor) == held, {})
            assert assigned(other) == set(range(PARTITIONS)) - held
            # neither the temporary leave nor the takeover moved the group epoch
            assert logged_epochs(broker.output_tail(1 << 22), group)[-1] == epoch
            description = describe(broker.bootstrap, group)
            instances = sorted(m.group_instance_id or "" for m in description.members)
            assert instances == ["instance-1", "other"]
        finally:
            successor.close()
    finally:
        other.close()


def test_partitions_added_to_a_subscribed_topic_are_assigned(broker: BrokerProcess) -> None:
    topic, group = unique("grow"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, 2)
    member = consumer(broker.bootstrap, group)
    try:
        member.subscribe([topic])
        poll_until([member], lambda: assigned(member) == {0, 1}, {})
        client = helpers.admin(broker.bootstrap)
        client.create_partitions([NewPartitions(topic, 4)])[topic].result(helpers.TIMEOUT_S)
        helpers.wait_for_leaders(broker.bootstrap, topic, 4)
        poll_until([member], lambda: assigned(member) == {0, 1, 2, 3}, {})
    finally:
        member.close()


MEMBER_SCRIPT = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "log_level": 3})
consumer.subscribe([sys.argv[3]])
while not consumer.assignment():
    consumer.poll(0.2)
print("assigned", flush=True)
while True:
    consumer.poll(0.2)
"""


def test_a_member_killed_is_fenced_after_its_session_and_the_other_gets_everything(
    make_broker: BrokerFactory,
) -> None:
    broker = make_broker(
        **{"group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 6000}
    )
    topic, group = unique("session"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, PARTITIONS)
    doomed = subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    survivor = consumer(broker.bootstrap, group)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        poll_until([survivor], lambda: len(assigned(survivor)) == PARTITIONS // 2, {})
        doomed.kill()  # no leave: the coordinator learns of it from the missed heartbeats only
        poll_until([survivor], lambda: assigned(survivor) == set(range(PARTITIONS)), {})
        assert "session timeout" in broker.output_tail(1 << 22)
    finally:
        doomed.kill()
        doomed.wait()
        if doomed.stdout is not None:
            doomed.stdout.close()
        survivor.close()


def test_the_admin_client_lists_by_type_and_deletes_an_empty_group(broker: BrokerProcess) -> None:
    topic, group = unique("admin"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, 2)
    member = consumer(broker.bootstrap, group)
    try:
        member.subscribe([topic])
        poll_until([member], lambda: assigned(member) == {0, 1}, {})
        client = helpers.admin(broker.bootstrap)

        def listed(kind: ConsumerGroupType) -> dict[str, ConsumerGroupType]:
            result = client.list_consumer_groups(types={kind}, request_timeout=helpers.TIMEOUT_S)
            return {g.group_id: g.type for g in result.result(helpers.TIMEOUT_S).valid}

        assert listed(ConsumerGroupType.CONSUMER).get(group) == ConsumerGroupType.CONSUMER
        assert group not in listed(ConsumerGroupType.CLASSIC)
        refused = client.delete_consumer_groups([group], request_timeout=helpers.TIMEOUT_S)[group]
        with pytest.raises(KafkaException) as raised:
            refused.result(helpers.TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()
    client.delete_consumer_groups([group], request_timeout=helpers.TIMEOUT_S)[group].result(helpers.TIMEOUT_S)
    assert group not in listed(ConsumerGroupType.CONSUMER)


def test_a_classic_consumer_joins_a_consumer_protocol_group_as_a_classic_member(
    broker: BrokerProcess,
) -> None:
    """Online migration (migration.py): a classic consumer's JoinGroup to a consumer group with
    members makes it a classic member of that group; the partitions are shared, one each."""
    topic, group = unique("mixed"), unique("g")
    helpers.create_topic(broker.bootstrap, topic, 2)
    member = consumer(broker.bootstrap, group)
    classic = consumer(broker.bootstrap, group, **{"group.protocol": "classic"})
    try:
        member.subscribe([topic])
        poll_until([member], lambda: assigned(member) == {0, 1}, {})
        classic.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while not (len(assigned(member)) == 1 and len(assigned(classic)) == 1):
            assert time.monotonic() < deadline, (assigned(member), assigned(classic))
            member.poll(0.1)
            message = classic.poll(0.2)
            assert message is None or message.error() is None, message.error()
        assert assigned(member) | assigned(classic) == {0, 1}
    finally:
        classic.close()
        member.close()
