"""The partition side of transactions: producer state with open transactions, transaction markers,
the `.txnindex` (format, truncation, deletion, rebuild on recovery), the first unstable offset and
the aborted transactions a read_committed fetch collects."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker,
    read_end_txn_marker,
)
from odradek.protocol.records.errors import CorruptRecordError
from odradek.protocol.records.record import decode_records
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    snapshot_file_name,
)
from odradek.storage.txn_index import TXN_INDEX_ENTRY, AbortedTxn, TransactionIndex

NOW = 1_700_000_000_000


def txn_batch(producer_id: int = 7, epoch: int = 0, seq: int = 0, count: int = 1) -> bytes:
    return build_batch(
        [SimpleRecord(b"t%d" % i, key=b"k%d" % i, timestamp=NOW) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def plain_batch(count: int = 1) -> bytes:
    return build_batch([SimpleRecord(b"p%d" % i, key=b"p%d" % i, timestamp=NOW) for i in range(count)])


def new_log(path: Path, clock: ManualClock | None = None, **config: int | str) -> Log:
    return Log(path / "topic-0", LogConfig(**config), clock or ManualClock(NOW))  # type: ignore[arg-type]


def aborted_entries(log: Log) -> list[AbortedTxn]:
    return [entry for segment in log.segments for entry in segment.txn_index.entries]


# -- control records -------------------------------------------------------------------------------


def test_end_txn_marker_round_trip() -> None:
    marker = EndTransactionMarker(ControlRecordType.ABORT, 3)
    data = build_end_txn_marker(7, 2, marker, NOW)
    header = BatchHeader.unpack_from(data)
    assert header.is_control and header.is_transactional and header.records_count == 1
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    assert read_end_txn_marker(data, 0, header) == marker
    (record,) = decode_records(data, include_control=True)
    assert record.key == struct.pack(">hh", 0, 0) and record.value == struct.pack(">hi", 0, 3)


# -- producer state --------------------------------------------------------------------------------


def test_a_transactional_batch_opens_a_transaction_at_its_first_offset(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(plain_batch(2), 0)
    log.append_as_leader(txn_batch(seq=0, count=2), 0)
    log.append_as_leader(txn_batch(seq=2), 0)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.current_txn_first_offset == 2
    assert log.producer_state.ongoing_txns == {2: 7}
    assert log.first_unstable_offset == 2


def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(seq=0), 0)
    idempotent = build_batch(
        [SimpleRecord(b"x", timestamp=NOW)], producer_id=7, producer_epoch=0, base_sequence=1
    )
    with pytest.raises(InvalidTxnStateError) as raised:
        log.append_as_leader(idempotent, 0)
    assert raised.value.error_code == 48
    assert log.log_end_offset == 1


def test_a_commit_completes_the_transaction_and_writes_no_index_entry(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(count=3), 0)
    info = log.append_marker(7, 0, coordinator_epoch=1, commit=True, leader_epoch=0)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (3, 3, 4)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 1
    assert entry.last_seq == 2  # the marker keeps the epoch's batches
    assert log.producer_state.ongoing_txns == {} and aborted_entries(log) == []
    assert log.first_unstable_offset == 0  # until the high watermark passes the marker
    log.on_high_watermark_updated(3)
    assert log.first_unstable_offset == 0
    log.on_high_watermark_updated(4)
    assert log.first_unstable_offset == -1


def test_a_marker_without_an_ongoing_transaction_completes_nothing(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_marker(7, 0, coordinator_epoch=0, commit=False, leader_epoch=0)
    assert aborted_entries(log) == [] and log.first_unstable_offset == -1
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.batches == ()


def test_markers_are_fenced_by_producer_and_coordinator_epochs(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(7, 2, coordinator_epoch=0, commit=True, leader_epoch=0)
    log.append_marker(7, 3, coordinator_epoch=5, commit=True, leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError) as raised:
        log.append_marker(7, 3, coordinator_epoch=4, commit=True, leader_epoch=0)
    assert raised.value.error_code == 52
    assert log.log_end_offset == 2


def test_an_abort_with_a_newer_epoch_restarts_the_sequence(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(epoch=0, seq=0), 0)
    log.append_marker(7, 1, coordinator_epoch=0, commit=False, leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(txn_batch(epoch=1, seq=1), 0)
    assert log.append_as_leader(txn_batch(epoch=1, seq=0), 0).first_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(epoch=0, seq=1), 0)


def test_producers_with_an_ongoing_transaction_do_not_expire(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = Log(tmp_path / "topic-0", LogConfig(), clock, producer_id_expiration_ms=1000)
    log.append_as_leader(txn_batch(producer_id=1), 0)
    log.append_as_leader(txn_batch(producer_id=2), 0)
    log.append_marker(2, 0, coordinator_epoch=0, commit=True, leader_epoch=0)
    clock.advance(10_000)
    assert log.remove_expired_producers(clock.time_ms()) == 1
    assert log.producer_state.last_entry(1) is not None and log.producer_state.last_entry(2) is None


# -- interleaved transactions: LSO and the transaction index ---------------------------------------


def interleaved(log: Log) -> None:
    """p1 opens at 0, p2 at 2, p1 aborts at 4, p3 opens at 5, p2 aborts at 6, p3 commits at 7."""
    log.append_as_leader(txn_batch(producer_id=1, count=2), 0)  # 0-1
    log.append_as_leader(txn_batch(producer_id=2), 0)  # 2
    log.append_as_leader(txn_batch(producer_id=1, seq=2), 0)  # 3
    log.append_marker(1, 0, 0, commit=False, leader_epoch=0)  # 4
    log.append_as_leader(txn_batch(producer_id=3), 0)  # 5
    log.append_marker(2, 0, 0, commit=False, leader_epoch=0)  # 6
    log.append_marker(3, 0, 0, commit=True, leader_epoch=0)  # 7


def test_first_unstable_offset_with_interleaved_transactions(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(producer_id=1, count=2), 0)
    log.append_as_leader(txn_batch(producer_id=2), 0)
    assert log.first_unstable_offset == 0
    log.append_as_leader(txn_batch(producer_id=1, seq=2), 0)
    log.append_marker(1, 0, 0, commit=False, leader_epoch=0)
    assert log.first_unstable_offset == 0  # p1's abort is not yet below the high watermark
    log.on_high_watermark_updated(5)
    assert log.first_unstable_offset == 2  # p2's transaction is still open
    log.append_marker(2, 0, 0, commit=True, leader_epoch=0)
    log.on_high_watermark_updated(6)
    assert log.first_unstable_offset == -1


def test_aborts_are_indexed_with_the_last_stable_offset_at_completion(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    interleaved(log)
    assert aborted_entries(log) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 5)]


def test_collect_aborted_transactions_for_a_fetch_range(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    interleaved(log)
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 5)]
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 4, 2)]  # stops at p1's LSO 2
    assert log.collect_aborted_transactions(5, 8) == [AbortedTxn(2, 2, 6, 5)]
    assert log.collect_aborted_transactions(7, 8) == []


def test_collect_searches_later_segments_for_markers(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=len(txn_batch()) * 2)
    interleaved(log)
    assert len(log.segments) > 2
    assert log.collect_aborted_transactions(0, 1) == [AbortedTxn(1, 0, 4, 2)]
    assert log.collect_aborted_transactions(2, 3) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 5)]


# -- the transaction index file --------------------------------------------------------------------


def test_txn_index_file_format_round_trip(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    entries = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2**40, 2, 6, 5)]
    for entry in entries:
        index.append(entry)
    index.persist(fsync=True)
    data = index.path.read_bytes()
    assert TXN_INDEX_ENTRY.size == 34 and len(data) == 68
    assert data[:34] == struct.pack(">hqqqq", 0, 1, 0, 4, 2)
    loaded = TransactionIndex(index.path)
    loaded.load()
    assert loaded.entries == entries


def test_a_log_writes_the_txn_index_of_the_segment_holding_the_marker(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    interleaved(log)
    log.flush()
    path = log.dir / "00000000000000000000.txnindex"
    assert path.stat().st_size == 2 * TXN_INDEX_ENTRY.size
    log.close()
    reopened = new_log(tmp_path)
    assert aborted_entries(reopened) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 5)]


def test_truncation_removes_the_entries_of_removed_markers(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    interleaved(log)
    log.flush()
    assert log.truncate_to(6)
    assert aborted_entries(log) == [AbortedTxn(1, 0, 4, 2)]
    assert log.producer_state.ongoing_txns == {2: 2, 5: 3}  # p2 and p3 are open again
    log.on_high_watermark_updated(6)
    assert log.first_unstable_offset == 2
    log.flush()
    assert (log.dir / "00000000000000000000.txnindex").stat().st_size == TXN_INDEX_ENTRY.size


def test_retention_deletes_the_txn_index_with_its_segment(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = new_log(tmp_path, clock, segment_bytes=len(txn_batch()) * 3)
    interleaved(log)
    log.roll()
    log.flush()
    indexes = sorted(path.name for path in log.dir.glob("*.txnindex"))
    assert indexes
    log.advance_start_offset(log.log_end_offset)
    log.delete_retention_segments(clock.time_ms())
    assert list(log.dir.glob("*.txnindex")) == []


# -- recovery and snapshots ------------------------------------------------------------------------


def crash(log: Log) -> None:
    """Stop without close: no final snapshot, no flush."""
    for segment in log.segments:
        segment.close()


@pytest.mark.parametrize("segment_bytes", [1 << 20, 200])
def test_an_unclean_shutdown_rebuilds_txn_indexes_and_ongoing_transactions(
    tmp_path: Path, segment_bytes: int
) -> None:
    log = new_log(tmp_path, segment_bytes=segment_bytes)
    interleaved(log)
    log.append_as_leader(txn_batch(producer_id=4), 0)  # 8: open at the crash
    expected = aborted_entries(log)
    crash(log)
    for path in log.dir.glob("*.txnindex"):
        path.unlink()

    reopened = new_log(tmp_path, segment_bytes=segment_bytes)
    assert aborted_entries(reopened) == expected
    assert reopened.producer_state.ongoing_txns == {8: 4}
    assert all(not segment.txn_index_stale for segment in reopened.segments)
    reopened.append_marker(4, 0, 0, commit=False, leader_epoch=0)
    assert aborted_entries(reopened)[-1] == AbortedTxn(4, 8, 9, 10)


def test_recovery_does_not_duplicate_entries_of_trusted_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=200)
    interleaved(log)
    log.flush()
    expected = aborted_entries(log)
    recovery_point = log.active_segment.base_offset
    crash(log)
    reopened = Log(log.dir, LogConfig(segment_bytes=200), ManualClock(NOW), recovery_point=recovery_point)
    assert aborted_entries(reopened) == expected


def test_a_snapshot_carries_the_open_transaction(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(producer_id=1, count=2), 0)
    log.append_marker(1, 0, 3, commit=True, leader_epoch=0)
    log.append_as_leader(txn_batch(producer_id=2), 0)
    log.close()
    snapshot = (log.dir / snapshot_file_name(4)).read_bytes()
    assert struct.unpack_from(">h", snapshot)[0] == 2
    reopened = Log(log.dir, LogConfig(), ManualClock(NOW), clean_shutdown=True)
    assert reopened.producer_state.ongoing_txns == {3: 2}
    entry = reopened.producer_state.last_entry(1)
    assert entry is not None and entry.coordinator_epoch == 3 and entry.current_txn_first_offset == -1
    assert reopened.first_unstable_offset == 3


def test_a_version_1_snapshot_is_still_read(tmp_path: Path) -> None:
    from crc32c import crc32c

    log = new_log(tmp_path)
    log.append_as_leader(
        build_batch([SimpleRecord(b"x", timestamp=NOW)], producer_id=7, producer_epoch=1, base_sequence=0), 0
    )
    log.close()
    body = bytearray(struct.pack(">hIi", 1, 0, 1))
    body += struct.pack(">qhb", 7, 1, 1) + struct.pack(">iiqqq", 0, 0, 0, 0, NOW)
    struct.pack_into(">I", body, 2, crc32c(bytes(body[6:])))
    (log.dir / snapshot_file_name(1)).write_bytes(bytes(body))
    reopened = Log(log.dir, LogConfig(), ManualClock(NOW), clean_shutdown=True)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and (entry.producer_epoch, entry.last_seq, entry.last_timestamp) == (1, 0, NOW)
    assert reopened.append_as_leader(
        build_batch([SimpleRecord(b"y", timestamp=NOW)], producer_id=7, producer_epoch=1, base_sequence=0), 0
    ).duplicate


# -- followers -------------------------------------------------------------------------------------


def test_a_follower_replays_markers_into_its_state_and_txn_index(tmp_path: Path) -> None:
    leader = new_log(tmp_path / "leader")
    interleaved(leader)
    leader.append_as_leader(txn_batch(producer_id=4), 0)
    follower = new_log(tmp_path / "follower")
    follower.append_as_follower(bytearray(b"".join(s.path(".log").read_bytes() for s in leader.segments)))
    assert aborted_entries(follower) == aborted_entries(leader)
    assert follower.producer_state.ongoing_txns == {8: 4}
    assert follower.first_unstable_offset == leader.first_unstable_offset == 0


def test_a_follower_append_with_a_control_batch_that_is_no_marker_writes_nothing(tmp_path: Path) -> None:
    follower = new_log(tmp_path)
    odd = build_batch(
        [SimpleRecord(struct.pack(">hi", 0, 0), key=struct.pack(">hh", 0, 7), timestamp=NOW)],
        base_offset=1,
        producer_id=7,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytearray(txn_batch() + odd))
    assert follower.log_end_offset == 0 and follower.producer_state.ongoing_txns == {}
