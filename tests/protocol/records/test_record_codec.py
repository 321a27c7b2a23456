"""The varint record format: encoding, decoding (objects and columns), and malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.records.batch import TimestampType
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.errors import CorruptRecordError
from odradek.protocol.records.record import (
    decode_columns,
    decode_records,
    encode_record,
    encode_varint,
    iter_batch_records,
)
from odradek.protocol.records.record_loops import read_varint

LONGS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(LONGS)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert read_varint(encoded + b"\xff", 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"), [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")]
)
def test_varint_is_zigzag(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded


def test_truncated_and_overlong_varints() -> None:
    with pytest.raises(IndexError):  # callers turn it into the Kafka error of their context
        read_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80" * 10 + b"\x01", 0)


record_strategy = st.builds(
    SimpleRecord,
    value=st.none() | st.binary(max_size=50),
    key=st.none() | st.binary(max_size=20),
    headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3).map(
        tuple
    ),
    timestamp=st.integers(min_value=0, max_value=2**41),
)


@given(
    st.lists(record_strategy, min_size=1, max_size=20),
    st.sampled_from(list(CompressionType)),
    st.integers(0, 2**40),
)
@settings(max_examples=60, deadline=None)
def test_build_then_decode_round_trip(records: list[SimpleRecord], codec: CompressionType, base: int) -> None:
    decoded = decode_records(build_batch(records, codec, base))
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]


def test_columns_across_batches_and_log_append_time() -> None:
    first = build_batch([SimpleRecord(b"a", timestamp=5), SimpleRecord(b"b", timestamp=9)], base_offset=0)
    second = build_batch(
        [SimpleRecord(b"c", timestamp=1)], base_offset=2, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    columns = decode_columns(first + second)
    assert len(columns) == 3
    assert columns.offsets == [0, 1, 2]
    assert columns.values == [b"a", b"b", b"c"]
    assert columns.timestamp_types == [0, 0, 1]
    assert columns.timestamps == [5, 9, 1]


def test_control_batches_are_skipped_unless_asked() -> None:
    data = build_batch([SimpleRecord(b"v")]) + build_batch(
        [SimpleRecord(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00")], base_offset=1, is_control=True
    )
    assert [r.offset for r in decode_records(data)] == [0]
    assert [r.offset for r in decode_records(data, include_control=True)] == [0, 1]
    assert [header.is_control for header, _ in iter_batch_records(data)] == [False, True]


def test_record_longer_than_its_batch_is_corrupt() -> None:
    good = encode_record(0, 0, b"k", b"value")
    lying = bytes([good[0] + 20]) + good[1:]
    data = build_batch([SimpleRecord(b"value", b"k")])
    tampered = data[: len(data) - len(good)] + lying
    with pytest.raises(CorruptRecordError):
        decode_records(tampered)


def test_partial_trailing_batch_is_ignored_by_readers() -> None:
    data = build_batch([SimpleRecord(b"one")]) + build_batch([SimpleRecord(b"two")], base_offset=1)
    assert [r.value for r in decode_records(data[:-3])] == [b"one"]


def test_records_section_cut_short_is_corrupt() -> None:
    data = bytearray(build_batch([SimpleRecord(b"value", b"key", (("h", b"v"),))]))
    for cut in range(1, 12):
        short = data[:-cut]
        short[8:12] = (len(short) - 12).to_bytes(4, "big")
        with pytest.raises(CorruptRecordError):
            decode_records(bytes(short))
