"""Exceptions the storage layer raises, each carrying the Kafka error code a handler answers with.

Owns: `StorageError` (a `KafkaError` whose class fixes `error_code`), `OffsetOutOfRangeError`
(OFFSET_OUT_OF_RANGE=1) and
`KafkaStorageError` (KAFKA_STORAGE_ERROR=56: a failed disk operation, the log left consistent).
Batch problems found while appending are the `odradek.protocol.records.errors` classes
(CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP, ...), re-exported here.

Callers: everything in storage raises these; replication and the handlers catch them.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordsError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "RecordsError",
    "StorageError",
    "UnsupportedForMessageFormatError",
]


class StorageError(KafkaError):
    """A storage failure a client sees as `error_code`."""

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(self.error_code, message)


class OffsetOutOfRangeError(StorageError):
    """A fetch offset below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class KafkaStorageError(StorageError):
    """A disk operation failed (ENOSPC, EIO...); what was written of it has been rolled back."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
