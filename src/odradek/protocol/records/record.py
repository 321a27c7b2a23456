"""Records inside a RecordBatch v2: the varint record format, encoded and decoded.

Owns the per-record layout (protobuf zigzag varints):

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value | headerCount varint
    headers: headerKeyLength varint | headerKey (UTF-8) | headerValueLength varint | headerValue

A length of -1 stands for a null key, value or header value. A record's offset is the batch's
baseOffset + offsetDelta; its timestamp is baseTimestamp + timestampDelta, except in a LogAppendTime
batch where every record carries the batch's maxTimestamp.

Invariants: decoding never trusts a length: a record running past its section raises
CorruptRecordError. `decode_columns` is the fast path (no per-record objects, for the Spark source);
`decode_records` builds `Record` values on top of it.

`record_times` reads only the timestamps and offsets of one batch, in bounded pieces (ListOffsets).

Callers: `records.builder` (encoding), clients, tests, internal topics, the Spark source (decoding),
`storage.log` (`record_times`, for ListOffsets). Never the broker's produce or fetch path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from odradek.protocol.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
)
from odradek.protocol.records.compression import CompressionType, decompress, decompressed_pieces
from odradek.protocol.records.errors import CorruptRecordError
from odradek.protocol.records.record_loops import Header, decode_records_into, read_record_times
from odradek.protocol.records.section import SectionReader


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record, placed at its absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(slots=True)
class RecordColumns:
    """Decoded records as parallel lists (one entry per record), filled batch after batch.

    `timestamp_types` holds 0 for CreateTime and 1 for LogAppendTime, as Spark's Kafka schema does.
    """

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[Header, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def encode_varint(value: int) -> bytes:
    """Zigzag + LEB128, as Kafka's ByteUtils.writeVarint/writeVarlong."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] | list[Header] = (),
) -> bytes:
    """One record, length prefix included."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    _append_bytes(parts, key)
    _append_bytes(parts, value)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        _append_bytes(parts, header_key.encode())
        _append_bytes(parts, header_value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _append_bytes(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(encode_varint(-1))
    else:
        parts.append(encode_varint(len(data)))
        parts.append(bytes(data))


def decode_records(buf: bytes | bytearray | memoryview, include_control: bool = False) -> list[Record]:
    """Every record of every complete batch in `buf` (a fetch response or a log slice)."""
    columns = decode_columns(buf, include_control)
    return [
        Record(*fields)
        for fields in zip(
            columns.offsets, columns.timestamps, columns.keys, columns.values, columns.headers, strict=True
        )
    ]


def decode_columns(
    buf: bytes | bytearray | memoryview,
    include_control: bool = False,
    columns: RecordColumns | None = None,
) -> RecordColumns:
    """Decode every complete batch in `buf` into `columns` (a new one when not given).

    Control batches (transaction markers) are skipped unless `include_control`.
    """
    columns = RecordColumns() if columns is None else columns
    for position, header in iter_batches(buf):
        if header.attributes & CONTROL_MASK and not include_control:
            continue
        decode_batch_into(buf, position, header, columns)
    return columns


def iter_batch_records(buf: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Each complete batch in `buf` with its records, control batches included."""
    for position, header in iter_batches(buf):
        columns = decode_batch_into(buf, position, header, RecordColumns())
        records = [
            Record(*fields)
            for fields in zip(
                columns.offsets,
                columns.timestamps,
                columns.keys,
                columns.values,
                columns.headers,
                strict=True,
            )
        ]
        yield header, records


def decode_batch_into(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, columns: RecordColumns
) -> RecordColumns:
    """Append the records of the batch at `position` (whose header is `header`) to `columns`."""
    end = position + header.batch_length + LOG_OVERHEAD
    with memoryview(buf) as view:
        section = view[position + RECORD_BATCH_OVERHEAD : end]
        codec = header.attributes & COMPRESSION_MASK
        data = bytes(section) if codec == CompressionType.NONE else decompress(codec, section)
        section.release()
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else -1
    lists = (columns.offsets, columns.timestamps, columns.timestamp_types, columns.keys, columns.values)
    try:
        decode_records_into(
            data,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            log_append_time,
            (*lists, columns.headers),
        )
    except IndexError:
        raise CorruptRecordError("record runs past the end of its batch") from None
    return columns


def record_times(batch: bytes | bytearray | memoryview, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """(timestamp, offset) of each record of the one batch in `batch`, in order, read in bounded
    pieces: neither keys nor values are kept and a compressed batch is never held decompressed
    (ListOffsets lookups). A LogAppendTime batch gives every record its maxTimestamp."""
    with memoryview(batch) as view:
        section = view[RECORD_BATCH_OVERHEAD : header.batch_length + LOG_OVERHEAD]
        codec = header.attributes & COMPRESSION_MASK
        pieces = iter((section.tobytes(),)) if codec == 0 else decompressed_pieces(codec, section, 1 << 62)
        append_time = header.attributes & TIMESTAMP_TYPE_MASK
        reader, left = SectionReader(pieces), header.records_count
        deltas: list[int] = []
        try:
            while left:
                read, reader.position = read_record_times(reader.data, reader.position, left, deltas)
                left -= read
                if left and not read:  # the next record is not whole in the held piece
                    _read_split_record(reader, deltas)
                    left -= 1
                for index in range(0, len(deltas), 2):
                    timestamp = header.max_timestamp if append_time else header.base_timestamp + deltas[index]
                    yield timestamp, header.base_offset + deltas[index + 1]
                deltas.clear()
        except IndexError:
            raise CorruptRecordError("record runs past the end of its batch") from None
        finally:
            section.release()


def _read_split_record(reader: SectionReader, deltas: list[int]) -> None:
    """Append the deltas of a record that spans pieces and step over the rest of it."""
    length = reader.varint()
    record_end = reader.section_position + length
    reader.skip(1)  # attributes
    deltas.append(reader.varint())
    deltas.append(reader.varint())
    if record_end < reader.section_position:
        raise CorruptRecordError("record length does not match its fields")
    reader.skip(record_end - reader.section_position)
