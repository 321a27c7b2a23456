"""Control records: the transaction markers (Kafka's EndTransactionMarker) that end a transaction.

Owns the layout of the one record of a control batch (a batch with attribute bits 4, transactional,
and 5, control, set; uncompressed, base sequence -1):

    key:   version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value: version int16 (0) | coordinator epoch int32

`build_end_txn_marker` makes such a batch (offsets relative to 0, as `build_batch`); `read_end_txn_marker`
reads the marker back from a control batch's bytes.

Callers: storage (the leader's marker append, replaying markers when producer state is rebuilt),
tests.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from odradek.protocol.records.batch import NO_PARTITION_LEADER_EPOCH, BatchHeader
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.errors import CorruptRecordError
from odradek.protocol.records.record import RecordColumns, decode_batch_into

CONTROL_KEY = struct.Struct(">hh")
END_TXN_VALUE = struct.Struct(">hi")
CONTROL_RECORD_VERSION = 0


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    marker: EndTransactionMarker,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding `marker`, for `producer_id` at `producer_epoch`."""
    record = SimpleRecord(
        key=CONTROL_KEY.pack(CONTROL_RECORD_VERSION, marker.control_type),
        value=END_TXN_VALUE.pack(CONTROL_RECORD_VERSION, marker.coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )


def read_end_txn_marker(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> EndTransactionMarker:
    """The marker of the control batch at `position` of `buf`; CorruptRecordError if it is none."""
    columns = decode_batch_into(buf, position, header, RecordColumns())
    if len(columns.keys) != 1:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset} holds {len(columns.keys)} records"
        )
    key, value = columns.keys[0], columns.values[0]
    if key is None or len(key) < CONTROL_KEY.size or value is None or len(value) < END_TXN_VALUE.size:
        raise CorruptRecordError(f"control record at offset {header.base_offset} is not a transaction marker")
    _, control_type = CONTROL_KEY.unpack_from(key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control record type {control_type} at offset {header.base_offset}")
    _, coordinator_epoch = END_TXN_VALUE.unpack_from(value)
    return EndTransactionMarker(ControlRecordType(control_type), coordinator_epoch)
