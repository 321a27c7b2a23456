"""`__transaction_state` records: Kafka's TransactionLogKey v0 and TransactionLogValue v0 bytes, the
flexible v1 read, and the state transitions of a transactional id."""

from __future__ import annotations

import struct

import pytest

from odradek.coordinator.txn_metadata import (
    MAX_PRODUCER_EPOCH,
    TxnMetadata,
    TxnState,
    completed,
    from_value,
    initialized,
    needs_new_producer_id,
    prepared,
    with_partitions,
)
from odradek.coordinator.txn_records import (
    TxnLogValue,
    TxnRecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

VALUE = TxnLogValue(
    producer_id=42,
    producer_epoch=3,
    timeout_ms=60_000,
    status=TxnState.ONGOING,
    partitions=(("a", 0), ("a", 2), ("b", 1)),
    last_update_ms=1_700_000_000_123,
    start_ms=1_700_000_000_000,
)


def test_key_is_version_0_and_the_transactional_id() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx")) == "tx"


def test_value_v0_layout() -> None:
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60_000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )  # fmt: skip
    assert encode_value(VALUE) == expected
    assert decode_value(expected) == VALUE


def test_value_v1_is_read_in_the_flexible_encoding() -> None:
    flexible = (
        struct.pack(">hqhib", 1, 42, 3, 60_000, 1)
        + bytes([3])  # compact array of 2 topics
        + bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 2) + bytes([0])
        + bytes([2]) + b"b" + bytes([2]) + struct.pack(">i", 1) + bytes([0])
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
        + bytes([0])
    )  # fmt: skip
    assert decode_value(flexible) == VALUE


@pytest.mark.parametrize("data", [b"\x00\x05", b"\x00\x00\x00", struct.pack(">h", 9) + b"\x00" * 40])
def test_malformed_values_raise(data: bytes) -> None:
    with pytest.raises(TxnRecordFormatError):
        decode_value(data)


def test_metadata_round_trips_through_the_value() -> None:
    meta = from_value("tx", VALUE)
    assert meta.partitions == frozenset({("a", 0), ("a", 2), ("b", 1)})
    assert meta.to_value() == VALUE


def test_transitions_follow_kafkas_state_machine() -> None:
    first = initialized(None, "tx", 7, 1000, now_ms=10)
    assert (first.producer_id, first.producer_epoch, first.state) == (7, 0, TxnState.EMPTY)
    ongoing = with_partitions(first, frozenset({("t", 0)}), now_ms=20)
    more = with_partitions(ongoing, frozenset({("t", 1)}), now_ms=30)
    assert (more.state, more.start_ms, len(more.partitions)) == (TxnState.ONGOING, 20, 2)
    commit = prepared(more, True, now_ms=40)
    assert commit.state is TxnState.PREPARE_COMMIT and commit.commit
    done = completed(commit, now_ms=50)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    fenced = prepared(more, False, now_ms=40, fence=True)
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    assert completed(fenced, now_ms=50).state is TxnState.COMPLETE_ABORT
    again = initialized(done, "tx", 99, 1000, now_ms=60)
    assert (again.producer_id, again.producer_epoch) == (7, 1)


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    old = TxnMetadata("tx", 7, MAX_PRODUCER_EPOCH, 1000, TxnState.COMPLETE_COMMIT)
    renewed = initialized(old, "tx", 8, 1000, now_ms=1)
    assert (renewed.producer_id, renewed.producer_epoch) == (8, 0)


def test_a_retried_bump_answers_the_current_epoch() -> None:
    """KIP-360: the epoch a producer named in the bump just done is remembered; naming it again
    returns the current epoch unchanged, naming any other older one fences."""
    first = initialized(None, "tx", 7, 1000, now_ms=1)
    assert first is not None
    bumped = initialized(first, "tx", -1, 1000, now_ms=2, expected_epoch=0)
    assert bumped is not None
    assert (bumped.producer_epoch, bumped.last_producer_epoch, bumped.last_producer_id) == (1, 0, 7)
    retried = initialized(bumped, "tx", -1, 1000, now_ms=3, expected_epoch=0)
    assert retried is not None and (retried.producer_id, retried.producer_epoch) == (7, 1)
    again = initialized(retried, "tx", -1, 1000, now_ms=4, expected_epoch=1)
    assert again is not None and (again.producer_epoch, again.last_producer_epoch) == (2, 1)
    assert initialized(again, "tx", -1, 1000, now_ms=5, expected_epoch=0) is None
    # A bump without an expected epoch forgets the last one, as does a fence.
    plain = initialized(again, "tx", -1, 1000, now_ms=6)
    assert plain is not None and plain.last_producer_epoch == -1
    assert initialized(plain, "tx", -1, 1000, now_ms=7, expected_epoch=2) is None
    ongoing = with_partitions(again, frozenset({("t", 0)}), now_ms=8)
    assert ongoing.last_producer_epoch == 1
    assert prepared(ongoing, False, now_ms=9, fence=True).last_producer_epoch == -1


def test_a_retried_producer_id_rotation_answers_the_new_producer_id() -> None:
    old = TxnMetadata("tx", 7, MAX_PRODUCER_EPOCH, 1000, TxnState.COMPLETE_COMMIT)
    assert needs_new_producer_id(old, MAX_PRODUCER_EPOCH) and needs_new_producer_id(old, None)
    assert not needs_new_producer_id(old, MAX_PRODUCER_EPOCH - 1)
    renewed = initialized(old, "tx", 8, 1000, now_ms=1, expected_epoch=MAX_PRODUCER_EPOCH)
    assert renewed is not None
    assert (renewed.producer_id, renewed.producer_epoch) == (8, 0)
    assert (renewed.last_producer_id, renewed.last_producer_epoch) == (7, MAX_PRODUCER_EPOCH)
    assert not needs_new_producer_id(renewed, MAX_PRODUCER_EPOCH)
    retried = initialized(renewed, "tx", -1, 1000, now_ms=2, expected_epoch=MAX_PRODUCER_EPOCH)
    assert retried is not None and (retried.producer_id, retried.producer_epoch) == (8, 0)
