"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on the wire (raw frames against a broker process):
ApiVersions advertises them in both modes, a join's answer, Kafka's validation errors, and ACLs on a
secured broker (READ on the group, DESCRIBE on the subscribed topics, DESCRIBE on a described group)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import ApiVersionsRequest, FindCoordinatorRequest
from odradek.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from odradek.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from odradek.server.handlers import consumer_group_describe, consumer_group_heartbeat, registry
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok
from tests.compat.helpers import create_topic
from tests.consumer_protocol.conftest import FAST_GROUPS
from tests.server.raw_client import RawClient

HEARTBEAT_VERSION = consumer_group_heartbeat.MAX_VERSION
DESCRIBE_VERSION = consumer_group_describe.MAX_VERSION
RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
ANONYMOUS = "User:ANONYMOUS"


def unique(hint: str) -> str:
    return f"{hint}-{uuid.uuid4().hex[:10]}"


def call(bootstrap: str, api_key: int, version: int, message: Any) -> Any:
    """One request, asked again while the group's coordinator is not there yet (first use)."""
    deadline = time.monotonic() + 30
    while True:
        with RawClient(bootstrap) as client:
            if api_key != ApiKey.API_VERSIONS:
                client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="any"))
            response = client.call(api_key, version, message)
        code = getattr(response, "error_code", None)
        if code is None and getattr(response, "groups", None):
            code = response.groups[0].error_code
        if code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def join(group: str, topic: str, **fields: Any) -> ConsumerGroupHeartbeatRequest:
    values: dict[str, Any] = {
        "group_id": group,
        "member_id": uuid.uuid4().hex,
        "member_epoch": 0,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": [topic],
        "topic_partitions": [],
        **fields,
    }
    return ConsumerGroupHeartbeatRequest(**values)


def test_both_modes_serve_the_apis() -> None:
    for zookeeper_mode in (False, True):
        served = registry(zookeeper_mode)
        assert served[ApiKey.CONSUMER_GROUP_HEARTBEAT].MIN_VERSION == 0
        assert ApiKey.CONSUMER_GROUP_DESCRIBE in served


def test_api_versions_advertises_them(broker: BrokerProcess) -> None:
    response = call(broker.bootstrap, ApiKey.API_VERSIONS, 3, ApiVersionsRequest("tests", "1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, HEARTBEAT_VERSION)
    assert ranges[ApiKey.CONSUMER_GROUP_DESCRIBE][0] == 0


def test_a_join_is_answered_with_epoch_interval_and_assignment(broker: BrokerProcess) -> None:
    topic, group = unique("wire"), unique("g")
    create_topic(broker.bootstrap, topic, 3)
    request = join(group, topic)
    response = call(broker.bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, request)
    assert response.error_code == ErrorCode.NONE, response.error_message
    assert response.member_epoch == 1 and response.member_id == request.member_id
    assert response.heartbeat_interval_ms == FAST_GROUPS["group.consumer.heartbeat.interval.ms"]
    assert response.assignment is not None
    assert [sorted(tp.partitions) for tp in response.assignment.topic_partitions] == [[0, 1, 2]]
    described = call(
        broker.bootstrap,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        DESCRIBE_VERSION,
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True),
    ).groups[0]
    assert (described.error_code, described.group_state, described.group_epoch) == (0, "Stable", 1)
    assert described.assignor_name == "uniform" and described.authorized_operations > 0
    member = described.members[0]
    assert member.member_id == request.member_id and member.subscribed_topic_names == [topic]
    assert [tp.topic_name for tp in member.assignment.topic_partitions] == [topic]
    assert [tp.topic_name for tp in member.target_assignment.topic_partitions] == [topic]
    if DESCRIBE_VERSION >= 1:
        assert member.member_type == 1  # a consumer-protocol member (KIP-1099)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
        ({"topic_partitions": None}, ErrorCode.INVALID_REQUEST),
        ({"member_epoch": -7}, ErrorCode.INVALID_REQUEST),
        ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
        ({"member_epoch": 3}, ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)
def test_refused_heartbeats(broker: BrokerProcess, fields: dict[str, Any], code: int) -> None:
    response = call(
        broker.bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, join(unique("g"), "t", **fields)
    )
    assert response.error_code == code


def test_describing_an_unknown_group_answers_group_id_not_found(broker: BrokerProcess) -> None:
    described = call(
        broker.bootstrap,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        ConsumerGroupDescribeRequest(group_ids=[unique("nobody")]),
    ).groups[0]
    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("secured")
    settings = {
        **FAST_GROUPS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(root / "data", overrides=settings, output_path=root / "broker.out") as process:
        yield process


def deny(broker: BrokerProcess, operation: str, *resource: str) -> None:
    ok("acls", "--bootstrap-server", broker.bootstrap, "--add", "--deny-principal", ANONYMOUS, "--operation",
       operation, *resource)  # fmt: skip


def test_acls_on_the_group_and_topics(secured: BrokerProcess) -> None:
    topic, hidden, group, closed = unique("open"), unique("hidden"), unique("g"), unique("closed")
    create_topic(secured.bootstrap, topic)
    create_topic(secured.bootstrap, hidden)
    deny(secured, "Read", "--group", closed)
    deny(secured, "Describe", "--topic", hidden)
    deny(secured, "Describe", "--group", closed)
    heartbeat = ApiKey.CONSUMER_GROUP_HEARTBEAT
    refused = call(secured.bootstrap, heartbeat, HEARTBEAT_VERSION, join(closed, topic))
    assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    hidden_topic = call(secured.bootstrap, heartbeat, HEARTBEAT_VERSION, join(group, hidden))
    assert hidden_topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allowed = call(secured.bootstrap, heartbeat, HEARTBEAT_VERSION, join(group, topic))
    assert allowed.error_code == ErrorCode.NONE and allowed.member_epoch == 1
    described = call(
        secured.bootstrap,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        ConsumerGroupDescribeRequest(group_ids=[group, closed]),
    ).groups
    assert [(d.group_id, d.error_code) for d in described] == [
        (group, ErrorCode.NONE),
        (closed, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]


def test_a_regex_resolves_to_the_topics_the_member_may_describe(secured: BrokerProcess) -> None:
    prefix, group = unique("rx"), unique("g")
    visible, hidden = f"{prefix}-visible", f"{prefix}-hidden"
    create_topic(secured.bootstrap, visible)
    create_topic(secured.bootstrap, hidden)
    deny(secured, "Describe", "--topic", hidden)
    request = join(group, "", subscribed_topic_names=None, subscribed_topic_regex=f"{prefix}-.*")
    joined = call(secured.bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, request)
    assert joined.error_code == ErrorCode.NONE and joined.assignment is not None
    assert len(joined.assignment.topic_partitions) == 1
    described = call(
        secured.bootstrap,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        DESCRIBE_VERSION,
        ConsumerGroupDescribeRequest([group]),
    ).groups[0]
    assert described.error_code == ErrorCode.NONE
    assert [tp.topic_name for tp in described.members[0].assignment.topic_partitions] == [visible]
