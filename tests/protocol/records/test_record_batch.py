"""RecordBatch v2 header, batch-level validation and patching, checked against kafka-python."""

from __future__ import annotations

import struct
import warnings

import pytest
from crc32c import crc32c

from odradek.protocol.errors import KafkaError
from odradek.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAGIC_OFFSET,
    BatchHeader,
    TimestampType,
    assign_offsets,
    iter_batches,
)
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)
from odradek.protocol.records.record import decode_records
from odradek.protocol.records.validation import validate_records

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

MAX = 1 << 20
KAFKA_PYTHON_CODECS = {
    CompressionType.NONE: 0,
    CompressionType.GZIP: 1,
    CompressionType.SNAPPY: 2,
    CompressionType.LZ4: 3,
    CompressionType.ZSTD: 4,
}


def kafka_python_batch(codec: CompressionType, count: int = 5, producer_id: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=KAFKA_PYTHON_CODECS[codec],
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=MAX,
    )
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"v")])
    return bytes(builder.build())


def records(count: int = 3, start_ts: int = 1_000) -> list[SimpleRecord]:
    return [SimpleRecord(b"value-%d" % i, b"k%d" % i, (("h", b"v"),), start_ts + i) for i in range(count)]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_batches_validate_and_decode(codec: CompressionType) -> None:
    data = kafka_python_batch(codec)
    validated = validate_records(memoryview(data), MAX)
    header = validated.headers[0]
    assert (header.records_count, header.last_offset_delta, header.compression) == (5, 4, codec)
    assert (header.base_timestamp, header.max_timestamp) == (1_000, 1_004)
    decoded = decode_records(data)
    assert [r.value for r in decoded] == [b"value-%d" % i for i in range(5)]
    assert [r.timestamp for r in decoded] == [1_000 + i for i in range(5)]
    assert decoded[0].headers == (("h", b"v"),)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_builder_output_reads_back_in_kafka_python(codec: CompressionType) -> None:
    data = build_batch(records(4), codec, base_offset=10)
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.max_timestamp) == (10, int(codec), 1_003)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(10 + i, 1_000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"v")]) for i in range(4)]


def test_builder_matches_kafka_python_byte_for_byte_uncompressed() -> None:
    batch = [SimpleRecord(b"value-%d" % i, b"k%d" % i, (("h", b"v"),), 1_000 + i) for i in range(5)]
    ours = build_batch(batch, partition_leader_epoch=0)  # kafka-python writes 0 where Java writes -1
    assert ours == kafka_python_batch(CompressionType.NONE)


def test_assign_offsets_keeps_crc_valid_and_sets_epoch() -> None:
    data = kafka_python_batch(CompressionType.LZ4) + build_batch(records(2), CompressionType.NONE)
    validated = validate_records(data, MAX)
    buf = bytearray(data)
    assert assign_offsets(buf, validated, 1_000, 7) == 1_007
    headers = [header for _, header in iter_batches(buf)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(1_000, 7), (1_005, 7)]
    assert validate_records(buf, MAX).record_count == 7
    assert [r.offset for r in decode_records(buf)] == list(range(1_000, 1_007))
    assert all(
        DefaultRecordBatch(bytearray(buf[p : p + h.size_in_bytes])).validate_crc()
        for p, h in iter_batches(buf)
    )


def test_log_append_time_patch_recomputes_crc() -> None:
    data = build_batch(records(3), CompressionType.ZSTD)
    validated = validate_records(data, MAX)
    buf = bytearray(data)
    assign_offsets(buf, validated, 5, 0, log_append_time=99_999)
    header = BatchHeader.unpack_from(buf)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 99_999
    assert header.crc == crc32c(bytes(buf[ATTRIBUTES_OFFSET:])) != validated.headers[0].crc
    assert DefaultRecordBatch(bytearray(buf)).validate_crc()
    assert [r.timestamp for r in decode_records(buf)] == [99_999] * 3


def test_validated_records_summary() -> None:
    data = build_batch(records(2, 500)) + build_batch(records(3, 2_000)) + build_batch(records(1, 100))
    validated = validate_records(data, MAX)
    assert validated.positions[0] == 0 and len(validated.positions) == 3
    assert (validated.record_count, validated.offset_count, validated.size_in_bytes) == (6, 6, len(data))
    assert (validated.max_timestamp, validated.max_timestamp_index) == (2_002, 1)


def corrupt(data: bytes, position: int, value: bytes) -> bytes:
    return data[:position] + value + data[position + len(value) :]


def with_crc(data: bytearray | bytes) -> bytes:
    buf = bytearray(data)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return bytes(buf)


@pytest.mark.parametrize(
    ("data", "error", "code"),
    [
        (corrupt(build_batch(records()), 70, b"\xff"), CorruptRecordError, 2),
        (build_batch(records())[:-1], CorruptRecordError, 2),
        (build_batch(records()) + b"\x00" * 20, CorruptRecordError, 2),
        (corrupt(build_batch(records()), MAGIC_OFFSET, b"\x01"), UnsupportedForMessageFormatError, 43),
        (corrupt(build_batch(records()), MAGIC_OFFSET, b"\x07"), CorruptRecordError, 2),
        (corrupt(build_batch(records()), 8, struct.pack(">i", 10)), CorruptRecordError, 2),
        (b"", InvalidRecordError, 87),
        (with_crc(corrupt(build_batch(records()), 57, struct.pack(">i", 2))), InvalidRecordError, 87),
        (with_crc(corrupt(build_batch(records()), 23, struct.pack(">i", 5))), InvalidRecordError, 87),
        (build_batch(records(), is_control=True), InvalidRecordError, 87),
        (with_crc(corrupt(build_batch(records()), ATTRIBUTES_OFFSET, b"\x00\x07")), CorruptRecordError, 2),
    ],
    ids=[
        "bad-crc",
        "truncated",
        "trailing-garbage",
        "magic-1",
        "magic-7",
        "short-length",
        "empty",
        "count-mismatch",
        "delta-mismatch",
        "control-from-client",
        "unknown-codec",
    ],
)
def test_validation_refuses(data: bytes, error: type[Exception], code: int) -> None:
    with pytest.raises(error) as caught:
        validate_records(memoryview(data), MAX)
    assert isinstance(caught.value, KafkaError)
    assert caught.value.code == caught.value.error_code == code


def test_batch_larger_than_max_message_bytes() -> None:
    data = build_batch(records(50))
    with pytest.raises(RecordTooLargeError) as caught:
        validate_records(data, len(data) - 1)
    assert caught.value.error_code == 10
    assert validate_records(data, len(data)).size_in_bytes == len(data)


def test_second_batch_error_refuses_the_whole_request() -> None:
    good = build_batch(records())
    with pytest.raises(CorruptRecordError):
        validate_records(good + corrupt(good, 70, b"\xff"), MAX)


def test_follower_rules_accept_compacted_counts_and_control_batches() -> None:
    control = build_batch(records(1), is_control=True)
    assert validate_records(control, MAX, from_client=False).headers[0].is_control
    sparse = with_crc(corrupt(build_batch(records(3)), 57, struct.pack(">i", 1)))
    assert validate_records(sparse, MAX, from_client=False).record_count == 1


def test_create_timestamp_bounds_apply_to_every_record() -> None:
    data = build_batch(records(3, 10_000))  # timestamps 10_000, 10_001, 10_002
    validate_records(data, MAX, timestamp_bounds=(10_000, 10_002))
    with pytest.raises(InvalidTimestampError):
        validate_records(data, MAX, timestamp_bounds=(10_001, 20_000))  # the first record is too old
    with pytest.raises(InvalidTimestampError) as caught:
        validate_records(data, MAX, timestamp_bounds=(0, 10_001))  # the last record is too new
    assert caught.value.error_code == 32


def test_iter_batches_stops_at_a_partial_trailing_batch() -> None:
    data = build_batch(records()) + build_batch(records())
    assert len(list(iter_batches(data))) == 2
    assert len(list(iter_batches(data[:-5]))) == 1
