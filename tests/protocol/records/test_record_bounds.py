"""Bounded work on compressed batches: every codec decodes in pieces, validation refuses a section
that decompresses past the limit without holding it and walks records as the pieces come, and the
ListOffsets read of record timestamps holds no more than a piece either."""

from __future__ import annotations

import functools
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import cramjam
import lz4.frame
import pytest
import zstandard
from crc32c import crc32c

from odradek.protocol.records.batch import COMPRESSION_MASK, HEADER, RECORD_BATCH_OVERHEAD, BatchHeader
from odradek.protocol.records.compression import (
    PIECE_SIZE,
    XERIAL_MAGIC,
    CompressionType,
    compress,
    decompressed_pieces,
)
from odradek.protocol.records.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    InvalidRecordError,
    InvalidTimestampError,
)
from odradek.protocol.records.record import encode_record, encode_varint, record_times
from odradek.protocol.records.validation import (
    MAX_DECOMPRESSED_BATCH_BYTES,
    DecompressionBudgetExceeded,
    has_batch_with,
    validate_records,
)

MAX = 1 << 20
TIMESTAMP = 1_700_000_000_000
MIB = 1 << 20
CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]
HELD_BOUND = 8 * MIB  # what decoding may hold at once, Python objects included (traced)


# --- streaming compressors: bombs are built without holding what they expand to ------------------


def _gzip(chunks: Iterator[bytes]) -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(deflater.compress(chunk) for chunk in chunks) + deflater.flush()


def _lz4(chunks: Iterator[bytes]) -> bytes:
    framer = lz4.frame.LZ4FrameCompressor(block_linked=False)
    parts = [framer.begin()]
    parts += [framer.compress(chunk) for chunk in chunks]
    return b"".join(parts) + framer.flush()


def _zstd(chunks: Iterator[bytes]) -> bytes:
    squeezer = zstandard.ZstdCompressor(level=3).compressobj()
    return b"".join(squeezer.compress(chunk) for chunk in chunks) + squeezer.flush()


def _xerial(chunks: Iterator[bytes]) -> bytes:
    """xerial framing, 32 KiB of input per block; identical blocks are compressed once."""
    parts, cache, pending = [XERIAL_MAGIC + struct.pack(">ii", 1, 1)], {}, b""

    def block(data: bytes) -> None:
        if data not in cache:
            cache[data] = bytes(cramjam.snappy.compress_raw(data))
        parts.append(struct.pack(">i", len(cache[data])) + cache[data])

    for chunk in chunks:
        pending += chunk
        while len(pending) >= 32 * 1024:
            block(pending[: 32 * 1024])
            pending = pending[32 * 1024 :]
    if pending:
        block(pending)
    return b"".join(parts)


STREAMING: dict[CompressionType, Callable[[Iterator[bytes]], bytes]] = {
    CompressionType.GZIP: _gzip,
    CompressionType.SNAPPY: _xerial,
    CompressionType.LZ4: _lz4,
    CompressionType.ZSTD: _zstd,
}


def zeros(size: int) -> Iterator[bytes]:
    block = bytes(MIB)
    for start in range(0, size, MIB):
        yield block[: min(MIB, size - start)]


def records_of_zeros(count: int, value_size: int) -> Iterator[bytes]:
    """`count` records, each a null key and `value_size` zero bytes, streamed."""
    for index in range(count):
        fields = b"\x00" + encode_varint(0) + encode_varint(index) + encode_varint(-1)
        fields += encode_varint(value_size)
        yield encode_varint(len(fields) + value_size + 1) + fields
        yield from zeros(value_size)
        yield b"\x00"  # no headers


@functools.cache
def zero_bomb(codec: CompressionType, size: int) -> bytes:
    """`size` zero bytes compressed with `codec` (built once per test session)."""
    return STREAMING[codec](zeros(size))


@functools.cache
def zero_records_batch(codec: CompressionType, count: int, value_size: int) -> bytes:
    """A batch of `count` records of `value_size` zeros, compressed with `codec`."""
    return batch_of(STREAMING[codec](records_of_zeros(count, value_size)), count, codec)


def batch_of(section: bytes, count: int, codec: CompressionType) -> bytes:
    header = HEADER.pack(
        0, RECORD_BATCH_OVERHEAD - 12 + len(section), -1, 2, 0, int(codec), count - 1,
        TIMESTAMP, TIMESTAMP, -1, -1, -1, count,
    )  # fmt: skip
    data = header + section
    return data[:17] + struct.pack(">I", crc32c(data[21:])) + data[21:]


def fits(batch: bytes) -> int:
    """A max.message.bytes that admits `batch` (snappy expands 21x at most, so its bombs are large)."""
    return max(MAX, len(batch))


def traced_peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- the streaming decoders ---------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_decodes_in_bounded_pieces(codec: CompressionType) -> None:
    section = memoryview(zero_bomb(codec, 200 * MIB))
    sizes: list[int] = []

    def drain() -> None:
        sizes.extend(len(piece) for piece in decompressed_pieces(codec, section, 1 << 40))

    peak = traced_peak(drain)
    assert sum(sizes) == 200 * MIB
    assert max(sizes) <= PIECE_SIZE
    assert peak < HELD_BOUND


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_stops_at_the_limit(codec: CompressionType) -> None:
    section = memoryview(zero_bomb(codec, 64 * MIB))
    decoded = 0
    with pytest.raises(DecompressedTooLargeError) as caught:
        for piece in decompressed_pieces(codec, section, 8 * MIB):
            decoded += len(piece)
    assert caught.value.error_code == 10
    assert decoded <= 8 * MIB


def test_snappy_checks_the_announced_length_before_decoding() -> None:
    lying = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x00" * 8  # 4 GiB announced
    framed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(lying)) + lying
    for section in (lying, framed):
        with pytest.raises(DecompressedTooLargeError):
            next(decompressed_pieces(CompressionType.SNAPPY, memoryview(section), 64 * MIB))


def test_zstd_refuses_a_window_over_its_maximum() -> None:
    params = zstandard.ZstdCompressionParameters(window_log=27, enable_ldm=True)
    squeezer = zstandard.ZstdCompressor(compression_params=params).compressobj()
    section = squeezer.compress(bytes(MIB)) + squeezer.flush()
    with pytest.raises(CorruptRecordError):
        list(decompressed_pieces(CompressionType.ZSTD, memoryview(section), 1 << 40))


@pytest.mark.parametrize("codec", CODECS)
def test_concatenated_sections_and_truncation(codec: CompressionType) -> None:
    one, two = compress(codec, b"first " * 1000), compress(codec, b"second " * 1000)
    if codec != CompressionType.SNAPPY:  # xerial blocks do not concatenate as whole streams
        joined = b"".join(decompressed_pieces(codec, memoryview(one + two), 1 << 30))
        assert joined == b"first " * 1000 + b"second " * 1000
    with pytest.raises(CorruptRecordError):
        list(decompressed_pieces(codec, memoryview(one[:-3]), 1 << 30))


# --- validation over the pieces -----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_one_record_bomb_is_message_too_large_without_decoding_it(codec: CompressionType) -> None:
    batch = zero_records_batch(codec, 1, 256 * MIB)
    peak = traced_peak(lambda: pytest.raises(DecompressedTooLargeError, validate_records, batch, fits(batch)))
    assert peak < HELD_BOUND


@pytest.mark.parametrize("codec", CODECS)
def test_many_records_past_the_limit_are_message_too_large(codec: CompressionType) -> None:
    batch = zero_records_batch(codec, 80, MIB)

    def refuse() -> None:
        with pytest.raises(DecompressedTooLargeError) as caught:
            validate_records(batch, fits(batch))
        assert caught.value.error_code == 10

    assert traced_peak(refuse) < HELD_BOUND


@pytest.mark.parametrize("codec", CODECS)
def test_long_records_under_the_limit_pass(codec: CompressionType) -> None:
    batch = zero_records_batch(codec, 5, 3 * MIB)
    assert traced_peak(lambda: validate_records(batch, fits(batch))) < HELD_BOUND


@pytest.mark.parametrize("codec", CODECS)
def test_records_spanning_pieces_are_checked_like_any_other(codec: CompressionType) -> None:
    """Records of many sizes cross piece boundaries; a bad one far into the section is still found."""
    sizes = [7, 1000, 70_000, 300_000, 5, 600_000, 33]
    good = [encode_record(i, 0, b"k", b"v" * size, (("h", b"x" * size),)) for i, size in enumerate(sizes)]
    validate_records(batch_of(compress(codec, b"".join(good)), len(good), codec), MAX)
    bad_offset = encode_record(9, 0, b"k", b"v" * 10)
    section = compress(codec, b"".join(good) + bad_offset)
    with pytest.raises(InvalidRecordError, match="offsetDelta 9"):
        validate_records(batch_of(section, len(good) + 1, codec), MAX)
    late = encode_record(len(good), 10**9, b"k", b"v" * 400_000)
    with pytest.raises(InvalidTimestampError):
        validate_records(
            batch_of(compress(codec, b"".join(good) + late), len(good) + 1, codec),
            MAX,
            timestamp_bounds=(TIMESTAMP - 1000, TIMESTAMP + 1000),
        )


def test_a_long_record_with_a_null_header_key_is_invalid() -> None:
    body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k"
    body += encode_varint(400_000) + b"v" * 400_000 + encode_varint(1) + encode_varint(-1) + encode_varint(-1)
    record = encode_varint(len(body)) + body
    with pytest.raises(InvalidRecordError, match="header key"):
        validate_records(batch_of(compress(CompressionType.GZIP, record), 1, CompressionType.GZIP), MAX)


def test_a_long_record_without_a_key_is_refused_on_a_compacted_topic() -> None:
    record = encode_record(0, 0, None, b"v" * 400_000)
    batch = batch_of(compress(CompressionType.LZ4, record), 1, CompressionType.LZ4)
    with pytest.raises(InvalidRecordError, match="no key"):
        validate_records(batch, MAX, require_key=True)


def test_the_budget_stops_a_call_before_the_limit() -> None:
    batch = zero_records_batch(CompressionType.ZSTD, 4, MIB)
    with pytest.raises(DecompressionBudgetExceeded):
        validate_records(batch, MAX, decompression_budget=MIB)
    assert validate_records(batch, MAX, decompression_budget=8 * MIB).record_count == 4
    small = batch_of(compress(CompressionType.GZIP, encode_record(0, 0, b"k", b"v")), 1, CompressionType.GZIP)
    assert validate_records(small + small, MAX, decompression_budget=MIB).record_count == 2


def test_the_limit_is_at_least_max_message_bytes() -> None:
    batch = zero_records_batch(CompressionType.GZIP, 1, 70 * MIB)
    with pytest.raises(DecompressedTooLargeError):
        validate_records(batch, MAX)
    assert MAX_DECOMPRESSED_BATCH_BYTES < 80 * MIB
    assert validate_records(batch, 80 * MIB).record_count == 1


def test_compressed_records_can_be_left_to_the_caller() -> None:
    garbage = batch_of(b"not gzip at all", 1, CompressionType.GZIP)
    with pytest.raises(CorruptRecordError):
        validate_records(garbage, MAX)
    assert validate_records(garbage, MAX, walk_compressed=False).record_count == 1
    assert has_batch_with(garbage, COMPRESSION_MASK)
    plain = batch_of(encode_record(0, 0, b"k", b"v"), 1, CompressionType.NONE)
    assert not has_batch_with(plain, COMPRESSION_MASK)
    assert has_batch_with(plain + garbage, COMPRESSION_MASK)
    with pytest.raises(InvalidRecordError):  # uncompressed records are always walked
        validate_records(batch_of(b"\x01", 1, CompressionType.NONE), MAX, walk_compressed=False)


def test_has_batch_with_reads_each_whole_batch_attributes_and_stops_at_a_bad_length() -> None:
    plain = batch_of(encode_record(0, 0, b"k", b"v"), 1, CompressionType.NONE)
    transactional = plain[:21] + struct.pack(">h", 0x10) + plain[23:]
    assert has_batch_with(plain + plain + transactional, 0x10)
    assert not has_batch_with(plain + plain + transactional, COMPRESSION_MASK)
    assert not has_batch_with(plain + transactional[: RECORD_BATCH_OVERHEAD - 1], 0x10)  # a torn tail
    too_short = plain[:8] + struct.pack(">i", RECORD_BATCH_OVERHEAD - 13) + plain[12:]
    assert not has_batch_with(too_short + transactional, 0x10)  # no walking on past a length that lies


# --- record_times: the ListOffsets read --------------------------------------------------------


@pytest.mark.parametrize("codec", [CompressionType.NONE, *CODECS])
def test_record_times_reads_every_record_without_keeping_values(codec: CompressionType) -> None:
    sizes = [3, 400_000, 0, 70_000, 600_000, 1]
    body = b"".join(encode_record(i, i * 10 - 5, b"k", b"v" * size) for i, size in enumerate(sizes))
    batch = batch_of(compress(codec, body), len(sizes), codec)
    header = _header(batch)
    got = list(record_times(batch, header))
    assert got == [(TIMESTAMP + i * 10 - 5, i) for i in range(len(sizes))]


@pytest.mark.parametrize("codec", CODECS)
def test_record_times_of_a_bomb_hold_little(codec: CompressionType) -> None:
    batch = zero_records_batch(codec, 80, MIB)
    header = _header(batch)
    seen: list[tuple[int, int]] = []
    assert traced_peak(lambda: seen.extend(record_times(batch, header))) < HELD_BOUND
    assert [offset for _, offset in seen] == list(range(80))


def test_record_times_of_a_truncated_batch_is_corrupt() -> None:
    body = b"".join(encode_record(i, 0, b"k", b"v" * 10) for i in range(5))
    batch = batch_of(body[:-4], 5, CompressionType.NONE)
    with pytest.raises(CorruptRecordError):
        list(record_times(batch, _header(batch)))


def _header(batch: bytes) -> BatchHeader:
    return BatchHeader(*HEADER.unpack_from(batch))
