"""The records of share groups (KIP-932) in `__consumer_offsets`: their bytes and their replay.

Owns the mapping between the typed records of share_group.py and Kafka 4's coordinator records,
encoded with the generated specs (odradek/protocol/messages/share_group_*_key/value.py): a key is
the int16 record type then the key struct (version 0), a value the int16 version 0 then the value
struct, a deletion the key with a null value.

| record type | key | value |
|---|---|---|
| 10 ShareGroupMemberMetadata | group, member | rack, client, client host, subscribed topics |
| 11 ShareGroupMetadata | group | group epoch, metadata hash |
| 12 ShareGroupTargetAssignmentMetadata | group | assignment epoch |
| 13 ShareGroupTargetAssignmentMember | group, member | target partitions |
| 14 ShareGroupCurrentMemberAssignment | group, member | epochs, state, assigned |
| 15 ShareGroupStatePartitionMetadata | group | the share-partitions the group has state for |

Replay (`ShareGroupReplay`): the last value of each key wins, a tombstone deletes it; a group
exists while its ShareGroupMetadata record does.
Callers: the coordinator shard (writes), the loader (replay), tests. Pure: bytes in, values out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.consumer_records import ConsumerRecordError, record_type
from odradek.coordinator.share_group import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberMetadataRecord,
    SgRecord,
    ShareGroup,
    ShareMember,
    StatePartitionsRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicPartitions,
)
from odradek.protocol import codec
from odradek.protocol.messages import share_group_current_member_assignment_key as current_key
from odradek.protocol.messages import share_group_current_member_assignment_value as current_value
from odradek.protocol.messages import share_group_member_metadata_key as member_key
from odradek.protocol.messages import share_group_member_metadata_value as member_value
from odradek.protocol.messages import share_group_metadata_key as metadata_key
from odradek.protocol.messages import share_group_metadata_value as metadata_value
from odradek.protocol.messages import share_group_state_partition_metadata_key as state_key
from odradek.protocol.messages import share_group_state_partition_metadata_value as state_value
from odradek.protocol.messages import share_group_target_assignment_member_key as target_member_key
from odradek.protocol.messages import share_group_target_assignment_member_value as target_member_value
from odradek.protocol.messages import share_group_target_assignment_metadata_key as target_metadata_key
from odradek.protocol.messages import share_group_target_assignment_metadata_value as target_metadata_value
from odradek.protocol.primitives import ProtocolDecodeError

_VERSION = 0

RECORD_TYPES = frozenset(
    {
        member_key.RECORD_TYPE,
        metadata_key.RECORD_TYPE,
        target_metadata_key.RECORD_TYPE,
        target_member_key.RECORD_TYPE,
        current_key.RECORD_TYPE,
        state_key.RECORD_TYPE,
    }
)


def _key(module: Any, key: object) -> bytes:
    return module.RECORD_TYPE.to_bytes(2, "big", signed=True) + codec.encode_message(
        module.SPEC, _VERSION, key
    )


def _value(module: Any, value: object) -> bytes:
    return _VERSION.to_bytes(2, "big", signed=True) + codec.encode_message(module.SPEC, _VERSION, value)


def _topic_partitions(cls: Any, partitions: TopicPartitions) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(partitions.items()) if p]


def encode(record: SgRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a record; value None for a tombstone."""
    match record:
        case GroupEpochRecord(group_id, epoch, metadata_hash):
            key = _key(metadata_key, metadata_key.ShareGroupMetadataKey(group_id))
            if epoch is None:
                return key, None
            return key, _value(metadata_value, metadata_value.ShareGroupMetadataValue(epoch, metadata_hash))
        case MemberMetadataRecord(group_id, member_id, member):
            key = _key(member_key, member_key.ShareGroupMemberMetadataKey(group_id, member_id))
            if member is None:
                return key, None
            metadata = member_value.ShareGroupMemberMetadataValue(
                member.rack_id, member.client_id, member.client_host, list(member.subscribed_topic_names)
            )
            return key, _value(member_value, metadata)
        case TargetMemberRecord(group_id, member_id, partitions):
            key = _key(
                target_member_key, target_member_key.ShareGroupTargetAssignmentMemberKey(group_id, member_id)
            )
            if partitions is None:
                return key, None
            target_cls = target_member_value.ShareGroupTargetAssignmentMemberValue
            target = target_cls(_topic_partitions(target_cls.TopicPartition, partitions))
            return key, _value(target_member_value, target)
        case TargetEpochRecord(group_id, epoch, timestamp_ms):
            key = _key(
                target_metadata_key, target_metadata_key.ShareGroupTargetAssignmentMetadataKey(group_id)
            )
            if epoch is None:
                return key, None
            epochs = target_metadata_value.ShareGroupTargetAssignmentMetadataValue(epoch, timestamp_ms)
            return key, _value(target_metadata_value, epochs)
        case CurrentAssignmentRecord(group_id, member_id, member):
            key = _key(current_key, current_key.ShareGroupCurrentMemberAssignmentKey(group_id, member_id))
            if member is None:
                return key, None
            current_cls = current_value.ShareGroupCurrentMemberAssignmentValue
            current = current_cls(
                member_epoch=member.member_epoch,
                previous_member_epoch=member.previous_member_epoch,
                state=0,  # STABLE: share group members have no other state
                assigned_partitions=_topic_partitions(current_cls.TopicPartitions, member.assigned),
            )
            return key, _value(current_value, current)
        case StatePartitionsRecord(group_id, initialized):
            key = _key(state_key, state_key.ShareGroupStatePartitionMetadataKey(group_id))
            if initialized is None:
                return key, None
            info = state_value.ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo
            topics = [info(t, name, sorted(ps)) for t, (name, ps) in sorted(initialized.items())]
            state = state_value.ShareGroupStatePartitionMetadataValue(initialized_topics=topics)
            return key, _value(state_value, state)
    raise TypeError(f"not a share group record: {record!r}")


@dataclass(slots=True)
class _GroupRecords:
    epoch: int | None = None
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)


class ShareGroupReplay:
    """The share group records of one partition in log order; `groups()` builds the result."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupRecords] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        try:
            self._apply(record_type(key), memoryview(key)[2:], value)
        except (ProtocolDecodeError, ValueError) as exc:
            raise ConsumerRecordError(f"malformed share group record: {exc}") from None

    def _apply(self, kind: int, key: memoryview, value: bytes | None) -> None:
        def decode_value(module: Any) -> Any:
            assert value is not None
            return codec.decode_message(module.SPEC, _VERSION, memoryview(value)[2:])

        if kind == state_key.RECORD_TYPE:  # the share-partitions with state (initializing ones too)
            group_id = codec.decode_message(state_key.SPEC, _VERSION, key).group_id
            state = self._groups.setdefault(group_id, _GroupRecords())
            state.initialized = {}
            if value is not None:
                decoded = decode_value(state_value)
                for t in [*decoded.initialized_topics, *decoded.initializing_topics]:
                    known = state.initialized.get(t.topic_id, (t.topic_name, frozenset()))[1]
                    state.initialized[t.topic_id] = (t.topic_name, known | frozenset(t.partitions))
            return
        if kind in (metadata_key.RECORD_TYPE, target_metadata_key.RECORD_TYPE):
            module = metadata_key if kind == metadata_key.RECORD_TYPE else target_metadata_key
            group_id = codec.decode_message(module.SPEC, _VERSION, key).group_id
            if kind == metadata_key.RECORD_TYPE and value is None:
                self._groups.pop(group_id, None)
                return
            state = self._groups.setdefault(group_id, _GroupRecords())
            if kind == metadata_key.RECORD_TYPE:
                decoded = decode_value(metadata_value)
                state.epoch, state.metadata_hash = decoded.epoch, decoded.metadata_hash
            else:
                state.assignment_epoch = (
                    0 if value is None else decode_value(target_metadata_value).assignment_epoch
                )
            return
        modules = {
            member_key.RECORD_TYPE: (member_key, member_value, "members"),
            target_member_key.RECORD_TYPE: (target_member_key, target_member_value, "target"),
            current_key.RECORD_TYPE: (current_key, current_value, "current"),
        }
        if kind not in modules:
            raise ValueError(f"record type {kind} is not a share group record")
        key_module, value_module, attribute = modules[kind]
        decoded_key = codec.decode_message(key_module.SPEC, _VERSION, key)
        held: dict[str, Any] = getattr(
            self._groups.setdefault(decoded_key.group_id, _GroupRecords()), attribute
        )
        if value is None:
            held.pop(decoded_key.member_id, None)
        elif kind == target_member_key.RECORD_TYPE:
            held[decoded_key.member_id] = _partitions(decode_value(value_module).topic_partitions)
        else:
            held[decoded_key.member_id] = decode_value(value_module)

    def groups(self) -> dict[str, ShareGroup]:
        """The groups whose metadata record stands (deadlines unset: the shard gives fresh ones)."""
        return {group_id: _group(group_id, r) for group_id, r in self._groups.items() if r.epoch is not None}


def _partitions(topic_partitions: list[Any]) -> dict[uuid.UUID, frozenset[int]]:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def _group(group_id: str, records: _GroupRecords) -> ShareGroup:
    members: dict[str, ShareMember] = {}
    for member_id, metadata in records.members.items():
        current = records.current.get(member_id)
        members[member_id] = ShareMember(
            member_id=member_id,
            rack_id=metadata.rack_id,
            client_id=metadata.client_id,
            client_host=metadata.client_host,
            subscribed_topic_names=tuple(metadata.subscribed_topic_names),
            member_epoch=current.member_epoch if current is not None else 0,
            previous_member_epoch=current.previous_member_epoch if current is not None else 0,
            assigned=_partitions(current.assigned_partitions) if current is not None else {},
        )
    assert records.epoch is not None
    return ShareGroup(
        group_id,
        group_epoch=records.epoch,
        assignment_epoch=records.assignment_epoch,
        metadata_hash=records.metadata_hash,
        members=members,
        target={m: p for m, p in records.target.items() if m in members},
        initialized=dict(records.initialized),
    )
