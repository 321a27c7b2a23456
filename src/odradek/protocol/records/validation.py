"""Produce-side validation of a `records` field: what Kafka's log validator refuses, refused here.

Owns `validate_records`, run on every batch of a produce request before anything is patched or
written (an append is all-or-nothing):
- framing: whole batches only, magic 2 (magic 0/1 is UNSUPPORTED_FOR_MESSAGE_FORMAT), a batch length
  covering the 61-byte header, the batch no larger than max.message.bytes (MESSAGE_TOO_LARGE);
- integrity: CRC32C over attributes..end (CORRUPT_MESSAGE), a known compression id;
- counts: for clients, recordsCount = lastOffsetDelta + 1 >= 1, no control batches, a producer id on
  transactional batches (INVALID_RECORD);
- records, for clients: the records section is walked record by record (`record_loops.walk_records`):
  every record fills exactly its length, offsetDeltas run 0..n-1, lengths are >= -1, header keys
  are not null, keys are not null for a compacted topic (`require_key`) and nothing follows the last
  record (INVALID_RECORD, as Kafka's InvalidRecordException); CreateTime timestamps of every record
  are checked against message.timestamp.{before,after}.max.ms when the caller passes bounds
  (INVALID_TIMESTAMP). A compressed section that does not decompress is CORRUPT_MESSAGE.

Bounded work. A compressed section is decompressed in pieces (`compression.decompressed_pieces`)
and walked as the pieces come (`section.SectionReader`), so what is held of the decoded records is
one codec call's output (256 KiB for gzip and lz4, at most 2 MiB for zstd, one snappy block) plus
the unwalked tail of the previous piece, however far the section expands. A record
longer than a piece is walked field by field and its key, value and header values are skipped
unread, as Kafka's validator skips them. Each batch may decompress to at most
MAX_DECOMPRESSED_BATCH_BYTES (64 MiB) or max.message.bytes, whichever is larger; past that it is
refused with MESSAGE_TOO_LARGE (error 10, DecompressedTooLargeError), as soon as a piece or a
record's announced length passes the limit, and nothing of the request is appended. Why 64 MiB:
64 times the default max.message.bytes, beyond what real producers send (a 1 MiB batch of text or
JSON compresses 5-20x), while it caps what one batch costs to decompress and walk at about a
tenth of a second of one core for zeros and under a second for the smallest possible records;
MESSAGE_TOO_LARGE makes the Java producer split the batch and retry. Kafka has no such limit (it
streams whatever comes); this is a deliberate deviation. The walk itself runs over one piece at a
time, so a caller in a worker thread gives the GIL back between pieces.
`decompression_budget` bounds the decompressed bytes of one call across all its batches: past it
(and below the limit) the call raises DecompressionBudgetExceeded instead, which the produce
handler uses to validate small compressed requests on the event loop and the rest in a worker
thread. `walk_compressed=False` leaves compressed batches' records unwalked (framing, CRC and
counts are still checked): the leader append uses it after the produce handler walked them.

Invariants: the request bytes are never modified here; compressed batches are decompressed only to
be checked and are stored as they came. Batches from a leader (`from_client=False`, a replica's
append) get the framing and CRC checks only, as in Kafka.

Deliberate deviations from Kafka: the decompressed size limit above; a compressed batch whose inner
offsets are not 0..n-1 is refused (INVALID_RECORD) where Kafka would rebuild it with new offsets; a
compressed section that does not decompress is CORRUPT_MESSAGE where Kafka can answer
UNKNOWN_SERVER_ERROR; a key or value length below -1 is refused where Kafka reads it as null. Kafka
also rewrites a CreateTime batch's maxTimestamp to the largest record timestamp; it is kept as the
client wrote it here.

Callers: `storage.log` (append as leader and as follower, and `Log.check_records` for the produce
handler), tests, bench.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

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
from odradek.protocol.records.compression import PIECE_SIZE, decompressed_pieces
from odradek.protocol.records.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)
from odradek.protocol.records.record_loops import read_varint, walk_headers, walk_records
from odradek.protocol.records.section import SectionReader

MAX_DECOMPRESSED_BATCH_BYTES = 64 << 20

_new_header = tuple.__new__
_UNBOUNDED = (-(1 << 64), 1 << 64)
# batchLength (bytes 8-11) and attributes (ATTRIBUTES_OFFSET, 21): all that `has_batch_with` reads
# of a header, once or twice per partition of every Produce
_LENGTH_AND_ATTRIBUTES = struct.Struct(">8xi9xh")


class DecompressionBudgetExceeded(Exception):
    """The batches of one `validate_records` call decompress past its `decompression_budget`."""


def validate_records(
    records: bytes | bytearray | memoryview,
    max_batch_size: int,
    from_client: bool = True,
    timestamp_bounds: tuple[int, int] | None = None,
    require_key: bool = False,
    walk_compressed: bool = True,
    decompression_budget: int | None = None,
) -> ValidatedRecords:
    """Check every batch of a produce `records` field; raise the first problem found.

    `max_batch_size` is max.message.bytes (the whole batch, log overhead included). `from_client`
    applies the rules Kafka applies to producers (counts, control batches, the record walk).
    `timestamp_bounds` (lowest, highest), in ms, bounds every record's CreateTime timestamp.
    `require_key` refuses records with a null key (Kafka's rule for compacted topics).
    `walk_compressed` and `decompression_budget`: see the module docstring.
    """
    end = len(records)
    if end == 0:
        raise InvalidRecordError("no record batches")
    positions: list[int] = []
    headers: list[BatchHeader] = []
    position = offset_count = record_count = 0
    max_timestamp, max_timestamp_index = NO_TIMESTAMP, -1
    limit = max(MAX_DECOMPRESSED_BATCH_BYTES, max_batch_size)
    budget = limit if decompression_budget is None else decompression_budget
    view = memoryview(records)
    try:
        while position < end:
            header = _check_batch(view, position, end, max_batch_size, from_client)
            compressed = header.attributes & COMPRESSION_MASK != 0
            if from_client and (walk_compressed or not compressed):
                bounds = timestamp_bounds or _UNBOUNDED
                batch_limit = min(limit, budget) if compressed else limit
                walked = _check_batch_records(view, position, header, bounds, require_key, batch_limit)
                budget -= walked if compressed else 0
            positions.append(position)
            headers.append(header)
            offset_count += header.last_offset_delta + 1
            record_count += header.records_count
            if header.max_timestamp > max_timestamp:
                max_timestamp, max_timestamp_index = header.max_timestamp, len(headers) - 1
            position += header.batch_length + LOG_OVERHEAD
    except DecompressedTooLargeError as exc:
        if exc.limit < limit:
            raise DecompressionBudgetExceeded(f"over the budget of {decompression_budget} bytes") from None
        raise
    finally:
        view.release()
    return ValidatedRecords(
        tuple(positions), tuple(headers), end, record_count, offset_count, max_timestamp, max_timestamp_index
    )


def has_batch_with(records: bytes | bytearray | memoryview, mask: int) -> bool:
    """Whether any whole batch in `records` has one of the attribute bits of `mask` (COMPRESSION_MASK:
    compressed; TRANSACTIONAL_MASK: transactional); a malformed tail is left to validation."""
    position, end = 0, len(records)
    while end - position >= RECORD_BATCH_OVERHEAD:
        batch_length, attributes = _LENGTH_AND_ATTRIBUTES.unpack_from(records, position)
        if attributes & mask:
            return True
        if batch_length < MIN_BATCH_LENGTH:
            return False
        position += batch_length + LOG_OVERHEAD
    return False


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
    view: memoryview,
    position: int,
    header: BatchHeader,
    timestamp_bounds: tuple[int, int],
    require_key: bool,
    limit: int,
) -> int:
    """Walk the records of the batch at `position`; return the size of its (decompressed) section."""
    section = view[position + RECORD_BATCH_OVERHEAD : position + header.batch_length + LOG_OVERHEAD]
    codec = header.attributes & COMPRESSION_MASK
    if codec == 0:  # one piece: as big as the request allows, and walked on the event loop anyway
        pieces, limit = iter((section.tobytes(),)), len(section)
    else:
        pieces = decompressed_pieces(codec, section, limit)
    lowest, highest = timestamp_bounds
    base = header.base_timestamp
    rules = _RecordRules(lowest - base, highest - base, require_key, limit, codec != 0)
    reader = SectionReader(pieces)
    try:
        reader.more()  # the first piece: the walk starts on records, not on an empty holding
        return _walk(reader, header.records_count, rules)
    except IndexError:
        raise InvalidRecordError("a record runs past the end of its batch") from None
    finally:
        section.release()


class _RecordRules(NamedTuple):
    """What a batch's records are checked against; `limit` is the most the section may hold (its
    size when not `compressed`). A NamedTuple: one is built per batch of every Produce."""

    min_timestamp_delta: int
    max_timestamp_delta: int
    require_key: bool
    limit: int
    compressed: bool


def _walk(reader: SectionReader, count: int, rules: _RecordRules) -> int:
    """Check `count` records read from `reader`; return the size of the section."""
    index = 0
    while index < count:
        walked, reader.position = walk_records(
            reader.data,
            reader.position,
            index,
            count - index,
            rules.min_timestamp_delta,
            rules.max_timestamp_delta,
            rules.require_key,
        )
        index += walked
        if index == count:
            break
        if _next_record_size(reader) > PIECE_SIZE:
            _walk_long_record(reader, index, rules)
            index += 1
        elif not reader.more():
            raise InvalidRecordError("a record runs past the end of its batch")
    if reader.position < len(reader.data) or reader.more():
        raise InvalidRecordError("bytes follow the last record of the batch")
    return reader.offset + len(reader.data)


def _next_record_size(reader: SectionReader) -> int:
    """The size, length prefix included, of the record at the reader's position (0 when its length
    prefix is not whole yet)."""
    try:
        length, start = read_varint(reader.data, reader.position)
    except IndexError:
        return 0
    return start - reader.position + length


def _walk_long_record(reader: SectionReader, index: int, rules: _RecordRules) -> None:
    """Check the record `index`, longer than a piece, field by field; its bytes are skipped, not held."""
    start = reader.section_position
    length = reader.varint()
    record_end = reader.section_position + length
    if record_end > rules.limit:
        if rules.compressed:
            raise DecompressedTooLargeError(rules.limit)
        raise InvalidRecordError(f"record {index} runs past the end of its batch")
    reader.skip(1)  # attributes
    timestamp_delta = reader.varint()
    if not rules.min_timestamp_delta <= timestamp_delta <= rules.max_timestamp_delta:
        raise InvalidTimestampError(f"record {index} has a timestamp outside the allowed bounds")
    offset_delta = reader.varint()
    if offset_delta != index:
        raise InvalidRecordError(f"record {index} has offsetDelta {offset_delta}")
    key_length = _skip_field(reader)
    if rules.require_key and key_length < 0:
        raise InvalidRecordError(f"record {index} has no key, which a compacted topic requires")
    _skip_field(reader)  # the value
    header_count = reader.varint()
    if header_count < 0 or header_count > record_end - reader.section_position:
        raise InvalidRecordError(f"impossible header count {header_count}")
    _skip_headers(reader, header_count)
    if reader.section_position != record_end:
        raise InvalidRecordError(f"record {index} at {start} does not fill its length of {length} bytes")


def _skip_field(reader: SectionReader) -> int:
    """Step over a varint-length-prefixed field; return its length (-1: null)."""
    length = reader.varint()
    if length < -1:
        raise InvalidRecordError(f"negative length {length}")
    reader.skip(max(length, 0))
    return length


def _skip_headers(reader: SectionReader, count: int) -> None:
    """The headers of a long record: the whole ones in the held piece by the compiled loop, one that
    spans pieces field by field."""
    while count:
        walked, reader.position = walk_headers(reader.data, reader.position, count)
        count -= walked
        if count:
            if _skip_field(reader) < 0:
                raise InvalidRecordError("null or negative-length header key")
            _skip_field(reader)
            count -= 1
