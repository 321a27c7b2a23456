"""RecordBatch v2 (magic 2): the header view and in-place patching.

Owns the 61-byte batch header layout (all big-endian):

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordsCount int32 | 61 records...

`batchLength` counts the bytes after itself (the whole batch is batchLength + 12). The CRC32C covers
attributes to the end of the batch; baseOffset and partitionLeaderEpoch are outside it, so the broker
assigns them without recomputing the CRC. Switching a batch to LogAppendTime changes attributes and
maxTimestamp, which are inside it, so that patch recomputes the CRC.

Invariants: patching touches only baseOffset and partitionLeaderEpoch (outside the CRC), or, for
LogAppendTime, attributes and maxTimestamp with a recomputed CRC; record bytes are never rewritten.
`BatchHeader` is a NamedTuple rather than a frozen dataclass because it is built once per batch on
the produce path, where a dataclass costs five times as much; it is just as immutable. What a
produce request must satisfy before it is patched is `records.validation`'s.

Callers: storage (append, recovery, reads), `records.validation`, `records.record`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol.records.errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: what frames a batch in a log file
CURRENT_MAGIC = 2

MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1
MAX_COMPRESSION_ID = 4

_INT64 = struct.Struct(">q")
_PREFIX_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength (rewritten as is), partitionLeaderEpoch
_UINT32 = struct.Struct(">I")
_ATTRS = struct.Struct(">h")


_new_header = tuple.__new__


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, unpacked."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def unpack_from(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        return _new_header(cls, HEADER.unpack_from(buf, position))

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


class ValidatedRecords(NamedTuple):
    """The batches of one produce `records` field, checked and ready to be patched and appended.

    `positions[i]` is where `headers[i]` starts in the buffer; `max_timestamp_index` is the batch
    holding the largest maxTimestamp (the first such batch), -1 when there is none. A NamedTuple
    for the same reason as `BatchHeader`: one is built per append.
    """

    positions: tuple[int, ...]
    headers: tuple[BatchHeader, ...]
    size_in_bytes: int
    record_count: int
    offset_count: int
    max_timestamp: int
    max_timestamp_index: int


def batch_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """The CRC32C a batch of `size` bytes at `position` should carry."""
    with memoryview(buf) as view:
        return crc32c(view[position + ATTRIBUTES_OFFSET : position + size])


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch; stops silently at a partial trailing batch.

    This is the reader's view (fetch responses may end with a partial batch); it checks framing only.
    Raises CorruptRecordError for a non-v2 batch or an impossible length.
    """
    position, end = 0, len(buf)
    while end - position >= RECORD_BATCH_OVERHEAD:
        header = BatchHeader.unpack_from(buf, position)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {header.batch_length} at position {position}")
        if header.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported magic {header.magic} at position {position}")
        size = header.batch_length + LOG_OVERHEAD
        if position + size > end:
            return
        yield position, header
        position += size


def assign_offsets(
    buf: bytearray | memoryview,
    validated: ValidatedRecords,
    base_offset: int,
    leader_epoch: int,
    log_append_time: int = NO_TIMESTAMP,
) -> int:
    """Patch baseOffset and partitionLeaderEpoch of every batch in `buf`; return the next offset.

    With `log_append_time` >= 0 each batch also gets the LogAppendTime attribute bit and that
    maxTimestamp, and its CRC is recomputed.
    """
    offset = base_offset
    for position, header in zip(validated.positions, validated.headers, strict=True):
        _PREFIX_AND_EPOCH.pack_into(buf, position, offset, header.batch_length, leader_epoch)
        if log_append_time >= 0:
            _set_log_append_time(buf, position, header, log_append_time)
        offset += header.last_offset_delta + 1
    return offset


def _set_log_append_time(
    buf: bytearray | memoryview, position: int, header: BatchHeader, log_append_time: int
) -> None:
    _ATTRS.pack_into(buf, position + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, log_append_time)
    with memoryview(buf) as view:
        crc = crc32c(view[position + ATTRIBUTES_OFFSET : position + header.batch_length + LOG_OVERHEAD])
    _UINT32.pack_into(buf, position + CRC_OFFSET, crc)
