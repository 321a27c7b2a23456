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

Invariants: the broker never calls these on the append path (stored batches stay compressed); they
serve the batch builder and decoder (clients, tests, internal topics, the Spark source). Malformed
input raises CorruptRecordError.

Callers: `records.builder`, `records.record`.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam

from odradek.protocol.records.errors import CorruptRecordError


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
    except (cramjam.DecompressionError, OSError, EOFError, zlib.error, struct.error) as exc:
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
