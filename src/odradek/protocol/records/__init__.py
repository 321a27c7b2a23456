"""RecordBatch v2: header view, validation, patching, compression, record encoding and decoding.

Stored batches stay opaque: the broker validates them (`validation`: headers, CRCs and a walk of
every record) and patches base offsets (`batch`), but never rewrites records; `builder`, `record`
and `compression` serve validation, clients, tests, internal topics and Spark; `control` builds
and reads the transaction markers.
"""

from odradek.protocol.records.batch import (
    BatchHeader,
    TimestampType,
    ValidatedRecords,
    assign_offsets,
    iter_batches,
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
from odradek.protocol.records.validation import validate_records

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
