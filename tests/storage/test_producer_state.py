"""Producer state transitions (Kafka's idempotent producer rules) and their effect on Log appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.errors import InvalidRecordError
from odradek.storage.config import INT_MAX, LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.storage.producer_state import (
    BatchMetadata,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    in_sequence,
    last_sequence,
)
from tests.storage.storage_helpers import read_records

NOW = 1_700_000_000_000


def idempotent(
    producer_id: int = 7, epoch: int = 0, seq: int = 0, count: int = 1, timestamp: int = NOW
) -> bytes:
    return build_batch(
        [SimpleRecord(b"v%d" % i, timestamp=timestamp) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def header(data: bytes) -> BatchHeader:
    return BatchHeader.unpack_from(data)


def new_log(path: Path, clock: ManualClock | None = None, **config: int | str) -> Log:
    return Log(path / "topic-0", LogConfig(**config), clock or ManualClock(NOW))  # type: ignore[arg-type]


# -- sequence arithmetic ---------------------------------------------------------------------------


def test_last_sequence_wraps_at_int_max() -> None:
    assert last_sequence(header(idempotent(seq=10, count=3))) == 12
    assert last_sequence(header(idempotent(seq=INT_MAX - 1, count=4))) == 1
    assert in_sequence(INT_MAX, 0) and in_sequence(4, 5)
    assert not in_sequence(4, 6) and not in_sequence(INT_MAX, 1)


# -- the manager alone -----------------------------------------------------------------------------


def apply(state: ProducerStateManager, data: bytes, offset: int) -> object:
    prepared = state.prepare_append([header(data)], offset, -1)
    if not isinstance(prepared, BatchMetadata):
        state.commit(prepared, offset + header(data).last_offset_delta + 1)
    return prepared


def test_first_batch_of_a_producer_is_recorded(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(seq=0, count=3), 10)
    entry = state.last_entry(7)
    assert entry is not None and entry.producer_epoch == 0
    assert entry.batches == (BatchMetadata(0, 2, 10, 12, NOW),)
    assert state.map_end_offset == 13


def test_only_the_last_five_batches_are_retained(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(7):
        apply(state, idempotent(seq=i), i)
    entry = state.last_entry(7)
    assert entry is not None
    assert [b.first_seq for b in entry.batches] == [2, 3, 4, 5, 6]


def test_duplicate_of_a_retained_batch_is_reported_not_recorded(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(3):
        apply(state, idempotent(seq=2 * i, count=2), 2 * i)
    found = state.prepare_append([header(idempotent(seq=2, count=2))], 99, -1)
    assert found == BatchMetadata(2, 3, 2, 3, NOW)
    # same first sequence but a different last sequence is not that batch: it is out of order
    with pytest.raises(OutOfOrderSequenceError):
        state.prepare_append([header(idempotent(seq=2, count=1))], 99, -1)


def test_older_epoch_is_fenced_newer_epoch_restarts_at_zero(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(epoch=3, seq=0), 0)
    with pytest.raises(InvalidProducerEpochError) as fenced:
        state.prepare_append([header(idempotent(epoch=2, seq=1))], 1, -1)
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH == 47
    with pytest.raises(OutOfOrderSequenceError) as gap:
        state.prepare_append([header(idempotent(epoch=4, seq=1))], 1, -1)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    apply(state, idempotent(epoch=4, seq=0), 1)
    entry = state.last_entry(7)
    assert entry is not None and entry.producer_epoch == 4
    assert [b.first_offset for b in entry.batches] == [1]  # the old epoch's batches are gone


def test_sequence_gap_is_out_of_order(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(seq=0, count=2), 0)
    with pytest.raises(OutOfOrderSequenceError):
        state.prepare_append([header(idempotent(seq=3))], 2, -1)
    apply(state, idempotent(seq=2), 2)


def test_unknown_producer_is_accepted_at_any_sequence(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(producer_id=42, epoch=5, seq=1234), 0)
    entry = state.last_entry(42)
    assert entry is not None and entry.last_seq == 1234


def test_negative_sequence_with_a_producer_id_is_an_invalid_record(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    with pytest.raises(InvalidRecordError):
        state.prepare_append([header(idempotent(seq=-1))], 0, -1)


def test_sequence_wraps_to_zero_after_int_max(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(seq=INT_MAX - 1, count=2), 0)
    apply(state, idempotent(seq=0), 2)
    entry = state.last_entry(7)
    assert entry is not None and entry.last_seq == 0


def test_batches_of_one_request_are_checked_in_order(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    apply(state, idempotent(seq=0), 0)
    good = [header(idempotent(seq=1)), header(idempotent(seq=2, count=2))]
    prepared = state.prepare_append(good, 1, -1)
    assert isinstance(prepared, dict) and prepared[7].last_seq == 3
    with pytest.raises(OutOfOrderSequenceError):
        state.prepare_append([header(idempotent(seq=1)), header(idempotent(seq=3))], 1, -1)
    entry = state.last_entry(7)
    assert entry is not None and entry.last_seq == 0  # preparing changed nothing


def test_idle_producers_expire(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    apply(state, idempotent(producer_id=1, timestamp=NOW), 0)
    apply(state, idempotent(producer_id=2, timestamp=NOW + 500), 1)
    assert state.remove_expired_producers(NOW + 999) == 0
    assert state.remove_expired_producers(NOW + 1000) == 1
    assert set(state.producers) == {2}


def test_snapshot_round_trip_and_corrupt_snapshot_falls_back(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(6):
        apply(state, idempotent(producer_id=i % 2, seq=i // 2), i)
    first = state.take_snapshot()
    assert first.name == "00000000000000000006.snapshot"
    apply(state, idempotent(producer_id=0, seq=3), 6)
    second = state.take_snapshot()
    second.write_bytes(second.read_bytes()[:-1] + b"\xff")

    reloaded = ProducerStateManager(tmp_path)
    reloaded.load([], 7, NOW)
    assert not second.exists()  # the corrupt one was deleted and the older one used
    assert reloaded.producers[0].batches == tuple(b for b in state.producers[0].batches if b.first_offset < 6)
    assert reloaded.producers[1] == state.producers[1]
    assert first.exists()


# -- through the Log -------------------------------------------------------------------------------


def test_log_answers_a_duplicate_with_the_original_offsets_and_stores_it_once(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(idempotent(seq=0, count=2), 0)
    log.append_as_leader(build_batch([SimpleRecord(b"plain")]), 0)
    log.append_as_leader(idempotent(seq=2, count=3), 0)

    again = log.append_as_leader(idempotent(seq=0, count=2), 0)

    assert (again.first_offset, again.last_offset, again.duplicate) == (0, 1, True)
    assert (again.record_count, again.log_append_time) == (0, -1)
    assert log.log_end_offset == 6
    assert [r.offset for r in read_records(log.read(0, 1 << 20))] == list(range(6))


def test_log_duplicate_with_log_append_time_reports_the_original_append_time(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = new_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(idempotent(seq=0), 0)
    clock.advance(5000)
    again = log.append_as_leader(idempotent(seq=0), 0)
    assert again.duplicate and again.log_append_time == first.log_append_time == NOW


def test_log_refuses_fenced_epochs_and_gaps_without_appending(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(idempotent(epoch=1, seq=0), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idempotent(epoch=0, seq=1), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(epoch=1, seq=5), 0)
    assert log.log_end_offset == 1
    assert log.append_as_leader(idempotent(epoch=1, seq=1), 0).first_offset == 1


def test_state_survives_a_clean_close_through_the_snapshot(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for seq in range(3):
        log.append_as_leader(idempotent(seq=seq), 0)
    log.close()
    assert (log.dir / "00000000000000000003.snapshot").exists()

    reopened = new_log(tmp_path)
    assert reopened.append_as_leader(idempotent(seq=1), 0).first_offset == 1
    assert reopened.append_as_leader(idempotent(seq=3), 0).first_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(idempotent(seq=9), 0)


@pytest.mark.parametrize("keep_snapshots", [True, False])
def test_state_is_rebuilt_from_batch_headers_after_a_crash(tmp_path: Path, keep_snapshots: bool) -> None:
    size = len(idempotent())
    log = new_log(tmp_path, segment_bytes=2 * size)
    for seq in range(5):
        log.append_as_leader(idempotent(seq=seq), 0)
    snapshots = sorted(p.name for p in log.dir.glob("*.snapshot"))
    assert snapshots == ["00000000000000000002.snapshot", "00000000000000000004.snapshot"]
    for segment in log.segments:  # a crash: no close, no final snapshot
        segment.close()
    if not keep_snapshots:  # a log written before snapshots existed: a full header scan
        for path in log.dir.glob("*.snapshot"):
            path.unlink()

    reopened = new_log(tmp_path, segment_bytes=2 * size)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and [b.first_offset for b in entry.batches] == [0, 1, 2, 3, 4]
    assert reopened.append_as_leader(idempotent(seq=4), 0).duplicate


def test_snapshots_past_the_log_end_are_dropped_on_truncation(tmp_path: Path) -> None:
    size = len(idempotent())
    log = new_log(tmp_path, segment_bytes=2 * size)
    for seq in range(5):
        log.append_as_leader(idempotent(seq=seq), 0)
    assert log.truncate_to(3)
    assert [p.name for p in log.dir.glob("*.snapshot")] == ["00000000000000000002.snapshot"]
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 2
    assert log.append_as_leader(idempotent(seq=3), 0).first_offset == 3


def test_follower_appends_update_the_state_without_checks(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    data = bytearray(idempotent(epoch=2, seq=40, count=2))
    log.append_as_follower(data)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (2, 41)


def test_retention_removes_snapshots_below_the_first_segment(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    size = len(idempotent())
    log = new_log(tmp_path, clock, segment_bytes=2 * size, retention_ms=1000)
    for seq in range(5):
        log.append_as_leader(idempotent(seq=seq, timestamp=NOW - 10_000), 0)
    clock.advance(1)
    assert log.delete_retention_segments(clock.time_ms()) == 2
    assert [p.name for p in log.dir.glob("*.snapshot")] == ["00000000000000000004.snapshot"]
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 4  # state outlives the deleted segments


def test_log_expires_idle_producers(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = Log(tmp_path / "topic-0", LogConfig(), clock, producer_id_expiration_ms=1000)
    log.append_as_leader(idempotent(seq=5), 0)
    clock.advance(1000)
    assert log.remove_expired_producers(clock.time_ms()) == 1
    assert log.append_as_leader(idempotent(seq=77), 0).first_offset == 1  # unknown again: accepted


def test_log_manager_retention_run_expires_idle_producers(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = LogManager([tmp_path], LogConfig(), clock, producer_id_expiration_ms=1000)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(idempotent(seq=0), 0)
    manager.run_retention(clock.time_ms() + 999)
    assert log.producer_state.last_entry(7) is not None
    manager.run_retention(clock.time_ms() + 1000)
    assert log.producer_state.last_entry(7) is None
    manager.shutdown()


def test_unwritable_snapshot_is_a_storage_error(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path / "missing-dir")
    with pytest.raises(KafkaStorageError):
        state.take_snapshot()
