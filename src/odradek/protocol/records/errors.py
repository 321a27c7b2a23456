"""Exceptions raised while validating or decoding record batches.

Owns: one exception class per Kafka error a malformed batch maps to, each carrying Kafka's numeric
error code in `error_code` so a handler answers with it unchanged.

Invariants: the codes are Kafka's (CORRUPT_MESSAGE=2, MESSAGE_TOO_LARGE=10, INVALID_TIMESTAMP=32,
UNSUPPORTED_FOR_MESSAGE_FORMAT=43, INVALID_RECORD=87). These classes raise before any state changes.

Callers: `records.batch` and `records.record` raise them; storage and the produce handler catch them.
"""

from __future__ import annotations

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
INVALID_RECORD = 87


class RecordsError(Exception):
    """A record batch Kafka would refuse; `error_code` is the Kafka error code to answer with."""

    error_code: int = INVALID_RECORD

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def code(self) -> int:
        return self.error_code


class CorruptRecordError(RecordsError):
    """Bad CRC, torn batch, impossible length: CORRUPT_MESSAGE."""

    error_code = CORRUPT_MESSAGE


class RecordTooLargeError(RecordsError):
    """A batch larger than max.message.bytes: MESSAGE_TOO_LARGE."""

    error_code = MESSAGE_TOO_LARGE


class InvalidRecordError(RecordsError):
    """A well-formed batch whose contents Kafka refuses (counts, control batches): INVALID_RECORD."""

    error_code = INVALID_RECORD


class InvalidTimestampError(RecordsError):
    """A CreateTime timestamp outside message.timestamp.{before,after}.max.ms: INVALID_TIMESTAMP."""

    error_code = INVALID_TIMESTAMP


class UnsupportedForMessageFormatError(RecordsError):
    """A magic 0 or 1 message set where only RecordBatch v2 is accepted."""

    error_code = UNSUPPORTED_FOR_MESSAGE_FORMAT
