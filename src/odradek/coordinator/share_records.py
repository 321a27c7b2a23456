"""The records of `__share_group_state` (Kafka's share coordinator): their bytes and their replay.

Owns the mapping between `ShareState` (one share-partition's durable state) and Kafka's
coordinator records, encoded with the generated specs (odradek/protocol/messages/share_*): a key is
the int16 record type followed by the key struct (version 0), a value the int16 version 0 followed
by the value struct (flexible), a deletion the key with a null value.

| record type | key | value |
|---|---|---|
| 0 ShareSnapshot | group, topic id, partition | epochs, start offset, timestamps, every batch |
| 1 ShareUpdate | group, topic id, partition | epochs, start offset, the batches that changed |

Replay (Kafka's): a snapshot replaces the state; an update merges its batches over the state (an
offset's newest batch wins), drops what is below its start offset and keeps the snapshot's state
epoch; a tombstone of the snapshot key deletes the state.

Callers: share_coordinator.py and tests. Pure: bytes in, values out.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from odradek.coordinator.share_partition import StateBatch
from odradek.protocol import codec
from odradek.protocol.messages import (
    share_snapshot_key,
    share_snapshot_value,
    share_update_key,
    share_update_value,
)

_VERSION = 0
SNAPSHOT = share_snapshot_key.RECORD_TYPE
UPDATE = share_update_key.RECORD_TYPE


@dataclass(frozen=True, slots=True)
class StateKey:
    """A share-partition: its group and its topic partition by topic id (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """What picks its `__share_group_state` partition (Kafka's asCoordinatorKey)."""
        return f"{self.group_id}:{_uuid_text(self.topic_id)}:{self.partition}"


def _uuid_text(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class ShareState:
    """One share-partition's durable state (Kafka's ShareGroupOffset)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1


def merge(state: ShareState, start_offset: int, batches: Iterable[StateBatch]) -> tuple[StateBatch, ...]:
    """`state`'s batches with `batches` written over them, below `start_offset` dropped, as runs."""
    offsets: dict[int, tuple[int, int]] = {}
    for batch in (*state.batches, *batches):
        for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
            offsets[offset] = (batch.delivery_state, batch.delivery_count)
    runs: list[StateBatch] = []
    for offset in sorted(offsets):
        kind, count = offsets[offset]
        last = runs[-1] if runs else None
        if (
            last is not None
            and last.last_offset == offset - 1
            and (last.delivery_state, last.delivery_count)
            == (
                kind,
                count,
            )
        ):
            runs[-1] = StateBatch(last.first_offset, offset, kind, count)
        else:
            runs.append(StateBatch(offset, offset, kind, count))
    return tuple(runs)


# -- bytes -----------------------------------------------------------------------------------------


def _key(record_type: int, key: StateKey) -> bytes:
    if record_type == SNAPSHOT:
        encoded = codec.encode_message(
            share_snapshot_key.SPEC, _VERSION, share_snapshot_key.ShareSnapshotKey(*_key_fields(key))
        )
    else:
        encoded = codec.encode_message(
            share_update_key.SPEC, _VERSION, share_update_key.ShareUpdateKey(*_key_fields(key))
        )
    return record_type.to_bytes(2, "big", signed=True) + encoded


def _key_fields(key: StateKey) -> tuple[str, uuid.UUID, int]:
    return key.group_id, key.topic_id, key.partition


def snapshot_record(key: StateKey, state: ShareState) -> tuple[bytes, bytes]:
    value = share_snapshot_value.ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        create_timestamp=state.create_timestamp,
        write_timestamp=state.write_timestamp,
        state_batches=[
            share_snapshot_value.ShareSnapshotValue.StateBatch(*_fields(b)) for b in state.batches
        ],
    )
    encoded = codec.encode_message(share_snapshot_value.SPEC, _VERSION, value)
    return _key(SNAPSHOT, key), _VERSION.to_bytes(2, "big", signed=True) + encoded


def update_record(
    key: StateKey, snapshot_epoch: int, leader_epoch: int, start_offset: int, batches: Sequence[StateBatch]
) -> tuple[bytes, bytes]:
    value = share_update_value.ShareUpdateValue(
        snapshot_epoch=snapshot_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=[share_update_value.ShareUpdateValue.StateBatch(*_fields(b)) for b in batches],
    )
    encoded = codec.encode_message(share_update_value.SPEC, _VERSION, value)
    return _key(UPDATE, key), _VERSION.to_bytes(2, "big", signed=True) + encoded


def tombstones(key: StateKey) -> list[tuple[bytes, None]]:
    return [(_key(SNAPSHOT, key), None), (_key(UPDATE, key), None)]


def _fields(batch: StateBatch) -> tuple[int, int, int, int]:
    return batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count


def _batches(values: Iterable[object]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)  # type: ignore[attr-defined]
        for b in values
    )


def replay(states: dict[StateKey, ShareState], key_bytes: bytes | None, value: bytes | None) -> None:
    """Apply one record of the partition to `states` (records of other types are skipped)."""
    if key_bytes is None or len(key_bytes) < 2:
        return
    record_type = int.from_bytes(key_bytes[:2], "big", signed=True)
    if record_type not in (SNAPSHOT, UPDATE):
        return
    module = share_snapshot_key if record_type == SNAPSHOT else share_update_key
    decoded = codec.decode_message(module.SPEC, _VERSION, memoryview(key_bytes)[2:])
    key = StateKey(decoded.group_id, decoded.topic_id, decoded.partition)
    if value is None:
        if record_type == SNAPSHOT:
            states.pop(key, None)
        return
    if record_type == SNAPSHOT:
        snap = codec.decode_message(share_snapshot_value.SPEC, _VERSION, memoryview(value)[2:])
        states[key] = ShareState(
            snap.state_epoch,
            snap.leader_epoch,
            snap.start_offset,
            _batches(snap.state_batches),
            snap.snapshot_epoch,
            snap.create_timestamp,
            snap.write_timestamp,
        )
        return
    current = states.get(key)
    if current is None:
        return
    update = codec.decode_message(share_update_value.SPEC, _VERSION, memoryview(value)[2:])
    start = update.start_offset if update.start_offset >= 0 else current.start_offset
    states[key] = replace(
        current,
        leader_epoch=max(current.leader_epoch, update.leader_epoch),
        start_offset=start,
        batches=merge(current, start, _batches(update.state_batches)),
    )
