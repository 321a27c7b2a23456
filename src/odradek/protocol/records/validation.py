"""Produce-side validation of a `records` field: what Kafka's log validator refuses, refused here.

Owns `validate_records`, run on every batch of a produce request before anything is patched or
written (an append is all-or-nothing):
- framing: whole batches only, magic 2 (magic 0/1 is UNSUPPORTED_FOR_MESSAGE_FORMAT), a batch length
  covering the 61-byte header, the batch no larger than max.message.bytes (MESSAGE_TOO_LARGE);
- integrity: CRC32C over attributes..end (CORRUPT_MESSAGE), a known compression id;
- counts: for clients, recordsCount = lastOffsetDelta + 1 >= 1, no control batches, a producer id on
  transactional batches (INVALID_RECORD);
- records, for clients: the records section is decompressed when compressed (a section that does not
  decompress is CORRUPT_MESSAGE) and walked record by record (`record.check_records`): every record
  fills exactly its length, offsetDeltas run 0..n-1, lengths are >= -1, header keys are not null,
  keys are not null for a compacted topic (`require_key`) and nothing follows the last record
  (INVALID_RECORD, as Kafka's InvalidRecordException); CreateTime timestamps of every record are
  checked against message.timestamp.{before,after}.max.ms when the caller passes bounds
  (INVALID_TIMESTAMP).

Invariants: the request bytes are never modified here; compressed batches are decompressed only to
be checked and are stored as they came. Batches from a leader (`from_client=False`, a replica's
append) get the framing and CRC checks only, as in Kafka.

Deliberate deviations from Kafka: a compressed batch whose inner offsets are not 0..n-1 is refused
(INVALID_RECORD) where Kafka would rebuild it with new offsets; a compressed section that does not
decompress is CORRUPT_MESSAGE where Kafka can answer UNKNOWN_SERVER_ERROR; a key or value length
below -1 is refused where Kafka reads it as null. Kafka also rewrites a CreateTime batch's
maxTimestamp to the largest record timestamp; it is kept as the client wrote it here.

Callers: `storage.log` (append as leader and as follower), tests, bench.
"""

from __future__ import annotations

from crc32c import crc32c

from odradek.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CURRENT_MAGIC,
    HEADER,
    LOG_OVERHEAD,
    MAX_COMPRESSION_ID,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    ValidatedRecords,
)
from odradek.protocol.records.compression import decompress
from odradek.protocol.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)
from odradek.protocol.records.record import check_records

_new_header = tuple.__new__
_UNBOUNDED = (-(1 << 64), 1 << 64)


def validate_records(
    records: bytes | bytearray | memoryview,
    max_batch_size: int,
    from_client: bool = True,
    timestamp_bounds: tuple[int, int] | None = None,
    require_key: bool = False,
) -> ValidatedRecords:
    """Check every batch of a produce `records` field; raise the first problem found.

    `max_batch_size` is max.message.bytes (the whole batch, log overhead included). `from_client`
    applies the rules Kafka applies to producers (counts, control batches, the record walk).
    `timestamp_bounds` (lowest, highest), in ms, bounds every record's CreateTime timestamp.
    `require_key` refuses records with a null key (Kafka's rule for compacted topics).
    """
    end = len(records)
    if end == 0:
        raise InvalidRecordError("no record batches")
    positions: list[int] = []
    headers: list[BatchHeader] = []
    position = offset_count = record_count = 0
    max_timestamp, max_timestamp_index = NO_TIMESTAMP, -1
    view = memoryview(records)
    try:
        while position < end:
            header = _check_batch(view, position, end, max_batch_size, from_client)
            if from_client:
                _check_batch_records(view, position, header, timestamp_bounds or _UNBOUNDED, require_key)
            positions.append(position)
            headers.append(header)
            offset_count += header.last_offset_delta + 1
            record_count += header.records_count
            if header.max_timestamp > max_timestamp:
                max_timestamp, max_timestamp_index = header.max_timestamp, len(headers) - 1
            position += header.batch_length + LOG_OVERHEAD
    finally:
        view.release()
    return ValidatedRecords(
        tuple(positions), tuple(headers), end, record_count, offset_count, max_timestamp, max_timestamp_index
    )


def _check_batch(
    view: memoryview, position: int, end: int, max_batch_size: int, from_client: bool
) -> BatchHeader:
    if end - position < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"{end - position} trailing bytes at position {position}: not a batch")
    header = _new_header(BatchHeader, HEADER.unpack_from(view, position))
    size = header.batch_length + LOG_OVERHEAD
    if header.magic != CURRENT_MAGIC:
        if header.magic in (0, 1):
            raise UnsupportedForMessageFormatError(f"message format v{header.magic} is not supported")
        raise CorruptRecordError(f"invalid magic {header.magic} at position {position}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} below the header size")
    if size > max_batch_size:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {max_batch_size}")
    if position + size > end:
        raise CorruptRecordError(f"batch of {size} bytes at position {position} is truncated")
    if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != header.crc:
        raise CorruptRecordError(f"CRC mismatch for the batch at position {position}")
    _check_counts(header, from_client)
    return header


def _check_counts(header: BatchHeader, from_client: bool) -> None:
    if header.attributes & COMPRESSION_MASK > MAX_COMPRESSION_ID:
        raise CorruptRecordError(f"unknown compression id {header.attributes & COMPRESSION_MASK}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidRecordError("negative lastOffsetDelta or recordsCount")
    if from_client:
        if header.records_count == 0 or header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"recordsCount {header.records_count} does not match lastOffsetDelta "
                f"{header.last_offset_delta}"
            )
        if header.attributes & CONTROL_MASK:
            raise InvalidRecordError("clients may not write control batches")
        if header.attributes & TRANSACTIONAL_MASK and header.producer_id < 0:
            raise InvalidRecordError("transactional batch without a producer id")
    elif header.records_count > header.last_offset_delta + 1:
        raise InvalidRecordError("more records than offsets in the batch")


def _check_batch_records(
    view: memoryview, position: int, header: BatchHeader, timestamp_bounds: tuple[int, int], require_key: bool
) -> None:
    section = view[position + RECORD_BATCH_OVERHEAD : position + header.batch_length + LOG_OVERHEAD]
    try:
        codec = header.attributes & COMPRESSION_MASK
        data = section.tobytes() if codec == 0 else decompress(codec, section)
    finally:
        section.release()
    lowest, highest = timestamp_bounds
    base = header.base_timestamp
    check_records(data, header.records_count, lowest - base, highest - base, require_key)
