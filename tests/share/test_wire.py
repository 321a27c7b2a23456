"""ShareFetch and ShareAcknowledge against a broker process over raw frames, as Kafka 4's share
consumers send them (v1): share sessions, disjoint acquisition by two members, redelivery after the
acquisition lock expires, rejected records never delivered again, and the durable state in
`__share_group_state` across a broker restart. Membership (ShareGroupHeartbeat) is not needed: the
partition leader serves any member id it is given.

Each broker uses a one-second acquisition lock (group.share.record.lock.duration.ms and its min
1000, Kafka's least) and three `__share_group_state` partitions; waits are poll loops with generous
deadlines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from odradek.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from odradek.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from odradek.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from odradek.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from odradek.protocol.messages.share_fetch import ShareFetchRequest
from odradek.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from odradek.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from odradek.protocol.records.record import decode_records
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok
from tests.server.raw_client import RawClient
from tests.server.test_produce import create_topic, produce, records

SETTINGS = {
    "group.share.record.lock.duration.ms": 1000,
    "group.share.min.record.lock.duration.ms": 1000,
    "share.coordinator.state.topic.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
}
VERSION = 1
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("share-broker")
    with BrokerProcess(root / "data", overrides=SETTINGS, output_path=root / "broker.out") as process:
        yield process


class Member:
    """One share consumer member: its id, its share session epoch, its connection."""

    def __init__(self, bootstrap: str, group: str, topic_id: Any) -> None:
        self.client = RawClient(bootstrap, timeout=30.0)
        self.group, self.topic_id = group, topic_id
        self.member_id = str(uuid.uuid4())
        self.epoch = 0

    def fetch(
        self,
        acks: Sequence[tuple[int, int, int]] = (),
        max_records: int = 500,
        wait_ms: int = 200,
        version: int = VERSION,
        renew: bool = False,
    ) -> Any:
        batches = [ShareFetchRequest.AcknowledgementBatch(f, last, [t]) for f, last, t in acks]
        partition = ShareFetchRequest.FetchPartition(0, acknowledgement_batches=batches)
        request = ShareFetchRequest(
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch,
            max_wait_ms=0 if renew else wait_ms,
            min_bytes=0 if renew else 1,
            max_bytes=0 if renew else 1 << 20,
            max_records=0 if renew else max_records,
            batch_size=0 if renew else max_records,
            is_renew_ack=renew,
            topics=[ShareFetchRequest.FetchTopic(self.topic_id, [partition])],
        )
        response = self.client.call(ApiKey.SHARE_FETCH, version, request)
        assert response.error_code == ErrorCode.NONE, response
        self.epoch += 1
        return response

    def acknowledge(self, acks: list[tuple[int, int, int]], epoch: int | None = None) -> Any:
        batches = [ShareAcknowledgeRequest.AcknowledgementBatch(f, last, [t]) for f, last, t in acks]
        request = ShareAcknowledgeRequest(
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[
                ShareAcknowledgeRequest.AcknowledgeTopic(
                    self.topic_id, [ShareAcknowledgeRequest.AcknowledgePartition(0, batches)]
                )
            ],
        )
        response = self.client.call(ApiKey.SHARE_ACKNOWLEDGE, VERSION, request)
        if epoch is None and response.error_code == ErrorCode.NONE:
            self.epoch += 1
        return response

    def close(self) -> None:
        self.client.close()


# What a partition answers while it or its share-partition's state is still loading (a broker
# just started, a leader just elected): clients ask again.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NETWORK_EXCEPTION,
    }
)


class Retry(Exception):
    """A partition answered a RETRIABLE error."""


def acquired(response: Any) -> dict[int, tuple[bytes, int]]:
    """offset -> (value, delivery count) of the records the response acquired."""
    found: dict[int, tuple[bytes, int]] = {}
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.error_code in RETRIABLE:
                raise Retry(partition.error_code)
            assert partition.error_code == ErrorCode.NONE, partition
            values = {r.offset: r.value or b"" for r in decode_records(bytes(partition.records or b""))}
            for span in partition.acquired_records:
                for offset in range(span.first_offset, span.last_offset + 1):
                    found[offset] = (values[offset], span.delivery_count)
    return found


def ack_error(response: Any) -> int:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return int(partition.acknowledge_error_code if hasattr(partition, "acknowledge_error_code") else 0)


def setup(bootstrap: str, count: int = 10) -> tuple[str, Any, str]:
    """A fresh topic with `count` records produced after the group's first fetch (the share-partition
    starts at the latest offset, share.auto.offset.reset's default): (topic, topic id, group)."""
    group = f"share-{uuid.uuid4().hex[:8]}"
    with RawClient(bootstrap, timeout=30.0) as client:
        topic, topic_id = create_topic(client)
    first = Member(bootstrap, group, topic_id)
    assert settled_fetch(first) == {}
    first.close()
    with RawClient(bootstrap) as client:
        data = records(*(f"v{i}".encode() for i in range(count)))
        assert produce(client, topic, data, acks=-1).error_code == ErrorCode.NONE
    return topic, topic_id, group


def settled_fetch(member: Member, deadline_s: float = 30.0) -> dict[int, tuple[bytes, int]]:
    """A fetch that does not wait, asked again while the partition answers a RETRIABLE error."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return acquired(member.fetch(wait_ms=0))
        except Retry:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def poll(member: Member, want: int, deadline_s: float = 30.0, **fields: Any) -> dict[int, tuple[bytes, int]]:
    """Fetch until `want` records were acquired in all (or the deadline)."""
    got: dict[int, tuple[bytes, int]] = {}
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        try:
            got |= acquired(member.fetch(**fields))
        except Retry:
            time.sleep(0.2)
    return got


def test_two_members_get_disjoint_records(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap)
    a, b = Member(broker.bootstrap, group, topic_id), Member(broker.bootstrap, group, topic_id)
    try:
        got_a = poll(a, 4, max_records=4)
        got_b = poll(b, 6, max_records=6)
        assert set(got_a) == {0, 1, 2, 3}
        assert set(got_b) == {4, 5, 6, 7, 8, 9}
        assert {v for v, _ in got_b.values()} == {f"v{i}".encode() for i in range(4, 10)}
        assert all(count == 1 for _, count in (got_a | got_b).values())
        assert acquired(b.fetch(wait_ms=0)) == {}  # everything is held
    finally:
        a.close()
        b.close()


def test_unacknowledged_records_go_to_another_member_after_the_lock(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=5)
    a, b = Member(broker.bootstrap, group, topic_id), Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 5)) == set(range(5))
        again = poll(b, 5)  # once a's locks expire
        assert set(again) == set(range(5))
        assert all(count == 2 for _, count in again.values())
        late = a.acknowledge([(0, 4, ACCEPT)])  # a's locks are gone
        (topic,) = late.responses
        assert topic.partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    finally:
        a.close()
        b.close()


def test_a_rejected_record_is_never_delivered_again(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=3)
    a, b = Member(broker.bootstrap, group, topic_id), Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 3)) == {0, 1, 2}
        response = a.acknowledge([(0, 0, REJECT), (1, 2, RELEASE)])
        assert response.error_code == ErrorCode.NONE
        assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.NONE]
        assert set(poll(b, 2)) == {1, 2}
        b.fetch(acks=[(1, 2, RELEASE)], wait_ms=0)
        seen: set[int] = set()
        for _ in range(5):
            got = acquired(b.fetch(wait_ms=100))
            seen |= set(got)
            if got:
                b.fetch(acks=[(min(got), max(got), RELEASE)], wait_ms=0)
        assert 0 not in seen
    finally:
        a.close()
        b.close()


def test_session_epochs(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=1)
    a = Member(broker.bootstrap, group, topic_id)
    try:
        a.fetch(wait_ms=0)
        request = ShareFetchRequest(group_id=group, member_id=a.member_id, share_session_epoch=7)
        wrong = a.client.call(ApiKey.SHARE_FETCH, VERSION, request)
        assert wrong.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        request = ShareFetchRequest(group_id=group, member_id="nobody", share_session_epoch=3)
        unknown = a.client.call(ApiKey.SHARE_FETCH, VERSION, request)
        assert unknown.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert a.acknowledge([(0, 0, ACCEPT)], epoch=0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    finally:
        a.close()


def test_acknowledged_records_survive_a_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", overrides=SETTINGS, output_path=tmp_path / "broker.out") as process:
        _, topic_id, group = setup(process.bootstrap, count=10)
        a = Member(process.bootstrap, group, topic_id)
        assert set(poll(a, 10)) == set(range(10))
        response = a.acknowledge([(0, 4, ACCEPT)])
        assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.NONE]
        a.close()
        process.kill()
        process.restart()
        b = Member(process.bootstrap, group, topic_id)
        try:
            again = poll(b, 5, deadline_s=60.0)
            assert set(again) == set(range(5, 10))
            assert {v for v, _ in again.values()} == {f"v{i}".encode() for i in range(5, 10)}
            for _ in range(3):
                assert not set(acquired(b.fetch(wait_ms=100))) & set(range(5))
        finally:
            b.close()


def test_closing_the_share_session_releases_the_members_records(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=4)
    a, b = Member(broker.bootstrap, group, topic_id), Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 4)) == {0, 1, 2, 3}
        closed = a.acknowledge([(0, 0, ACCEPT)], epoch=-1)  # the final epoch closes the session
        assert closed.error_code == ErrorCode.NONE
        assert [p.error_code for t in closed.responses for p in t.partitions] == [ErrorCode.NONE]
        got = settled_fetch(b)  # at once: no lock has to expire
        assert set(got) == {1, 2, 3}
        assert all(count == 2 for _, count in got.values())
        again = ShareFetchRequest(group_id=group, member_id=a.member_id, share_session_epoch=a.epoch)
        answer = a.client.call(ApiKey.SHARE_FETCH, VERSION, again)
        assert answer.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    finally:
        a.close()
        b.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("share-secured")
    settings = {
        **SETTINGS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(root / "data", overrides=settings, output_path=root / "broker.out") as process:
        yield process


def deny_read(broker: BrokerProcess, *resource: str) -> None:
    ok("acls", "--bootstrap-server", broker.bootstrap, "--add", "--deny-principal", "User:ANONYMOUS",
       "--operation", "Read", *resource)  # fmt: skip


def test_read_on_the_group_and_on_the_topic(secured: BrokerProcess) -> None:
    _, topic_id, group = setup(secured.bootstrap, count=1)
    with RawClient(secured.bootstrap, timeout=30.0) as client:
        hidden, hidden_id = create_topic(client)
    closed = f"closed-{uuid.uuid4().hex[:8]}"
    deny_read(secured, "--group", closed)
    deny_read(secured, "--topic", hidden)
    refused = Member(secured.bootstrap, closed, topic_id)
    member = Member(secured.bootstrap, group, hidden_id)
    reader = Member(secured.bootstrap, group, topic_id)
    try:
        request = ShareFetchRequest(group_id=closed, member_id=refused.member_id, share_session_epoch=0)
        answer = refused.client.call(ApiKey.SHARE_FETCH, VERSION, request)
        assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        (topic,) = member.fetch(wait_ms=0).responses
        assert [p.error_code for p in topic.partitions] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert set(poll(reader, 1)) == {0}
    finally:
        refused.close()
        member.close()
        reader.close()


def test_renew_needs_v2_and_a_renewing_fetch_fetches_nothing(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=3)
    a = Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 3)) == {0, 1, 2}
        (topic,) = a.fetch(acks=[(0, 0, RENEW)], wait_ms=0).responses  # v1
        assert [p.acknowledge_error_code for p in topic.partitions] == [ErrorCode.INVALID_REQUEST]
        limits = ShareFetchRequest(
            group_id=group,
            member_id=a.member_id,
            share_session_epoch=a.epoch,
            max_wait_ms=100,
            is_renew_ack=True,
        )
        refused = a.client.call(ApiKey.SHARE_FETCH, 2, limits)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert (
            refused.error_message
            == "maxBytes must be set to 0, maxWaitMs must be set to 0, if isRenewAck is true."
        )
        renewed = a.fetch(acks=[(1, 1, ACCEPT)], wait_ms=0, version=2, renew=True)
        (topic,) = renewed.responses
        assert [(p.acknowledge_error_code, p.acquired_records) for p in topic.partitions] in (
            [(ErrorCode.NONE, [])],
            [(ErrorCode.INVALID_RECORD_STATE, [])],  # the one-second lock ran out meanwhile
        )
        assert renewed.acquisition_lock_timeout_ms == 1000
    finally:
        a.close()


def test_the_share_coordinator_apis(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=10)
    a = Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 10)) == set(range(10))
        response = a.acknowledge([(0, 4, ACCEPT)])
        assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.NONE]
    finally:
        a.close()

    def summary(group_id: str) -> tuple[int, int]:
        request = ReadShareGroupStateSummaryRequest(
            group_id,
            [
                ReadShareGroupStateSummaryRequest.ReadStateSummaryData(
                    topic_id, [ReadShareGroupStateSummaryRequest.PartitionData(0, -1)]
                )
            ],
        )
        with RawClient(broker.bootstrap) as client:
            (result,) = client.call(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, request).results
        (partition,) = result.partitions
        return partition.error_code, partition.start_offset

    assert summary(group) == (ErrorCode.NONE, 5)
    assert summary(f"nobody-{uuid.uuid4().hex[:6]}") == (ErrorCode.NONE, -1)
    read = ReadShareGroupStateRequest(
        group,
        [
            ReadShareGroupStateRequest.ReadStateData(
                topic_id, [ReadShareGroupStateRequest.PartitionData(0, -1)]
            )
        ],
    )
    with RawClient(broker.bootstrap) as client:
        (state,) = client.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read).results[0].partitions
        assert (state.error_code, state.start_offset) == (ErrorCode.NONE, 5)
        read.group_id = f"nobody-{uuid.uuid4().hex[:6]}"
        (none,) = client.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read).results[0].partitions
        assert none.error_code == ErrorCode.INVALID_REQUEST  # Kafka 4.4: an uninitialized share-partition
        assert [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches
        ] == [
            (5, 9, 0, 1)  # acquired, kept as AVAILABLE with its delivery count
        ]
        initialize = InitializeShareGroupStateRequest(
            group,
            [
                InitializeShareGroupStateRequest.InitializeStateData(
                    topic_id, [InitializeShareGroupStateRequest.PartitionData(0, 3, 100)]
                )
            ],
        )
        (done,) = client.call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, initialize).results[0].partitions
        assert done.error_code == ErrorCode.NONE
    assert summary(group) == (ErrorCode.NONE, 100)
    delete = DeleteShareGroupStateRequest(
        group,
        [
            DeleteShareGroupStateRequest.DeleteStateData(
                topic_id, [DeleteShareGroupStateRequest.PartitionData(0)]
            )
        ],
    )
    with RawClient(broker.bootstrap) as client:
        (deleted,) = client.call(ApiKey.DELETE_SHARE_GROUP_STATE, 0, delete).results[0].partitions
    assert deleted.error_code == ErrorCode.NONE
    assert summary(group) == (ErrorCode.NONE, -1)


def read_state(bootstrap: str, group: str, topic_id: Any) -> Any:
    read = ReadShareGroupStateRequest(
        group,
        [
            ReadShareGroupStateRequest.ReadStateData(
                topic_id, [ReadShareGroupStateRequest.PartitionData(0, -1)]
            )
        ],
    )
    with RawClient(bootstrap) as client:
        (state,) = client.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read).results[0].partitions
    return state


def test_expired_locks_are_released_and_written_without_any_request(broker: BrokerProcess) -> None:
    _, topic_id, group = setup(broker.bootstrap, count=3)
    a = Member(broker.bootstrap, group, topic_id)
    try:
        assert set(poll(a, 3)) == {0, 1, 2}
        assert read_state(broker.bootstrap, group, topic_id).state_batches == []  # acquisition: not written
        deadline = time.monotonic() + 30
        batches: list[tuple[int, int, int, int]] = []
        while not batches and time.monotonic() < deadline:
            time.sleep(0.2)
            state = read_state(broker.bootstrap, group, topic_id)
            batches = [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in state.state_batches
            ]
        assert batches == [(0, 2, 0, 1)]  # AVAILABLE again, delivered once
    finally:
        a.close()


def test_share_group_membership_needs_read_and_describe_on_the_group(secured: BrokerProcess) -> None:
    """ShareGroupHeartbeat needs READ on the group and ShareGroupDescribe DESCRIBE, as Kafka checks."""
    _, _, group = setup(secured.bootstrap, count=1)
    topic = f"share-acl-{uuid.uuid4().hex[:8]}"
    closed = f"closed-{uuid.uuid4().hex[:8]}"
    deny_read(secured, "--group", closed)
    ok("acls", "--bootstrap-server", secured.bootstrap, "--add", "--deny-principal", "User:ANONYMOUS",
       "--operation", "Describe", "--group", closed)  # fmt: skip
    join = ShareGroupHeartbeatRequest(
        group_id=closed, member_id=uuid.uuid4().hex[:22], member_epoch=0, subscribed_topic_names=[topic]
    )
    with RawClient(secured.bootstrap, timeout=30.0) as client:
        joined = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, join)
        described = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([closed, group]))
    assert joined.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    codes = {g.group_id: g.error_code for g in described.groups}
    assert codes[closed] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert codes[group] != ErrorCode.GROUP_AUTHORIZATION_FAILED
