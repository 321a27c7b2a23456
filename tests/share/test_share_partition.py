"""The share-partition state machine (coordinator/share_partition.py), the records of
`__share_group_state` (coordinator/share_records.py) and the share session rules
(server/share_session.py), without a broker."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.coordinator.share_partition import (
    AcknowledgeType,
    Acquired,
    RecordState,
    SharePartition,
    ShareSettings,
    StateBatch,
)
from odradek.coordinator.share_records import ShareState, StateKey, replay, snapshot_record, update_record
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.server.share_partitions import batch_spans, skipped_batches
from odradek.server.share_session import ShareSessionCache

SETTINGS = ShareSettings(lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)
ACCEPT, RELEASE, REJECT, RENEW = (
    int(t)
    for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.RENEW)
)


def fresh(start: int = 0, settings: ShareSettings = SETTINGS) -> SharePartition:
    return SharePartition(settings, start)


def test_acquire_takes_new_records_once() -> None:
    share = fresh()
    assert share.acquire("a", [(0, 9)], 0, 0) == [Acquired(0, 9, 1)]
    assert share.acquire("b", [(0, 9)], 0, 0) == []
    assert share.next_fetch_offset() == 10
    assert all(share.records[o].member == "a" for o in range(10))


def test_max_records_splits_a_batch_between_members() -> None:
    share = fresh()
    assert share.acquire("a", [(0, 9)], 4, 0) == [Acquired(0, 3, 1)]
    assert share.acquire("b", [(0, 9)], 0, 0) == [Acquired(4, 9, 1)]


def test_records_below_the_start_offset_are_not_acquired() -> None:
    share = fresh(start=5)
    assert share.acquire("a", [(0, 9)], 0, 0) == [Acquired(5, 9, 1)]


def test_accept_advances_the_start_offset_over_the_done_prefix() -> None:
    share = fresh()
    share.acquire("a", [(0, 9)], 0, 0)
    assert share.acknowledge("a", [(2, 4, [ACCEPT])], 0) == ErrorCode.NONE
    assert share.start_offset == 0
    assert share.acknowledge("a", [(0, 1, [ACCEPT])], 0) == ErrorCode.NONE
    assert share.start_offset == 5
    assert share.records[5].state is RecordState.ACQUIRED


def test_release_makes_records_available_again_with_their_delivery_count() -> None:
    share = fresh()
    share.acquire("a", [(0, 2)], 0, 0)
    assert share.acknowledge("a", [(0, 2, [RELEASE])], 0) == ErrorCode.NONE
    assert share.next_fetch_offset() == 0
    assert share.acquire("b", [(0, 2)], 0, 0) == [Acquired(0, 2, 2)]


def test_reject_archives() -> None:
    share = fresh()
    share.acquire("a", [(0, 2)], 0, 0)
    assert share.acknowledge("a", [(0, 0, [REJECT]), (1, 2, [RELEASE])], 0) == ErrorCode.NONE
    assert share.start_offset == 1  # 0 is archived: out of the window
    assert share.acquire("b", [(0, 2)], 0, 0) == [Acquired(1, 2, 2)]


def test_per_offset_acknowledge_types() -> None:
    share = fresh()
    share.acquire("a", [(0, 2)], 0, 0)
    assert share.acknowledge("a", [(0, 2, [ACCEPT, RELEASE, REJECT])], 0) == ErrorCode.NONE
    assert share.start_offset == 1
    assert share.records[1].state is RecordState.AVAILABLE
    assert share.records[2].state is RecordState.ARCHIVED


def test_acknowledging_records_of_another_member_is_invalid_record_state_and_changes_nothing() -> None:
    share = fresh()
    share.acquire("a", [(0, 4)], 2, 0)
    share.acquire("b", [(0, 4)], 0, 0)
    assert share.acknowledge("b", [(2, 4, [ACCEPT]), (0, 0, [ACCEPT])], 0) == ErrorCode.INVALID_RECORD_STATE
    assert all(share.records[o].state is RecordState.ACQUIRED for o in range(5))
    assert share.acknowledge("a", [(5, 5, [ACCEPT])], 0) == ErrorCode.INVALID_RECORD_STATE  # not in flight
    assert share.acknowledge("a", [(1, 0, [ACCEPT])], 0) == ErrorCode.INVALID_REQUEST
    assert share.acknowledge("a", [(0, 1, [9])], 0) == ErrorCode.INVALID_REQUEST
    assert share.acknowledge("a", [(0, 1, [ACCEPT, ACCEPT, ACCEPT])], 0) == ErrorCode.INVALID_REQUEST


def test_an_accepted_record_cannot_be_acknowledged_again() -> None:
    share = fresh()
    share.acquire("a", [(0, 4)], 0, 0)
    assert share.acknowledge("a", [(1, 1, [ACCEPT])], 0) == ErrorCode.NONE
    assert share.acknowledge("a", [(1, 1, [REJECT])], 0) == ErrorCode.INVALID_RECORD_STATE


def test_lock_expiry_releases_and_archives_at_the_delivery_limit() -> None:
    share = fresh()
    now = 0
    for delivery in range(1, 4):
        assert share.acquire("a", [(0, 0)], 0, now) == [Acquired(0, 0, delivery)]
        assert not share.expire_locks(now + 999)
        now += 1000
        assert share.expire_locks(now)
    assert share.start_offset == 1  # the third delivery reached the limit: archived
    assert share.acquire("b", [(0, 0)], 0, now) == []


def test_renew_extends_the_lock() -> None:
    share = fresh()
    share.acquire("a", [(0, 0)], 0, 0)
    assert share.acknowledge("a", [(0, 0, [RENEW])], 800) == ErrorCode.NONE
    assert not share.expire_locks(1500)
    assert share.expire_locks(1800)


def test_locks_expire_each_at_its_own_deadline_and_a_restore_keeps_them() -> None:
    share = fresh()
    share.acquire("a", [(0, 4)], 0, 0)  # deadline 1000
    share.acquire("b", [(5, 9)], 0, 600)  # deadline 1600
    saved = share.copy()
    assert share.acknowledge("a", [(0, 4, [ACCEPT])], 100) == ErrorCode.NONE
    share.restore(saved)  # as after a failed write of the acknowledgement
    assert share.start_offset == 0 and share.records[0].member == "a"
    assert share.expire_locks(1000) and share.next_fetch_offset() == 0
    assert share.records[5].member == "b" and not share.expire_locks(1599)
    assert share.expire_locks(1600) and share.next_deadline() is None
    assert share.acquire("c", [(0, 9)], 0, 2000) == [Acquired(0, 9, 2)]


def test_release_member_gives_back_only_its_records() -> None:
    share = fresh()
    share.acquire("a", [(0, 9)], 5, 0)
    share.acquire("b", [(0, 9)], 0, 0)
    assert share.release_member("a")
    assert share.next_fetch_offset() == 0
    assert all(share.records[o].member == "b" for o in range(5, 10))


def test_max_record_locks_caps_the_in_flight_window() -> None:
    share = fresh(settings=ShareSettings(1000, 5, 100))
    assert share.acquire("a", [(0, 149)], 0, 0) == [Acquired(0, 99, 1)]
    assert not share.can_acquire()
    assert share.acknowledge("a", [(0, 9, [ACCEPT])], 0) == ErrorCode.NONE
    assert share.can_acquire()
    assert share.acquire("b", [(100, 149)], 0, 0) == [Acquired(100, 109, 1)]


def test_skip_below_the_log_start_offset() -> None:
    share = fresh()
    share.acquire("a", [(0, 4)], 0, 0)
    share.skip_below(3)
    assert share.start_offset == 3
    assert sorted(share.records) == [3, 4]
    share.skip_below(10)
    assert (share.start_offset, share.next_offset, share.records) == (10, 10, {})


def test_state_batches_round_trip_with_acquired_written_as_available() -> None:
    share = fresh()
    share.acquire("a", [(0, 9)], 0, 0)
    share.acknowledge("a", [(3, 4, [ACCEPT]), (5, 5, [REJECT]), (6, 6, [RELEASE])], 0)
    batches = share.state_batches()
    assert batches == [
        StateBatch(0, 2, RecordState.AVAILABLE, 1),
        StateBatch(3, 4, RecordState.ACKNOWLEDGED, 1),
        StateBatch(5, 5, RecordState.ARCHIVED, 1),
        StateBatch(6, 9, RecordState.AVAILABLE, 1),
    ]
    back = SharePartition.from_state(SETTINGS, share.start_offset, batches)
    assert back.next_fetch_offset() == 0
    assert back.next_offset == 10
    assert back.acquire("b", [(0, 9)], 0, 0) == [Acquired(0, 2, 2), Acquired(6, 9, 2)]


def test_snapshot_and_updates_replay() -> None:
    key = StateKey("g", uuid.uuid4(), 3)
    states: dict[StateKey, ShareState] = {}
    k, v = snapshot_record(key, ShareState(0, 1, 0, (StateBatch(0, 9, 0, 1),)))
    replay(states, k, v)
    k, v = update_record(key, 0, 1, 2, [StateBatch(2, 4, RecordState.ACKNOWLEDGED, 1)])
    replay(states, k, v)
    assert states[key].start_offset == 2
    assert states[key].batches == (StateBatch(2, 4, 2, 1), StateBatch(5, 9, 0, 1))
    replay(states, k, None)  # an update tombstone leaves the state
    assert key in states
    replay(states, snapshot_record(key, states[key])[0], None)
    assert key not in states


def test_coordinator_key_is_kafkas() -> None:
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    assert StateKey("grp", topic_id, 7).coordinator_key() == "grp:AAECAwQFBgcICQoLDA0ODw:7"


def test_share_session_rules() -> None:
    cache = ShareSessionCache(max_sessions=1)
    error, session = cache.open(("g", "m"), [(uuid.UUID(int=1), 0)])
    assert error == ErrorCode.NONE and session is not None and session.epoch == 1
    assert cache.check(("g", "m"), 2)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.check(("g", "x"), 1)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.open(("g", "x"), [])[0] == ErrorCode.SHARE_SESSION_NOT_FOUND  # the cache is full
    error, same = cache.check(("g", "m"), 1)
    assert same is session
    cache.update(session, [(uuid.UUID(int=2), 0)], [(uuid.UUID(int=1), 0)])
    assert session.epoch == 2 and list(session.partitions) == [(uuid.UUID(int=2), 0)]
    assert cache.check(("g", "m"), -1)[1] is session
    assert cache.close(("g", "m")) is session
    assert cache.open(("g", "x"), [])[0] == ErrorCode.NONE


def test_skipped_batches_are_archived_never_acquired() -> None:
    share = fresh()
    assert share.acquire("a", [(0, 1), (2, 3), (4, 4)], 0, 0, skipped={2, 4}) == [Acquired(0, 1, 1)]
    assert share.records[2].state is RecordState.ARCHIVED and share.next_offset == 5
    share.acknowledge("a", [(0, 1, [ACCEPT])], 0)
    assert share.start_offset == 5  # the archived offsets do not hold the start offset back


def test_batch_spans_and_the_batches_a_read_committed_group_skips(tmp_path: Path) -> None:
    def batch(base: int, count: int, pid: int = -1, txn: bool = False, control: bool = False) -> bytes:
        records = [SimpleRecord(b"v%d" % i, timestamp=1) for i in range(count)]
        return build_batch(
            records,
            base_offset=base,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            is_transactional=txn,
            is_control=control,
        )

    data = b"".join(
        [
            batch(0, 2),  # plain
            batch(2, 2, pid=7, txn=True),  # aborted below
            batch(4, 1, pid=8, txn=True),  # committed
            batch(5, 1, pid=7, txn=True, control=True),  # 7's abort marker
            batch(6, 1, pid=8, txn=True, control=True),  # 8's commit marker
            batch(7, 1, pid=7, txn=True),  # 7's next transaction, not aborted
        ]
    )
    path = tmp_path / "log"
    path.write_bytes(data)
    with path.open("rb") as f:
        spans = batch_spans([FileSlice(f.fileno(), 0, len(data))])
        # only the batches before the first at or past `below` (and the first batch whatever it is)
        assert [s.base for s in batch_spans([FileSlice(f.fileno(), 0, len(data))], below=5)] == [0, 2, 4]
        assert [s.base for s in batch_spans([FileSlice(f.fileno(), 0, len(data))], below=0)] == [0]
    assert [(s.base, s.last, s.producer_id, s.transactional, s.control) for s in spans] == [
        (0, 1, -1, False, False),
        (2, 3, 7, True, False),
        (4, 4, 8, True, False),
        (5, 5, 7, True, True),
        (6, 6, 8, True, True),
        (7, 7, 7, True, False),
    ]
    assert sum(s.size for s in spans) == len(data)
    assert skipped_batches(spans, [(7, 2)]) == {2, 5, 6}
    assert skipped_batches(spans, []) == {5, 6}


def test_offsets_a_read_skips_over_are_archived() -> None:
    share = fresh()
    assert share.acquire("a", [(0, 1), (5, 6)], 0, 0) == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    assert [share.records[o].state for o in (2, 3, 4)] == [RecordState.ARCHIVED] * 3
    share.acknowledge("a", [(0, 1, [ACCEPT]), (5, 6, [ACCEPT])], 0)
    assert (share.start_offset, share.records) == (7, {})


def test_a_full_window_or_budget_stops_before_later_batches() -> None:
    share = fresh(settings=ShareSettings(1000, 5, 100))
    assert share.acquire("a", [(0, 99), (100, 104), (110, 119)], 0, 0) == [Acquired(0, 99, 1)]
    assert share.next_offset == 100  # 100-119 are neither acquired nor archived
    other = fresh()
    assert other.acquire("a", [(0, 4), (10, 14)], 3, 0) == [Acquired(0, 2, 1)]
    assert other.next_offset == 3
