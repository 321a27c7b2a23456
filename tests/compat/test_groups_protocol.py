"""The group APIs over raw requests against a real broker process: versions clients rarely pick,
error codes for bad input, and a member that stops heartbeating.

Apache Kafka's behaviour is the oracle: Kafka's error codes (UNKNOWN_MEMBER_ID 25, ILLEGAL_GENERATION
22, INCONSISTENT_GROUP_PROTOCOL 23, UNKNOWN_TOPIC_OR_PARTITION 3, INVALID_GROUP_ID 24,
INVALID_SESSION_TIMEOUT 26, OFFSET_METADATA_TOO_LARGE 12, GROUP_ID_NOT_FOUND 69, MEMBER_ID_REQUIRED 79,
FENCED_INSTANCE_ID 82, GROUP_SUBSCRIBED_TO_TOPIC 86) and the group surviving each of them intact.
Requests are encoded with odradek's codec; the shapes are Kafka's schemas.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)
from odradek.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.compat import helpers

SESSION_MS = 6000


class Wire:
    """One connection sending requests at explicit versions."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: ApiKey, version: int, message: Any) -> Any:
        self.correlation_id += 1
        header = encode_request_header(RequestHeader(api_key, version, self.correlation_id, "wire-test"))
        body = encode_request(api_key, version, message)
        self.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        payload = self._receive(struct.unpack(">i", self._receive(4))[0])
        correlation_id, start = parse_response_header(payload, response_header_version(api_key, version))
        assert correlation_id == self.correlation_id
        return decode_response(api_key, version, payload[start:])

    def _receive(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data


@pytest.fixture
def wire(broker):
    """A connection to the broker after a FindCoordinator, as every client starts (it creates
    __consumer_offsets; without it group requests answer NOT_COORDINATOR)."""
    connection = Wire(broker.bootstrap)
    assert connection.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g")).error_code == 0
    yield connection
    connection.close()


def subscription(topic: str) -> bytes:
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def join(wire: Wire, group: str, member_id: str = "", instance: str | None = None, **fields: Any) -> Any:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=fields.pop("session_timeout_ms", SESSION_MS),
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=fields.pop("protocol_type", "consumer"),
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))],
    )
    return wire.call(ApiKey.JOIN_GROUP, fields.pop("version", 9), request)


def join_as_new_member(wire: Wire, group: str) -> Any:
    required = join(wire, group)
    assert required.error_code == 79 and required.member_id  # MEMBER_ID_REQUIRED
    return join(wire, group, required.member_id)


def sync(wire: Wire, group: str, generation: int, member_id: str, assignments: dict[str, bytes]) -> Any:
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in assignments.items()
        ],
    )
    return wire.call(ApiKey.SYNC_GROUP, 5, request)


def heartbeat(wire: Wire, group: str, generation: int, member_id: str, instance: str | None = None) -> int:
    request = HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance
    )
    return wire.call(ApiKey.HEARTBEAT, 4, request).error_code


def describe(wire: Wire, group: str) -> Any:
    return wire.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group])).groups[0]


def commit(
    wire: Wire, group: str, offsets: dict[tuple[str, int], int], version: int = 8, **fields: Any
) -> dict:
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_metadata=fields.get("metadata", ""),
            )
        )
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=fields.get("generation", -1),
        member_id=fields.get("member_id", ""),
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()
        ],
    )
    response = wire.call(ApiKey.OFFSET_COMMIT, version, request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def stable_group(wire: Wire, group: str) -> tuple[str, int]:
    joined = join_as_new_member(wire, group)
    assert joined.error_code == 0 and joined.leader == joined.member_id
    synced = sync(wire, group, joined.generation_id, joined.member_id, {joined.member_id: b"assignment"})
    assert synced.error_code == 0 and synced.assignment == b"assignment"
    return joined.member_id, joined.generation_id


def test_find_coordinator_single_and_batched(broker, wire: Wire) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    single = wire.call(ApiKey.FIND_COORDINATOR, 0, FindCoordinatorRequest(key="any-group"))
    assert (single.error_code, single.node_id, single.host, single.port) == (0, 0, host, int(port))
    for version in (4, 5):
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
        batched = wire.call(ApiKey.FIND_COORDINATOR, version, request)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in batched.coordinators] == [
            ("a", 0, 0, int(port)),
            ("b", 0, 0, int(port)),
        ]
    bad_type = wire.call(ApiKey.FIND_COORDINATOR, 2, FindCoordinatorRequest(key="x", key_type=7))
    assert bad_type.error_code == 42  # INVALID_REQUEST


def test_bad_membership_requests_get_kafka_error_codes(broker, wire: Wire, unique_topic: str) -> None:
    group = f"group-{unique_topic}"
    member, generation = stable_group(wire, group)

    assert heartbeat(wire, group, generation, "no-such-member") == 25  # UNKNOWN_MEMBER_ID
    assert heartbeat(wire, group, generation + 5, member) == 22  # ILLEGAL_GENERATION
    assert join(wire, group, protocol_type="connect").error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    assert join(wire, "").error_code == 24  # INVALID_GROUP_ID
    assert join(wire, group, session_timeout_ms=10).error_code == 26  # INVALID_SESSION_TIMEOUT
    assert sync(wire, group, generation + 1, member, {}).error_code == 22
    assert join(wire, group, "no-such-member").error_code == 25

    described = describe(wire, group)
    assert described.group_state == "Stable" and [m.member_id for m in described.members] == [member]
    assert heartbeat(wire, group, generation, member) == 0


def test_bad_offset_commits_get_kafka_error_codes(broker, wire: Wire, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    group = f"group-{unique_topic}"
    errors = commit(wire, group, {(unique_topic, 0): 3, (unique_topic, 5): 1, ("no-such-topic-xyz", 0): 1})
    assert errors == {(unique_topic, 0): 0, (unique_topic, 5): 3, ("no-such-topic-xyz", 0): 3}
    too_large = commit(wire, group, {(unique_topic, 0): 4}, metadata="m" * 5000)
    assert too_large == {(unique_topic, 0): 12}  # OFFSET_METADATA_TOO_LARGE
    assert commit(wire, f"{group}-unknown", {(unique_topic, 0): 1}, generation=3, member_id="m") == {
        (unique_topic, 0): 22
    }

    member, generation = stable_group(wire, f"{group}-managed")
    assert commit(wire, f"{group}-managed", {(unique_topic, 0): 1}) == {(unique_topic, 0): 25}
    managed = {(unique_topic, 0): 2}
    assert commit(wire, f"{group}-managed", managed, generation=generation, member_id=member) == {
        (unique_topic, 0): 0
    }

    fetched = wire.call(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=None))
    assert [
        (t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions
    ] == [(unique_topic, 0, 3)]


def test_offset_fetch_across_versions_and_groups(broker, wire: Wire, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 2)
    first, second = f"first-{unique_topic}", f"second-{unique_topic}"
    assert commit(wire, first, {(unique_topic, 0): 10, (unique_topic, 1): 11}, version=2) == {
        (unique_topic, 0): 0,
        (unique_topic, 1): 0,
    }
    assert commit(wire, second, {(unique_topic, 1): 21}, version=0) == {(unique_topic, 1): 0}

    old = wire.call(
        ApiKey.OFFSET_FETCH,
        1,
        OffsetFetchRequest(
            group_id=first,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=unique_topic, partition_indexes=[0, 1])],
        ),
    )
    assert [p.committed_offset for p in old.topics[0].partitions] == [10, 11]

    batched = wire.call(
        ApiKey.OFFSET_FETCH,
        8,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id=first, topics=None),
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=second,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name=unique_topic, partition_indexes=[0, 1]
                        )
                    ],
                ),
            ]
        ),
    )
    offsets = {
        g.group_id: sorted((p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions)
        for g in batched.groups
    }
    assert offsets == {first: [(0, 10), (1, 11)], second: [(0, -1), (1, 21)]}
    assert all(g.error_code == 0 for g in batched.groups)


def test_static_members_fencing_and_batch_leave(broker, wire: Wire, unique_topic: str) -> None:
    group = f"group-{unique_topic}"
    first = join(wire, group, instance="host-a", version=5)
    assert first.error_code == 0  # static members never get MEMBER_ID_REQUIRED
    assert sync(wire, group, first.generation_id, first.member_id, {first.member_id: b"a"}).error_code == 0

    replacement = join(wire, group, instance="host-a", version=5)
    assert replacement.error_code == 0 and replacement.member_id != first.member_id
    assert replacement.generation_id == first.generation_id  # no rebalance for a returning static member
    assert heartbeat(wire, group, first.generation_id, first.member_id, "host-a") == 82  # FENCED_INSTANCE_ID
    assert heartbeat(wire, group, first.generation_id, replacement.member_id, "host-a") == 0

    leave = LeaveGroupRequest(
        group_id=group,
        members=[
            LeaveGroupRequest.MemberIdentity(member_id=first.member_id, group_instance_id="host-a"),
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="host-a"),
            LeaveGroupRequest.MemberIdentity(member_id="nobody", group_instance_id=None),
        ],
    )
    response = wire.call(ApiKey.LEAVE_GROUP, 5, leave)
    assert response.error_code == 0
    assert [m.error_code for m in response.members] == [82, 0, 25]
    assert describe(wire, group).group_state == "Empty"


def test_delete_groups_and_offsets(broker, wire: Wire, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    group = f"group-{unique_topic}"
    member, generation = stable_group(wire, group)
    assert commit(wire, group, {(unique_topic, 0): 5}, generation=generation, member_id=member) == {
        (unique_topic, 0): 0
    }
    missing = ("no-such-topic-for-groups", 0)
    assert commit(wire, group, {missing: 1}, generation=generation, member_id=member) == {missing: 3}

    deleted = wire.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group, f"{group}-nope"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, 68), (f"{group}-nope", 69)]

    offset_delete = OffsetDeleteRequest(
        group_id=group,
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=unique_topic,
                partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)],
            )
        ],
    )
    response = wire.call(ApiKey.OFFSET_DELETE, 0, offset_delete)
    assert (
        response.error_code == 0 and response.topics[0].partitions[0].error_code == 0
    )  # not subscribed to it

    leave = LeaveGroupRequest(group_id=group, member_id=member)
    assert wire.call(ApiKey.LEAVE_GROUP, 1, leave).error_code == 0
    assert (
        wire.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code
        == 0
    )
    assert describe(wire, group).group_state == "Dead"


@pytest.mark.slow
def test_member_that_stops_heartbeating_is_removed_after_session_timeout(
    broker, wire: Wire, unique_topic: str
) -> None:
    group = f"group-{unique_topic}"
    alive, generation = stable_group(wire, group)
    other = Wire(broker.bootstrap)
    try:
        silent = join_as_new_member_later(other, group, watcher=wire)
        rejoined = join(wire, group, alive)  # completes the rebalance the newcomer started
        assert rejoined.generation_id == generation + 1
        parked = silent.result()
        assert parked.generation_id == generation + 1
        assert (
            sync(wire, group, rejoined.generation_id, alive, {alive: b"x", parked.member_id: b"y"}).error_code
            == 0
        )
        assert sync(other, group, parked.generation_id, parked.member_id, {}).assignment == b"y"

        started = time.monotonic()
        while True:  # keep `alive` heartbeating; the newcomer stays silent
            time.sleep(0.5)
            code = heartbeat(wire, group, rejoined.generation_id, alive)
            if code == 27:  # REBALANCE_IN_PROGRESS: the silent member was dropped
                break
            assert code == 0 and time.monotonic() - started < SESSION_MS / 1000 + 5
        elapsed = time.monotonic() - started
        assert elapsed >= SESSION_MS / 1000 - 1
        final = join(wire, group, alive)
        assert final.generation_id == generation + 2 and [m.member_id for m in final.members] == [alive]
        assert heartbeat(other, group, parked.generation_id, parked.member_id) == 25
    finally:
        other.close()


class _Pending:
    """A JoinGroup sent on its own connection whose answer is read later."""

    def __init__(self, wire: Wire, correlation_id: int) -> None:
        self.wire, self.correlation_id = wire, correlation_id

    def result(self) -> Any:
        payload = self.wire._receive(struct.unpack(">i", self.wire._receive(4))[0])
        correlation_id, start = parse_response_header(payload, response_header_version(ApiKey.JOIN_GROUP, 9))
        assert correlation_id == self.correlation_id
        return decode_response(ApiKey.JOIN_GROUP, 9, payload[start:])


def join_as_new_member_later(wire: Wire, group: str, watcher: Wire) -> _Pending:
    """Get a member id, then send the JoinGroup that parks until the rebalance completes; returns
    once `watcher` sees the newcomer among the group's members (the broker has parked it)."""
    required = join(wire, group)
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=10_000,
        member_id=required.member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))],
    )
    wire.correlation_id += 1
    header = encode_request_header(RequestHeader(ApiKey.JOIN_GROUP, 9, wire.correlation_id, "wire-test"))
    body = encode_request(ApiKey.JOIN_GROUP, 9, request)
    wire.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    deadline = time.monotonic() + helpers.TIMEOUT_S
    while required.member_id not in [m.member_id for m in describe(watcher, group).members]:
        assert time.monotonic() < deadline, "the broker never took the newcomer's JoinGroup"
    return _Pending(wire, wire.correlation_id)


@pytest.mark.parametrize("version", range(10))
def test_every_version_of_the_group_apis(broker, wire: Wire, unique_topic: str, version: int) -> None:
    """A whole membership cycle with each API at `version` (capped at the API's newest)."""
    helpers.create_topic(broker.bootstrap, unique_topic, 1)
    group = f"group-{unique_topic}"
    found = wire.call(ApiKey.FIND_COORDINATOR, min(version, 3), FindCoordinatorRequest(key=group))
    assert found.error_code == 0 and found.node_id == 0

    joined = join(wire, group, version=version)
    if version >= 4:
        assert joined.error_code == 79
        joined = join(wire, group, joined.member_id, version=version)
    assert joined.error_code == 0 and joined.generation_id == 1 and joined.leader == joined.member_id
    assert joined.protocol_name == "range" and [m.member_id for m in joined.members] == [joined.member_id]
    member = joined.member_id

    sync_request = SyncGroupRequest(
        group_id=group,
        generation_id=1,
        member_id=member,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"mine")],
    )
    synced = wire.call(ApiKey.SYNC_GROUP, min(version, 5), sync_request)
    assert synced.error_code == 0 and synced.assignment == b"mine"
    beat = HeartbeatRequest(group_id=group, generation_id=1, member_id=member)
    assert wire.call(ApiKey.HEARTBEAT, min(version, 4), beat).error_code == 0

    partition = OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=7)
    commit_request = OffsetCommitRequest(
        group_id=group if version >= 1 else f"{group}-simple",
        generation_id_or_member_epoch=1 if version >= 1 else -1,
        member_id=member if version >= 1 else "",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=unique_topic, partitions=[partition])],
    )
    committed = wire.call(ApiKey.OFFSET_COMMIT, version, commit_request)
    assert committed.topics[0].partitions[0].error_code == 0
    fetch_group = commit_request.group_id
    wanted = [OffsetFetchRequest.OffsetFetchRequestTopic(name=unique_topic, partition_indexes=[0])]
    if version >= 8:
        fetch_request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=fetch_group,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=unique_topic, partition_indexes=[0])
                    ],
                )
            ]
        )
        topics = wire.call(ApiKey.OFFSET_FETCH, version, fetch_request).groups[0].topics
    else:
        topics = wire.call(
            ApiKey.OFFSET_FETCH, version, OffsetFetchRequest(group_id=fetch_group, topics=wanted)
        ).topics
    assert [(p.partition_index, p.committed_offset) for p in topics[0].partitions] == [(0, 7)]

    described = wire.call(
        ApiKey.DESCRIBE_GROUPS, min(version, 5), DescribeGroupsRequest(groups=[group])
    ).groups[0]
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.member_assignment) for m in described.members] == [(member, b"mine")]
    listed = wire.call(ApiKey.LIST_GROUPS, min(version, 5), ListGroupsRequest())
    assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}

    if version >= 3:
        leave = LeaveGroupRequest(
            group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=member)]
        )
    else:
        leave = LeaveGroupRequest(group_id=group, member_id=member)
    assert wire.call(ApiKey.LEAVE_GROUP, min(version, 5), leave).error_code == 0
    deleted = wire.call(ApiKey.DELETE_GROUPS, min(version, 2), DeleteGroupsRequest(groups_names=[group]))
    assert deleted.results[0].error_code == 0
