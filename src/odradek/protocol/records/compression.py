"""Compression codecs of RecordBatch v2: the attribute bits 0-2 and the bytes each codec produces.

Owns: `CompressionType` (Kafka's ids) and `compress` / `decompress` of a batch's records section.
- gzip (1): a gzip stream (RFC 1952), as Java's GZIPOutputStream and librdkafka write it; decoding
  accepts concatenated members.
- snappy (2): encoded with the xerial framing Java clients use (magic `\\x82SNAPPY\\x00`, version 1,
  compatible version 1, then blocks of int32 length + raw snappy, 32 KiB of input per block). Decoding
  accepts that framing or a bare raw snappy block (librdkafka may send either).
- lz4 (3): the LZ4 frame format with independent 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream
  writes it for magic 2.
- zstd (4): a standard zstd frame.

`decompressed_pieces(codec, data, limit)` is the produce-side decoder: it yields the records section
in pieces and never holds more than a bounded amount of decoded data, however much the section
expands to, so that validation can walk a batch without materialising it:
- gzip: `zlib.decompressobj` fed 64 KiB of input at a time, asked for at most PIECE_SIZE per call;
- lz4: `lz4.frame.LZ4FrameDecompressor`, the same way;
- zstd: `zstandard`'s decompressobj, whose output per call has no bound of its own, so it is fed
  ZSTD_INPUT_PIECE (64) bytes at a time: a zstd block (at most 128 KiB) takes at least 4 bytes, so
  one call yields at most 2 MiB; frames may not ask for a window over ZSTD_MAX_WINDOW (8 MiB, the
  window of compression levels up to 19; level 20+ streams use up to 128 MiB);
- snappy: xerial blocks one by one, each block's announced length (the raw block's leading varint)
  checked against what the limit leaves before it is decoded. A bare raw snappy block cannot be
  decoded in parts; it is decoded whole once its announced length is within the limit, and snappy's
  format caps it near 21x its compressed size.
All of them raise DecompressedTooLargeError as soon as more than `limit` bytes would come out, and
accept concatenated gzip members, lz4 frames and zstd frames.

Invariants: the broker never calls `compress` / `decompress` on the append path (stored batches stay
compressed); they serve the batch builder and decoder (clients, tests, internal topics, the Spark
source). Malformed input raises CorruptRecordError.

Callers: `records.builder`, `records.record`, `records.validation` (`decompressed_pieces`).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from odradek.protocol.records.errors import CorruptRecordError, DecompressedTooLargeError


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Kafka's `compression.type` names: none, gzip, snappy, lz4, zstd."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
_GZIP_WBITS = 31
_GZIP_LEVEL = 6

PIECE_SIZE = 256 * 1024  # decoded bytes asked for per call (gzip, lz4) and handed to the record walk
_INPUT_PIECE = 64 * 1024  # compressed bytes fed per call (gzip, lz4)
ZSTD_INPUT_PIECE = 64
ZSTD_MAX_WINDOW = 8 << 20
_DECODE_ERRORS = (cramjam.DecompressionError, OSError, EOFError, zlib.error, struct.error, RuntimeError)


def compress(codec: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    """The records section `data` encoded with `codec`."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        deflater = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        framer = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        framer.compress(bytes(data))
        return bytes(framer.finish())
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data)))
    raise CorruptRecordError(f"unknown compression id {int(codec)}")


def decompress(codec: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    """The records section encoded as `data` with `codec`, decoded."""
    try:
        return _decompress(codec, data)
    except _DECODE_ERRORS as exc:
        raise CorruptRecordError(f"cannot decompress {CompressionType(codec).name} data: {exc}") from exc


def _decompress(codec: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip.decompress(data)
    if codec == CompressionType.SNAPPY:
        return _snappy_decompress(data)
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.decompress(bytes(data)))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.decompress(bytes(data)))
    raise CorruptRecordError(f"unknown compression id {int(codec)}")


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    with memoryview(data) as view:
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(raw))
    position, parts = len(_XERIAL_HEADER), []
    while position < len(raw):
        (length,) = _INT32.unpack_from(raw, position)
        position += 4
        if length < 0 or position + length > len(raw):
            raise CorruptRecordError("truncated xerial snappy block")
        parts.append(bytes(cramjam.snappy.decompress_raw(raw[position : position + length])))
        position += length
    return b"".join(parts)


def decompressed_pieces(codec: CompressionType | int, data: memoryview, limit: int) -> Iterator[bytes]:
    """The records section `data`, compressed with `codec`, decoded in pieces of at most PIECE_SIZE
    bytes (see the module docstring). Raises DecompressedTooLargeError once the pieces would pass
    `limit` bytes in all, CorruptRecordError when `data` does not decode."""
    if codec == CompressionType.SNAPPY:
        outputs = _snappy_pieces(data, limit)
    elif codec in _STREAM_DECODERS:
        outputs = _STREAM_DECODERS[CompressionType(codec)](data)
    else:
        raise CorruptRecordError(f"unknown compression id {int(codec)}")
    total = 0
    try:
        for output in outputs:
            total += len(output)
            if total > limit:
                raise DecompressedTooLargeError(limit)
            if len(output) <= PIECE_SIZE:
                yield output
            else:
                for start in range(0, len(output), PIECE_SIZE):
                    yield output[start : start + PIECE_SIZE]
    except (*_DECODE_ERRORS, zstandard.ZstdError) as exc:
        raise CorruptRecordError(f"cannot decompress {CompressionType(codec).name} data: {exc}") from exc


def _gzip_pieces(data: memoryview) -> Iterator[bytes]:
    position, end = 0, len(data)
    while position < end:  # one gzip member per round
        inflater = zlib.decompressobj(_GZIP_WBITS)
        pending: bytes | memoryview = b""
        while not inflater.eof:
            if not pending and position < end:
                pending, position = data[position : position + _INPUT_PIECE], position + _INPUT_PIECE
            output = inflater.decompress(pending, PIECE_SIZE)
            pending = inflater.unconsumed_tail
            if output:
                yield output
            elif not pending and position >= end:
                raise CorruptRecordError("truncated gzip data")
        position = _skip_zero_padding(data, min(position, end) - len(inflater.unused_data))


def _skip_zero_padding(data: memoryview, position: int) -> int:
    """The position of the first non-zero byte from `position` on (gzip members may be zero-padded)."""
    while position < len(data):
        piece = bytes(data[position : position + _INPUT_PIECE])
        stripped = piece.lstrip(b"\x00")
        if stripped:
            return position + len(piece) - len(stripped)
        position += len(piece)
    return position


def _lz4_pieces(data: memoryview) -> Iterator[bytes]:
    position, end = 0, len(data)
    while position < end:  # one lz4 frame per round
        decoder = lz4.frame.LZ4FrameDecompressor()
        pending: bytes | memoryview
        while not decoder.eof:
            if decoder.needs_input:
                if position >= end:
                    raise CorruptRecordError("truncated lz4 frame")
                pending, position = data[position : position + _INPUT_PIECE], position + _INPUT_PIECE
            else:
                pending = b""
            output = decoder.decompress(pending, max_length=PIECE_SIZE)
            if output:
                yield output
        position = min(position, end) - len(decoder.unused_data or b"")


def _zstd_pieces(data: memoryview) -> Iterator[bytes]:
    position, end = 0, len(data)
    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    while position < end:  # one zstd frame per round
        decoder = decompressor.decompressobj()
        while not decoder.eof:
            if position >= end:
                raise CorruptRecordError("truncated zstd frame")
            output = decoder.decompress(data[position : position + ZSTD_INPUT_PIECE])
            position += ZSTD_INPUT_PIECE
            if output:
                yield output
        position = min(position, end) - len(decoder.unused_data)


def _snappy_pieces(data: memoryview, limit: int) -> Iterator[bytes]:
    if data[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        yield _snappy_block(data, limit)
        return
    position, end, left = len(_XERIAL_HEADER), len(data), limit
    while position < end:
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > end:
            raise CorruptRecordError("truncated xerial snappy block")
        block = _snappy_block(data[position : position + length], left)
        left -= len(block)
        position += length
        yield block


def _snappy_block(block: memoryview, limit: int) -> bytes:
    """One raw snappy block, decoded only if the length it announces is within `limit`."""
    raw = bytes(block)
    if cramjam.snappy.decompress_raw_len(raw) > limit:
        raise DecompressedTooLargeError(limit)
    return bytes(cramjam.snappy.decompress_raw(raw))


_STREAM_DECODERS = {
    CompressionType.GZIP: _gzip_pieces,
    CompressionType.LZ4: _lz4_pieces,
    CompressionType.ZSTD: _zstd_pieces,
}
