"""The key and value formats of records in `__transaction_state`.

Owns the byte layout of the transaction log, Kafka's own (TransactionLogKey / TransactionLogValue):

- key version 0: transactional_id (string);
- value version 0: producer_id (int64), producer_epoch (int16), transaction_timeout_ms (int32),
  transaction_status (int8), transaction_partitions (nullable array of topic (string) and
  partition_ids ([]int32)), transaction_last_update_timestamp_ms (int64),
  transaction_start_timestamp_ms (int64);
- value version 1: the same fields in the flexible encoding (compact strings and arrays, tagged
  fields, which are skipped on read).

A transactional id that expired is a tombstone: the key with a null value. Written: version 0.
Callers: the transaction coordinator (writes, and replay on load) and tests. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.primitives import ProtocolDecodeError, Reader, Writer

KEY_VERSION = 0
VALUE_VERSION = 0
_FLEXIBLE_VALUE_VERSION = 1


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


class TxnRecordFormatError(ValueError):
    """A key or value in `__transaction_state` is malformed or of an unknown version."""


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.nullable_string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> str:
    r = Reader(data)
    try:
        version = r.int16()
        if version != KEY_VERSION:
            raise TxnRecordFormatError(f"unknown __transaction_state key version {version}")
        return r.string()
    except ProtocolDecodeError as exc:
        raise TxnRecordFormatError(f"malformed __transaction_state key: {exc}") from None


def encode_value(value: TxnLogValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.timeout_ms)
    w.int8(value.status)
    topics = _by_topic(value.partitions)
    w.array_length(len(topics))
    for topic, partitions in topics.items():
        w.nullable_string(topic)
        w.array_length(len(partitions))
        for partition in partitions:
            w.int32(partition)
    w.int64(value.last_update_ms)
    w.int64(value.start_ms)
    return w.getvalue()


def decode_value(data: bytes | memoryview) -> TxnLogValue:
    r = Reader(data)
    try:
        version = r.int16()
        if version not in (VALUE_VERSION, _FLEXIBLE_VALUE_VERSION):
            raise TxnRecordFormatError(f"unknown __transaction_state value version {version}")
        return _read_value(r, version == _FLEXIBLE_VALUE_VERSION)
    except ProtocolDecodeError as exc:
        raise TxnRecordFormatError(f"malformed __transaction_state value: {exc}") from None


def _read_value(r: Reader, flexible: bool) -> TxnLogValue:
    producer_id, producer_epoch, timeout_ms, status = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: list[tuple[str, int]] = []
    for _ in range(max(_array_length(r, flexible), 0)):
        topic = r.compact_string() if flexible else r.string()
        partitions.extend((topic, r.int32()) for _ in range(max(_array_length(r, flexible), 0)))
        if flexible:
            r.tagged_fields()
    last_update_ms, start_ms = r.int64(), r.int64()
    return TxnLogValue(
        producer_id, producer_epoch, timeout_ms, status, tuple(partitions), last_update_ms, start_ms
    )


def _array_length(r: Reader, flexible: bool) -> int:
    return r.compact_array_length() if flexible else r.array_length()


def _by_topic(partitions: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return topics
