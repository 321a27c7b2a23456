"""Exceptions raised while validating or decoding record batches.

Owns: one `KafkaError` subclass per Kafka error a malformed batch maps to; each class fixes its code
(`error_code`, also the instance's `code`) so a handler answers with it unchanged.

Invariants: the codes are Kafka's (CORRUPT_MESSAGE=2, MESSAGE_TOO_LARGE=10, INVALID_TIMESTAMP=32,
UNSUPPORTED_FOR_MESSAGE_FORMAT=43, INVALID_RECORD=87). These are raised before any state changes.

Callers: `records.batch` and `records.record` raise them; storage and the produce handler catch them.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError


class RecordsError(KafkaError):
    """A record batch Kafka would refuse; `error_code` is the Kafka error code to answer with."""

    error_code: ErrorCode = ErrorCode.INVALID_RECORD

    def __init__(self, message: str) -> None:
        super().__init__(self.error_code, message)


class CorruptRecordError(RecordsError):
    """Bad CRC, torn batch, impossible length: CORRUPT_MESSAGE."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(RecordsError):
    """A batch larger than max.message.bytes: MESSAGE_TOO_LARGE."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class DecompressedTooLargeError(RecordTooLargeError):
    """A compressed batch that decompresses to more than the broker accepts: MESSAGE_TOO_LARGE, which
    makes a Java producer split the batch and retry (see `records.validation`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the batch decompresses to more than {limit} bytes")
        self.limit = limit


class InvalidRecordError(RecordsError):
    """A well-formed batch whose contents Kafka refuses (counts, control batches): INVALID_RECORD."""

    error_code = ErrorCode.INVALID_RECORD


class InvalidTimestampError(RecordsError):
    """A CreateTime timestamp outside message.timestamp.{before,after}.max.ms: INVALID_TIMESTAMP."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedForMessageFormatError(RecordsError):
    """A magic 0 or 1 message set where only RecordBatch v2 is accepted."""

    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
