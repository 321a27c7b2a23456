"""Building RecordBatch v2 bytes from records, as a producer does.

Owns: `SimpleRecord` (what a producer hands over: timestamp, key, value, headers) and `build_batch`,
which lays out the records, compresses the records section with the chosen codec, fills the header
(baseTimestamp = first record's timestamp, maxTimestamp = the largest, lastOffsetDelta = count - 1)
and computes the CRC32C; `pack_batch`, the last step alone (a header around an encoded section),
which the log cleaner also uses for the batches it rewrites.

Invariants: the output passes `validation.validate_records(..., from_client=True)` unless it is a control
batch; offsets inside are 0..count-1 relative to `base_offset`.

Callers: clients, tests, the internal __consumer_offsets writer, the Spark sink, the log cleaner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.records.batch import (
    CONTROL_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    TimestampType,
    batch_crc,
)
from odradek.protocol.records.compression import CompressionType, compress
from odradek.protocol.records.record import Header, encode_record


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record before it has an offset."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int = NO_TIMESTAMP


def build_batch(
    records: Sequence[SimpleRecord],
    compression: CompressionType = CompressionType.NONE,
    base_offset: int = 0,
    *,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """One complete batch holding `records` (at least one)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    base_timestamp = records[0].timestamp
    max_timestamp = max(record.timestamp for record in records)
    section = b"".join(
        encode_record(
            delta, _delta(record.timestamp, base_timestamp), record.key, record.value, record.headers
        )
        for delta, record in enumerate(records)
    )
    if compression != CompressionType.NONE:
        section = compress(compression, section)
    attributes = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    header = BatchHeader(
        base_offset,
        0,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return pack_batch(header, section)


def pack_batch(header: BatchHeader, section: bytes) -> bytes:
    """A complete batch: `header`'s fields around the encoded (and compressed) records `section`,
    with the batch length, magic 2 and the CRC32C computed (those fields of `header` are ignored)."""
    buf = bytearray(HEADER.size + len(section))
    HEADER.pack_into(
        buf, 0, *header._replace(batch_length=len(buf) - LOG_OVERHEAD, magic=CURRENT_MAGIC, crc=0)
    )
    buf[HEADER.size :] = section
    crc = batch_crc(buf, 0, len(buf))
    buf[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(buf)


def _delta(timestamp: int, base_timestamp: int) -> int:
    return 0 if timestamp == NO_TIMESTAMP else timestamp - base_timestamp
