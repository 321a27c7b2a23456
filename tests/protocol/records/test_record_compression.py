"""Compression codecs: round trips for all four, and interoperability with other implementations."""

from __future__ import annotations

import gzip
import struct
import warnings

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.records.compression import XERIAL_MAGIC, CompressionType, compress, decompress
from odradek.protocol.records.errors import CorruptRecordError

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from kafka import codec as kafka_codec

CODECS = list(CompressionType)


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=3000))
@settings(max_examples=40, deadline=None)
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_large_repetitive_input(codec: CompressionType) -> None:
    data = b"".join(b"record-%08d|" % i for i in range(50_000))
    packed = compress(codec, data)
    if codec != CompressionType.NONE:
        assert len(packed) < len(data) // 3
    assert decompress(codec, memoryview(packed)) == data


def test_snappy_uses_xerial_blocks_of_32_kib() -> None:
    data = bytes(range(256)) * 300
    packed = compress(CompressionType.SNAPPY, data)
    assert packed.startswith(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    first_block = struct.unpack_from(">i", packed, 16)[0]
    assert len(bytes(cramjam.snappy.decompress_raw(packed[20 : 20 + first_block]))) == 32 * 1024


def test_snappy_raw_block_from_librdkafka_style_producers() -> None:
    data = b"raw snappy without framing " * 100
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_gzip_concatenated_members() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"


@pytest.mark.parametrize(
    ("codec", "encode", "decode"),
    [
        (CompressionType.GZIP, kafka_codec.gzip_encode, kafka_codec.gzip_decode),
        (CompressionType.SNAPPY, kafka_codec.snappy_encode, kafka_codec.snappy_decode),
        (CompressionType.LZ4, kafka_codec.lz4_encode, kafka_codec.lz4_decode),
        (CompressionType.ZSTD, kafka_codec.zstd_encode, kafka_codec.zstd_decode),
    ],
)
def test_interoperates_with_kafka_python_codecs(codec: CompressionType, encode, decode) -> None:  # noqa: ANN001
    data = b"interop payload " * 5000
    assert decode(compress(codec, data)) == data
    assert decompress(codec, encode(data)) == data


def test_lz4_frame_has_independent_blocks_without_content_checksum() -> None:
    packed = compress(CompressionType.LZ4, b"x" * 100_000)
    flags = packed[4]
    assert packed[:4] == b"\x04\x22\x4d\x18"
    assert flags >> 6 == 1 and flags & 0x20 and not flags & 0x04
    assert packed[5] >> 4 == 4  # 64 KiB maximum block size


@pytest.mark.parametrize("codec", CODECS[1:])
def test_garbage_raises_corrupt_record(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError) as caught:
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10\x00garbage")
    assert caught.value.error_code == 2


def test_from_name() -> None:
    assert CompressionType.from_name("zstd") is CompressionType.ZSTD
    with pytest.raises(ValueError, match="brotli"):
        CompressionType.from_name("brotli")
