"""The record walk of produce validation: well-checksummed batches whose records are malformed."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.records.batch import HEADER, RECORD_BATCH_OVERHEAD
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType, compress
from odradek.protocol.records.errors import CorruptRecordError, InvalidRecordError, RecordsError
from odradek.protocol.records.record import encode_record, encode_varint
from odradek.protocol.records.validation import validate_records

MAX = 1 << 20
TIMESTAMP = 1_700_000_000_000


def batch_around(
    body: bytes, count: int, codec: CompressionType = CompressionType.NONE, *, raw_section: bool = False
) -> bytes:
    """A batch whose header (count, lastOffsetDelta, CRC) is right for `count` records, around `body`
    (compressed with `codec` unless `raw_section`)."""
    section = body if raw_section else compress(codec, body)
    header = HEADER.pack(
        0, RECORD_BATCH_OVERHEAD - 12 + len(section), -1, 2, 0, int(codec), count - 1,
        TIMESTAMP, TIMESTAMP, -1, -1, -1, count,
    )  # fmt: skip
    return _with_crc(header + section)


def _with_crc(data: bytes) -> bytes:
    return data[:17] + struct.pack(">I", crc32c(data[21:])) + data[21:]


def good_records(count: int) -> bytes:
    return b"".join(encode_record(i, i, b"k%d" % i, b"v" * i, (("h", b"x"),)) for i in range(count))


def record_with(*fields: bytes) -> bytes:
    """One record assembled from raw field bytes, with a correct length prefix."""
    body = b"".join(fields)
    return encode_varint(len(body)) + body


ZERO = encode_varint(0)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_well_formed_records_pass_with_every_codec(codec: CompressionType) -> None:
    validated = validate_records(batch_around(good_records(50), 50, codec), MAX)
    assert validated.record_count == 50


@pytest.mark.parametrize("count", [63, 64, 65, 8_191, 8_192, 8_193])
def test_multi_byte_deltas_and_lengths(count: int) -> None:
    """Offset and timestamp deltas cross the one-, two- and three-byte varint boundaries."""
    body = b"".join(encode_record(i, i * 1_000, b"k", b"v" * (i % 300), (("h", b"x"),)) for i in range(count))
    assert validate_records(batch_around(body, count), 1 << 24).record_count == count


@pytest.mark.parametrize(
    ("body", "count"),
    [
        (b"\x00" * 3, 3),  # three records announced, three bytes of body
        (b"", 1),  # one record announced, none there
        (good_records(2), 3),  # fewer records than announced
        (good_records(3), 2),  # more records than announced
        (good_records(2) + b"\x00", 2),  # a byte after the last record
        (encode_record(0, 0, b"k", b"v") + encode_record(5, 0, b"k", b"v"), 2),  # offsetDelta gap
        (encode_record(1, 0, b"k", b"v"), 1),  # the first offsetDelta is not 0
        (record_with(b"\x00", ZERO, ZERO, encode_varint(-2), encode_varint(-1), ZERO), 1),  # key length -2
        (record_with(b"\x00", ZERO, ZERO, encode_varint(-1), encode_varint(9), b"ab", ZERO), 1),  # long value
        (record_with(b"\x00", ZERO, ZERO, encode_varint(-1), encode_varint(-1), ZERO, b"\x00"), 1),  # slack
        (
            record_with(
                b"\x00",
                ZERO,
                ZERO,
                encode_varint(-1),
                encode_varint(-1),
                encode_varint(1),
                encode_varint(-1),
                encode_varint(-1),
            ),
            1,
        ),  # a null header key
        (
            record_with(b"\x00", ZERO, ZERO, encode_varint(-1), encode_varint(-1), encode_varint(1 << 30)),
            1,
        ),  # a header count larger than the batch could hold
        (
            record_with(b"\x00", ZERO, ZERO, encode_varint(-1), encode_varint(-1), encode_varint(-3)),
            1,
        ),  # a negative header count
    ],  # fmt: skip
    ids=[
        "short-records",
        "empty-body",
        "fewer-records",
        "more-records",
        "trailing-byte",
        "offset-delta-gap",
        "first-offset-delta",
        "key-length-minus-2",
        "value-past-record",
        "record-slack",
        "null-header-key",
        "huge-header-count",
        "negative-header-count",
    ],
)
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD], ids=["none", "zstd"])
def test_malformed_records_are_invalid_record(body: bytes, count: int, codec: CompressionType) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        validate_records(batch_around(body, count, codec), MAX)
    assert caught.value.error_code == 87


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_a_section_that_does_not_decompress_is_corrupt_message(codec: CompressionType) -> None:
    body = b"\x1f\x8b not really compressed at all" * 4
    with pytest.raises(CorruptRecordError) as caught:
        validate_records(batch_around(body, 3, codec, raw_section=True), MAX)
    assert caught.value.error_code == 2


def test_a_compacted_topic_requires_keys() -> None:
    keyless = build_batch([SimpleRecord(b"v", b"k"), SimpleRecord(b"v", None)])
    assert validate_records(keyless, MAX).record_count == 2
    with pytest.raises(InvalidRecordError, match="no key"):
        validate_records(keyless, MAX, require_key=True)
    empty_key = build_batch([SimpleRecord(b"v", b"")])  # an empty key is a key
    assert validate_records(empty_key, MAX, require_key=True).record_count == 1


def test_the_second_batch_s_bad_records_refuse_the_whole_request() -> None:
    good = build_batch([SimpleRecord(b"v", b"k")])
    with pytest.raises(InvalidRecordError):
        validate_records(good + batch_around(b"\x00" * 3, 3), MAX)


def test_batches_from_a_leader_are_not_walked() -> None:
    """A replica's append trusts the leader's records, as Kafka does (framing and CRC only)."""
    assert validate_records(batch_around(b"\x00" * 3, 3), MAX, from_client=False).record_count == 3


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    position=st.integers(min_value=0, max_value=10_000),
    garbage=st.binary(min_size=1, max_size=8),
    count=st.integers(min_value=1, max_value=12),
)
def test_mutated_records_raise_only_kafka_errors(position: int, garbage: bytes, count: int) -> None:
    body = bytearray(good_records(count))
    position %= len(body)
    body[position : position + len(garbage)] = garbage
    try:
        validate_records(batch_around(bytes(body), count), MAX)
    except RecordsError as error:
        assert error.error_code in (2, 32, 87)
