"""FetchSessionCache and CachedPartition without a broker: creation, epochs, updates, eviction, and
which partitions an incremental response must carry."""

from __future__ import annotations

import random
import uuid

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.server.fetch_session import (
    EVICTION_MS,
    INT32_MAX,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)

NO_ID = uuid.UUID(int=0)


def cached(topic: str = "t", partition: int = 0, offset: int = 0) -> CachedPartition:
    return CachedPartition(NO_ID, topic, partition, offset, 1000, -1)


def partitions(count: int, topic: str = "t") -> list[CachedPartition]:
    return [cached(topic, index) for index in range(count)]


def fetch_topic(topic: str, *offsets: tuple[int, int]) -> FetchRequest.FetchTopic:
    parts = [
        FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=500) for p, o in offsets
    ]
    return FetchRequest.FetchTopic(topic=topic, partitions=parts)


def answer(
    error: int = 0, hw: int = 5, lso: int = 5, start: int = 0, records: bytes = b""
) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(
        error_code=error, high_watermark=hw, last_stable_offset=lso, log_start_offset=start, records=records
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def new_cache(clock: ManualClock, slots: int = 10) -> FetchSessionCache:
    return FetchSessionCache(slots, clock, rng=random.Random(7))


def session_of(cache: FetchSessionCache, session_id: int) -> FetchSession:
    session = cache.get(session_id)
    assert session is not None
    return session


def incremental(cache: FetchSessionCache, session_id: int, epoch: int, topic_ids: bool = False, **changes):
    return cache.incremental(
        session_id, epoch, topic_ids, changes.get("topics", []), changes.get("forgotten", [])
    )


def test_created_sessions_have_distinct_positive_ids_and_start_at_epoch_one(clock: ManualClock) -> None:
    cache = new_cache(clock)
    ids = {cache.maybe_create(partitions(1), privileged=False, uses_topic_ids=False) for _ in range(10)}
    assert len(ids) == 10 == len(cache) and all(0 < i <= INT32_MAX for i in ids)
    assert {session_of(cache, i).epoch for i in ids} == {1}


def test_incremental_errors_leave_the_session_as_it_was(clock: ManualClock) -> None:
    cache = new_cache(clock)
    session_id = cache.maybe_create(partitions(2), privileged=False, uses_topic_ids=False)
    unknown = session_id + 1 if session_id < INT32_MAX else 1
    assert incremental(cache, unknown, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert incremental(cache, session_id, 2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert incremental(cache, session_id, 1, topic_ids=True) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert session_of(cache, session_id).epoch == 1
    assert incremental(cache, session_id, 1) is session_of(cache, session_id)
    assert session_of(cache, session_id).epoch == 2
    assert incremental(cache, session_id, 1) == ErrorCode.INVALID_FETCH_SESSION_EPOCH  # replayed epoch


def test_the_epoch_wraps_to_one() -> None:
    assert (next_epoch(1), next_epoch(INT32_MAX - 1), next_epoch(INT32_MAX)) == (2, INT32_MAX, 1)


def test_incremental_requests_add_update_and_forget_partitions(clock: ManualClock) -> None:
    cache = new_cache(clock)
    session_id = cache.maybe_create([cached("a", 0), cached("a", 1), cached("b", 0)], False, False)
    forget = [FetchRequest.ForgottenTopic(topic="a", partitions=[0]), FetchRequest.ForgottenTopic(topic="zz")]
    session = incremental(
        cache, session_id, 1, topics=[fetch_topic("a", (1, 40)), fetch_topic("c", (3, 7))], forgotten=forget
    )
    assert isinstance(session, FetchSession)
    assert [
        (p.topic, p.partition, p.fetch_offset, p.partition_max_bytes) for p in session.partitions.values()
    ] == [
        ("a", 1, 40, 500),
        ("b", 0, 0, 1000),
        ("c", 3, 7, 500),
    ]


def test_topic_id_sessions_key_partitions_by_id(clock: ManualClock) -> None:
    cache = new_cache(clock)
    first, second = uuid.uuid4(), uuid.uuid4()
    start = CachedPartition(first, "", 0, 0, 1000, -1)
    session_id = cache.maybe_create([start], privileged=False, uses_topic_ids=True)
    topics = [
        FetchRequest.FetchTopic(
            topic_id=first, partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=9)]
        ),
        FetchRequest.FetchTopic(topic_id=second, partitions=[FetchRequest.FetchPartition(partition=0)]),
    ]
    session = incremental(cache, session_id, 1, topic_ids=True, topics=topics)
    assert isinstance(session, FetchSession)
    assert [(p.topic_id, p.fetch_offset) for p in session.partitions.values()] == [(first, 9), (second, 0)]
    forget = [FetchRequest.ForgottenTopic(topic_id=first, partitions=[0])]
    session = incremental(cache, session_id, 2, topic_ids=True, forgotten=forget)
    assert isinstance(session, FetchSession) and list(session.partitions) == [(second, "", 0)]


def test_no_slots_means_no_sessions(clock: ManualClock) -> None:
    cache = new_cache(clock, slots=0)
    assert cache.maybe_create(partitions(5), privileged=True, uses_topic_ids=False) == INVALID_SESSION_ID
    assert len(cache) == 0


def test_a_full_cache_evicts_only_a_smaller_consumer_session(clock: ManualClock) -> None:
    cache = new_cache(clock, slots=2)
    small = cache.maybe_create(partitions(2), privileged=False, uses_topic_ids=False)
    large = cache.maybe_create(partitions(5), privileged=False, uses_topic_ids=False)
    assert cache.maybe_create(partitions(2), privileged=False, uses_topic_ids=False) == INVALID_SESSION_ID
    bigger = cache.maybe_create(partitions(3), privileged=False, uses_topic_ids=False)
    assert bigger != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(large) is not None and len(cache) == 2


def test_a_follower_evicts_a_consumer_session_but_not_another_followers(clock: ManualClock) -> None:
    cache = new_cache(clock, slots=2)
    follower = cache.maybe_create(partitions(1), privileged=True, uses_topic_ids=False)
    consumer = cache.maybe_create(partitions(9), privileged=False, uses_topic_ids=False)
    second_follower = cache.maybe_create(partitions(1), privileged=True, uses_topic_ids=False)
    assert second_follower != INVALID_SESSION_ID and cache.get(consumer) is None
    assert cache.maybe_create(partitions(50), privileged=True, uses_topic_ids=False) == INVALID_SESSION_ID
    assert cache.get(follower) is not None and cache.get(second_follower) is not None


def test_an_idle_session_is_evicted_by_anyone_least_recently_used_first(clock: ManualClock) -> None:
    cache = new_cache(clock, slots=2)
    first = cache.maybe_create(partitions(3), privileged=True, uses_topic_ids=False)
    clock.advance(10)
    second = cache.maybe_create(partitions(3), privileged=True, uses_topic_ids=False)
    clock.advance(10)
    assert isinstance(incremental(cache, first, 1), FetchSession)  # first is now the most recent
    clock.advance(EVICTION_MS - 11)  # second has been idle for EVICTION_MS - 1
    assert cache.maybe_create(partitions(1), privileged=False, uses_topic_ids=False) == INVALID_SESSION_ID
    clock.advance(1)
    assert cache.maybe_create(partitions(1), privileged=False, uses_topic_ids=False) != INVALID_SESSION_ID
    assert cache.get(second) is None and cache.get(first) is not None


def test_removed_sessions_are_gone(clock: ManualClock) -> None:
    cache = new_cache(clock)
    session_id = cache.maybe_create(partitions(1), privileged=False, uses_topic_ids=False)
    assert cache.remove(session_id) is not None and cache.remove(session_id) is None
    assert incremental(cache, session_id, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_partition_is_answered_when_it_has_records_or_its_offsets_changed() -> None:
    partition = cached()
    assert partition.must_respond(answer())  # the first answer tells the offsets
    assert not partition.must_respond(answer())
    assert partition.must_respond(answer(records=b"batch"))
    assert partition.must_respond(answer(hw=6, lso=5))
    assert partition.must_respond(answer(hw=6, lso=6))
    assert partition.must_respond(answer(hw=6, lso=6, start=3))
    assert not partition.must_respond(answer(hw=6, lso=6, start=3))


def test_a_partition_with_an_error_is_answered_and_so_is_its_next_answer() -> None:
    partition = cached()
    assert partition.must_respond(answer())
    assert partition.must_respond(answer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, hw=-1, lso=-1, start=-1))
    assert partition.must_respond(answer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, hw=-1, lso=-1, start=-1))
    assert partition.must_respond(answer())
    assert not partition.must_respond(answer())


def test_move_to_end_changes_the_read_order(clock: ManualClock) -> None:
    cache = new_cache(clock)
    session = session_of(cache, cache.maybe_create(partitions(3), privileged=False, uses_topic_ids=False))
    session.move_to_end(session.partitions[(NO_ID, "t", 0)])
    assert [p.partition for p in session.partitions.values()] == [1, 2, 0]
