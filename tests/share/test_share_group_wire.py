"""ShareGroupHeartbeat, ShareGroupDescribe and the share group offsets APIs over raw frames against a
broker process: a member joins and gets every partition, a second one shares them, describe shows
both, a share group's id refuses a consumer-protocol member and a classic one, a consumer group's id
refuses a share member, an unknown or non-share group is GROUP_ID_NOT_FOUND with Kafka's messages,
AlterShareGroupOffsets is refused while members remain and DescribeShareGroupOffsets reads back
what it set once the group is empty."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from odradek.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from odradek.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from odradek.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from odradek.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok, run_odradek
from tests.consumer_protocol.test_wire import call, unique
from tests.share.test_share_consumers import SETTINGS, create_topic


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("share-group-wire")
    with BrokerProcess(root / "data", overrides=SETTINGS, output_path=root / "broker.out") as process:
        yield process


def heartbeat(broker: BrokerProcess, group: str, member: str, epoch: int, topics: list[str] | None) -> Any:
    request = ShareGroupHeartbeatRequest(group, member, epoch, None, topics)
    return call(broker.bootstrap, ApiKey.SHARE_GROUP_HEARTBEAT, 1, request)


def describe(broker: BrokerProcess, group: str) -> Any:
    request = ShareGroupDescribeRequest(group_ids=[group])
    return call(broker.bootstrap, ApiKey.SHARE_GROUP_DESCRIBE, 1, request).groups[0]


def test_members_share_partitions_and_describe_shows_them(broker: BrokerProcess) -> None:
    topic, group = unique("wire-topic"), unique("wire-group")
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 2)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    joined = heartbeat(broker, group, first, 0, [topic])
    assert joined.error_code == ErrorCode.NONE and joined.member_epoch == 1
    assert [sorted(t.partitions) for t in joined.assignment.topic_partitions] == [[0, 1]]
    assert heartbeat(broker, group, second, 0, [topic]).member_epoch == 2
    moved = heartbeat(broker, group, first, 1, None)
    assert moved.member_epoch == 2 and moved.assignment is not None
    described = describe(broker, group)
    assert (described.group_state, described.group_epoch, described.assignor_name) == ("Stable", 2, "simple")
    assert sorted(m.member_id for m in described.members) == sorted([first, second])
    held = [set(p for t in m.assignment.topic_partitions for p in t.partitions) for m in described.members]
    assert held[0] | held[1] == {0, 1}
    assert heartbeat(broker, group, first, 7, None).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(broker, group, "stranger", 1, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    # a share group's id is refused to the other kinds of group
    consumer = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=[topic], topic_partitions=[],
    )  # fmt: skip
    refused = call(broker.bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, consumer)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group.",
    )

    # while members remain, offsets cannot be altered
    alter = AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
                topic, [AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(0, 0)]
            )
        ],
    )
    busy = call(broker.bootstrap, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
    assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
    for member in (first, second):
        assert heartbeat(broker, group, member, -1, None).member_epoch == -1
    assert describe(broker, group).group_state == "Empty"
    assert call(broker.bootstrap, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter).error_code == ErrorCode.NONE
    offsets = DescribeShareGroupOffsetsRequest(
        groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                group, [DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(topic, [0, 1])]
            )
        ]
    )
    read = call(broker.bootstrap, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, offsets).groups[0]
    starts = {p.partition_index: p.start_offset for t in read.topics for p in t.partitions}
    assert starts == {0: 0, 1: 0}  # 1: started at the high watermark when it was assigned


def test_groups_of_other_kinds_and_unknown_groups(broker: BrokerProcess) -> None:
    topic, group = unique("other-topic"), unique("consumer-group")
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 1)
    consumer = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=[topic], topic_partitions=[],
    )  # fmt: skip
    assert call(broker.bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, consumer).error_code == ErrorCode.NONE
    refused = heartbeat(broker, group, str(uuid.uuid4()), 0, [topic])
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {group} is not a share group.",
    )
    assert describe(broker, group).error_message == f"Group {group} is not a share group."
    missing = unique("missing")
    assert (describe(broker, missing).error_code, describe(broker, missing).error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {missing} not found.",
    )
    invalid = heartbeat(broker, unique("g"), str(uuid.uuid4()), 0, None)
    assert (invalid.error_code, invalid.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "SubscribedTopicNames must be set in first request.",
    )


def test_a_groups_own_heartbeat_interval(broker: BrokerProcess) -> None:
    topic, group = unique("interval-topic"), unique("interval-group")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, topic, 1)
    entry = ConfigEntry("share.heartbeat.interval.ms", "700", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    assert heartbeat(broker, group, str(uuid.uuid4()), 0, [topic]).heartbeat_interval_ms == 700
    other = heartbeat(broker, unique("default-group"), str(uuid.uuid4()), 0, [topic])
    assert other.heartbeat_interval_ms == SETTINGS["group.share.heartbeat.interval.ms"]


def test_assigned_share_partitions_start_at_the_reset_offset(broker: BrokerProcess) -> None:
    """share.auto.offset.reset latest (the default): a partition assigned starts at its high watermark
    then, before any ShareFetch; records produced after the assignment are the group's."""
    topic, group = unique("init-topic"), unique("init-group")
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(topic, value=b"before-%d" % i, partition=0)
    assert producer.flush(30) == 0
    assert heartbeat(broker, group, str(uuid.uuid4()), 0, [topic]).error_code == ErrorCode.NONE
    offsets = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group, None)]
    )
    read = call(broker.bootstrap, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, offsets).groups[0]
    assert [(t.topic_name, p.partition_index, p.start_offset) for t in read.topics for p in t.partitions] == [
        (topic, 0, 3)
    ]


def test_odradek_configs_sets_and_describes_a_groups_configs(broker: BrokerProcess) -> None:
    group = unique("configs-group")
    base = [
        "configs",
        "--bootstrap-server",
        broker.bootstrap,
        "--entity-type",
        "groups",
        "--entity-name",
        group,
    ]
    assert ok(*base, "--alter", "--add-config", "share.auto.offset.reset=earliest") == (
        f"Completed updating config for group {group}.\n"
    )
    assert ok(*base, "--describe").splitlines() == [
        f"Dynamic configs for group {group} are:",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
    ]
    refused = run_odradek(*base, "--alter", "--add-config", "share.auto.offset.reset=sometimes")
    assert refused.returncode == 1 and "share.auto.offset.reset" in refused.stderr
    assert ok(*base, "--alter", "--delete-config", "share.auto.offset.reset") == (
        f"Completed updating config for group {group}.\n"
    )
    assert ok(*base, "--describe").splitlines() == [f"Dynamic configs for group {group} are:"]
