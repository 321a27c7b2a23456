"""RecordBatch v2: header view, validation, patching, compression, record encoding and decoding.

Stored batches stay opaque: the broker only validates headers and CRCs and patches base offsets
(`batch`); `builder`, `record` and `compression` serve clients, tests, internal topics and Spark.
"""

from odradek.protocol.records.batch import (
    BatchHeader,
    TimestampType,
    ValidatedRecords,
    assign_offsets,
    iter_batches,
    validate_records,
)
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordsError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)
from odradek.protocol.records.record import Record, RecordColumns, decode_columns, decode_records

__all__ = [
    "BatchHeader",
    "CompressionType",
    "CorruptRecordError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "Record",
    "RecordColumns",
    "RecordTooLargeError",
    "RecordsError",
    "SimpleRecord",
    "TimestampType",
    "UnsupportedForMessageFormatError",
    "ValidatedRecords",
    "assign_offsets",
    "build_batch",
    "decode_columns",
    "decode_records",
    "iter_batches",
    "validate_records",
]
