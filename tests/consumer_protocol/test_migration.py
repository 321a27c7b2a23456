"""Online migration of a group between the classic and the consumer protocol with real clients
(confluent-kafka): a classic group (`group.protocol=classic`, the eager `range` or the
`cooperative-sticky` assignor) rolled to `group.protocol=consumer` one member at a time while
records flow, then rolled back, with no record lost or consumed twice by the committed offsets
(members.py's ledger). The first consumer-protocol member converts the classic group (its
committed offsets kept); the classic members go on as classic members of the consumer group; when
the last consumer-protocol member leaves, the group becomes a classic group again.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import eventually
from tests.compat import helpers
from tests.compat.helpers import QUIET
from tests.consumer_protocol.conftest import BrokerFactory
from tests.consumer_protocol.members import Crew, Ledger, committed_offsets, consumer_config, end_offsets
from tests.consumer_protocol.test_cluster_churn import PARTITIONS, NumberedProducer
from tests.consumer_protocol.test_wire import DESCRIBE_VERSION, HEARTBEAT_VERSION, call, join


def group_type(bootstrap: str, group: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    for g in listed.valid:
        if g.group_id == group:
            return str(g.type.name).lower()
    return "absent"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_group_rolled_from_classic_to_consumer_and_back_consumes_every_record_once(
    broker: BrokerProcess, strategy: str
) -> None:
    bootstrap = broker.bootstrap
    topic, group = f"rolled-{uuid.uuid4().hex[:8]}", f"rolled-{uuid.uuid4().hex[:8]}"
    helpers.create_topic(bootstrap, topic, PARTITIONS)
    ledger = Ledger()
    classic_conf: dict[str, Any] = consumer_config(
        bootstrap, group, "classic", **{"partition.assignment.strategy": strategy}
    )
    classic = Crew("classic", classic_conf, [topic], ledger)
    modern = Crew("consumer", consumer_config(bootstrap, group, "consumer"), [topic], ledger)
    producer = NumberedProducer(bootstrap, topic, 2400, per_second=200).start()
    try:
        classic.add()
        classic.add()
        eventually(lambda: classic.consuming(2), 60, "the classic members consuming")
        assert group_type(bootstrap, group) == "classic"
        # upgrade: a consumer-protocol member joins the classic group, then replaces each classic one
        modern.add()
        eventually(lambda: group_type(bootstrap, group) == "consumer", 30, "the group upgraded")
        eventually(lambda: modern.consuming(1) and classic.consuming(2), 60, "the consumer member consuming")
        classic.retire()
        modern.add()
        eventually(
            lambda: modern.consuming(2) and classic.consuming(1), 60, "a second consumer member consuming"
        )
        classic.retire()
        time.sleep(2)
        # back: classic members join the consumer group and replace the consumer-protocol ones
        classic.add()
        eventually(lambda: classic.consuming(1) and modern.consuming(2), 60, "a classic member consuming")
        modern.retire()
        classic.add()
        eventually(
            lambda: classic.consuming(2) and modern.consuming(1), 60, "a second classic member consuming"
        )
        modern.retire()  # the last consumer-protocol member: the group is downgraded
        eventually(lambda: group_type(bootstrap, group) == "classic", 30, "the group downgraded")
        producer.join()
        assert producer.errors == []
        ends = end_offsets(bootstrap, topic, PARTITIONS)

        def drained() -> bool:
            classic.keep(2)  # a member whose commit failed in a rebalance rolled back: replaced
            return committed_offsets(bootstrap, group, topic, PARTITIONS) == ends

        eventually(drained, 90, "the group's committed offsets at the end of every partition", 1.0)
    finally:
        classic.stop()
        modern.stop()
    assert classic.errors() == modern.errors() == []
    assert ledger.problems(topic, committed_offsets(bootstrap, group, topic, PARTITIONS), ends) == []
    assert ledger.total(topic) == 2400


@pytest.mark.parametrize("policy", ["downgrade", "DISABLED"])
def test_the_upgrade_is_refused_when_the_policy_disables_it(make_broker: BrokerFactory, policy: str) -> None:
    """group.consumer.migration.policy without upgrade (any case): a consumer-protocol member
    cannot join a classic group with members (GROUP_ID_NOT_FOUND, "not a consumer group", as
    Kafka answers), which stays classic with its member's partitions."""
    bootstrap = make_broker(**{"group.consumer.migration.policy": policy}).bootstrap
    topic, group = f"kept-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    helpers.create_topic(bootstrap, topic, PARTITIONS)
    classic = Crew("classic", consumer_config(bootstrap, group, "classic"), [topic], Ledger())
    producer = NumberedProducer(bootstrap, topic, 60, per_second=100).start()
    try:
        classic.add()
        eventually(lambda: classic.consuming(1), 60, "the classic member consuming")
        refused = call(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, join(group, topic))
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND, refused.error_message
        assert group_type(bootstrap, group) == "classic"
        producer.join()
        time.sleep(1)
        assert classic.consuming(1) and len(classic.running()[0].assignment) == PARTITIONS
    finally:
        classic.stop()


def test_the_upgrade_keeps_the_classic_members_partitions_and_offsets(broker: BrokerProcess) -> None:
    """Over the wire: the converted group has the classic generation as its epoch, the classic
    member keeps its assignment (so the joining member gets nothing until it is revoked), and the
    committed offsets are the classic group's."""
    bootstrap = broker.bootstrap
    topic, group = f"wire-{uuid.uuid4().hex[:8]}", f"wire-{uuid.uuid4().hex[:8]}"
    helpers.create_topic(bootstrap, topic, PARTITIONS)
    classic = Crew("classic", consumer_config(bootstrap, group, "classic"), [topic], Ledger())
    producer = NumberedProducer(bootstrap, topic, 20, per_second=100).start()
    try:
        classic.add()
        producer.join()
        eventually(
            lambda: sum(committed_offsets(bootstrap, group, topic, PARTITIONS).values()) == 20,
            60,
            "the classic commits",
        )
        joined = call(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, join(group, topic))
        assert joined.error_code == ErrorCode.NONE, joined.error_message
        assert joined.member_epoch >= 2  # past the classic generation
        described = call(
            bootstrap,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            DESCRIBE_VERSION,
            ConsumerGroupDescribeRequest(group_ids=[group]),
        ).groups[0]
        assert described.error_code == ErrorCode.NONE
        # the classic member (MemberType 0) and the joining consumer-protocol member (1)
        assert sorted(m.member_type for m in described.members) == [0, 1]
        assert sum(committed_offsets(bootstrap, group, topic, PARTITIONS).values()) == 20
    finally:
        classic.stop()
