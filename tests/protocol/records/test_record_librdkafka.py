"""Batches captured from librdkafka (confluent-kafka 2.16, see capture_librdkafka.py): validation,
patching and decoding for every codec, and our builder reproducing the uncompressed batch exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol.records.batch import BatchHeader, assign_offsets
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.record import decode_records
from odradek.protocol.records.validation import validate_records

DATA = Path(__file__).parent / "data"


def captured(codec: CompressionType) -> bytes:
    return (DATA / f"librdkafka-{codec.name.lower()}.bin").read_bytes()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_captured_batch_validates_patches_and_decodes(codec: CompressionType) -> None:
    data = captured(codec)
    validated = validate_records(memoryview(data), 1 << 20)
    header = validated.headers[0]
    assert (header.compression, header.records_count, header.base_sequence) == (codec, 20, 0)
    assert header.producer_id >= 0  # idempotent producer
    buf = bytearray(data)
    assign_offsets(buf, validated, 500, 9, log_append_time=123)
    validate_records(buf, 1 << 20)
    for patched in (False, True):
        records = decode_records(buf if patched else data)
        assert [r.offset for r in records] == list(range(500, 520) if patched else range(20))
        assert [r.value for r in records] == [b"value %d " % i * 20 for i in range(20)]
        assert [r.key for r in records] == [b"key-%d" % i if i % 4 else None for i in range(20)]
        assert records[3].headers == (("trace", b"t-3"), ("empty", None))
        assert records[1].headers == ()
    assert {r.timestamp for r in decode_records(buf)} == {123}


def test_builder_reproduces_the_uncompressed_batch_byte_for_byte() -> None:
    data = captured(CompressionType.NONE)
    header = BatchHeader.unpack_from(data)
    records = [SimpleRecord(r.value, r.key, r.headers, r.timestamp) for r in decode_records(data)]
    rebuilt = build_batch(
        records,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )
    assert rebuilt == data


def test_librdkafka_snappy_is_a_raw_block() -> None:
    assert not captured(CompressionType.SNAPPY)[61:].startswith(b"\x82SNAPPY")
