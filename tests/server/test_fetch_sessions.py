"""Fetch sessions (KIP-227) over raw frames through the broker's codec: creation, incremental
answers, forgotten partitions, epochs, closing, topic ids and long polls."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.protocol.records.record import decode_records
from tests.server.raw_client import RawClient
from tests.server.test_produce import create_topic, produce, records

NO_ID = uuid.UUID(int=0)


def fetch(
    client: RawClient,
    topic: str | uuid.UUID,
    offsets: dict[int, int],
    session_id: int,
    epoch: int,
    *,
    version: int = 12,
    forget: tuple[int, ...] = (),
    min_bytes: int = 0,
    max_wait_ms: int = 0,
) -> FetchResponse:
    """A fetch of `topic`'s partitions at `offsets` (partition -> offset) with session metadata."""
    by_id = isinstance(topic, uuid.UUID)
    name, topic_id = ("", topic) if by_id else (topic, NO_ID)
    parts = [
        FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
        for p, o in offsets.items()
    ]
    forgotten = [FetchRequest.ForgottenTopic(topic=name, topic_id=topic_id, partitions=list(forget))]
    request = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        session_id=session_id,
        session_epoch=epoch,
        topics=[FetchRequest.FetchTopic(topic=name, topic_id=topic_id, partitions=parts)] if parts else [],
        forgotten_topics_data=forgotten if forget else [],
    )
    return client.call(ApiKey.FETCH, version, request)


def answered(response: FetchResponse) -> dict[int, list[bytes]]:
    """partition -> values of the records it carries, for every partition in the response."""
    assert response.error_code == ErrorCode.NONE
    return {
        p.partition_index: [r.value for r in decode_records(bytes(p.records))]
        for topic in response.responses
        for p in topic.partitions
    }


def long_poll(client: RawClient, topic: str, session: int, epoch: int) -> Callable[[], FetchResponse]:
    """Start an incremental fetch naming nothing that waits up to 30 s for a byte; the returned
    call waits for its answer."""
    answer: list[FetchResponse] = []

    def poll() -> None:
        answer.append(fetch(client, topic, {}, session, epoch, min_bytes=1, max_wait_ms=30_000))

    poller = threading.Thread(target=poll)
    poller.start()

    def result() -> FetchResponse:
        poller.join(60)
        assert not poller.is_alive()
        return answer[0]

    return result


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


def test_incremental_fetches_answer_only_the_partitions_that_changed(client: RawClient) -> None:
    name, _ = create_topic(client, partitions=3)
    produce(client, name, records(b"zero"), partition=0)
    full = fetch(client, name, {0: 0, 1: 0, 2: 0}, session_id=0, epoch=0)
    assert full.session_id > 0 and answered(full) == {0: [b"zero"], 1: [], 2: []}
    session = full.session_id

    nothing_new = fetch(client, name, {0: 1}, session, epoch=1)
    assert nothing_new.session_id == session and answered(nothing_new) == {}

    produce(client, name, records(b"two"), partition=2)
    only_two = fetch(client, name, {}, session, epoch=2)
    assert answered(only_two) == {2: [b"two"]}
    (partition,) = only_two.responses[0].partitions
    assert (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) == (1, 1, 0)

    again = fetch(client, name, {2: 1}, session, epoch=3)
    assert answered(again) == {}


def test_session_epoch_rules(client: RawClient) -> None:
    name, _ = create_topic(client)
    session = fetch(client, name, {0: 0}, session_id=0, epoch=0).session_id
    assert fetch(client, name, {}, session, epoch=1).error_code == ErrorCode.NONE
    for epoch in (1, 3):  # replayed, skipped
        stale = fetch(client, name, {}, session, epoch=epoch)
        assert (stale.error_code, stale.session_id, stale.responses) == (
            ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            0,
            [],
        )
    assert fetch(client, name, {}, session, epoch=2).error_code == ErrorCode.NONE  # still usable
    unknown = fetch(client, name, {}, session ^ 0x5A5A, epoch=1)
    assert (unknown.error_code, unknown.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_final_epoch_closes_the_session_and_fetches_without_one(client: RawClient) -> None:
    name, _ = create_topic(client)
    produce(client, name, records(b"a"))
    session = fetch(client, name, {0: 0}, session_id=0, epoch=0).session_id
    closing = fetch(client, name, {0: 0}, session, epoch=-1)
    assert closing.session_id == 0 and answered(closing) == {0: [b"a"]}
    gone = fetch(client, name, {}, session, epoch=1)
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_initial_epoch_with_a_session_id_replaces_the_session(client: RawClient) -> None:
    name, _ = create_topic(client)
    old = fetch(client, name, {0: 0}, session_id=0, epoch=0).session_id
    new = fetch(client, name, {0: 0}, session_id=old, epoch=0).session_id
    assert new > 0 and new != old
    assert fetch(client, name, {}, old, epoch=1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(client, name, {}, new, epoch=1).error_code == ErrorCode.NONE


def test_sessionless_fetches_create_nothing(client: RawClient) -> None:
    name, _ = create_topic(client)
    assert fetch(client, name, {0: 0}, session_id=0, epoch=-1).session_id == 0
    assert (
        fetch(client, name, {0: 0}, session_id=0, epoch=0, version=6).session_id == 0
    )  # no sessions before v7


def test_forgotten_partitions_leave_the_session(client: RawClient) -> None:
    name, _ = create_topic(client, partitions=2)
    session = fetch(client, name, {0: 0, 1: 0}, session_id=0, epoch=0).session_id
    assert answered(fetch(client, name, {}, session, epoch=1, forget=(1,))) == {}
    produce(client, name, records(b"unwatched"), partition=1)
    produce(client, name, records(b"watched"), partition=0)
    assert answered(fetch(client, name, {}, session, epoch=2)) == {0: [b"watched"]}
    rejoined = fetch(client, name, {1: 0}, session, epoch=3)  # partition 0 still at offset 0
    assert answered(rejoined) == {0: [b"watched"], 1: [b"unwatched"]}


def test_topic_id_sessions(client: RawClient) -> None:
    name, topic_id = create_topic(client, partitions=2)
    assert isinstance(topic_id, uuid.UUID)
    full = fetch(client, topic_id, {0: 0, 1: 0}, session_id=0, epoch=0, version=13)
    assert full.session_id > 0 and [t.topic_id for t in full.responses] == [topic_id]
    produce(client, name, records(b"b"), partition=1)
    incremental = fetch(client, topic_id, {}, full.session_id, epoch=1, version=17)
    assert answered(incremental) == {1: [b"b"]} and incremental.responses[0].topic_id == topic_id
    by_name = fetch(client, name, {}, full.session_id, epoch=2, version=12)
    assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    unknown = uuid.uuid4()
    added = fetch(client, unknown, {0: 0}, full.session_id, epoch=2, version=13)
    # partition 1 is answered again: the session still holds its fetch offset 0
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in added.responses
    ] == [
        (topic_id, [(1, ErrorCode.NONE)]),
        (unknown, [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]


def test_a_name_session_refuses_topic_id_requests(client: RawClient) -> None:
    name, topic_id = create_topic(client)
    session = fetch(client, name, {0: 0}, session_id=0, epoch=0, version=12).session_id
    assert isinstance(topic_id, uuid.UUID)
    by_id = fetch(client, topic_id, {}, session, epoch=1, version=13)
    assert (by_id.error_code, by_id.session_id) == (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0)


def test_an_incremental_long_poll_answers_the_partition_that_got_data(client: RawClient, connect) -> None:
    name, _ = create_topic(client, partitions=2)
    session = fetch(client, name, {0: 0, 1: 0}, session_id=0, epoch=0).session_id
    answer = long_poll(client, name, session, epoch=1)
    produce(connect(), name, records(b"wake up"), partition=1)
    assert answered(answer()) == {1: [b"wake up"]}


def test_a_long_poll_over_quiet_partitions_answers_the_one_that_got_data(client: RawClient, connect) -> None:
    name, _ = create_topic(client, partitions=3)
    session = fetch(client, name, {0: 0, 1: 0, 2: 0}, session_id=0, epoch=0).session_id
    assert answered(fetch(client, name, {}, session, 1)) == {}  # every partition read, at its end
    answer = long_poll(client, name, session, epoch=2)
    produce(connect(), name, records(b"wake up"), partition=2)
    assert answered(answer()) == {2: [b"wake up"]}  # in this answer, not the next one
    produce(connect(), name, records(b"later"), partition=0)
    assert answered(fetch(client, name, {2: 1}, session, 3)) == {0: [b"later"]}
