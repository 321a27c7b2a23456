"""The records of consumer-protocol groups (KIP-848) in `__consumer_offsets`: their bytes and
their replay.

Owns the mapping between the typed records of consumer_group.py and Kafka's coordinator records,
encoded with the generated specs (odradek/protocol/messages/consumer_group_*_key/value.py): a key
is the int16 record type followed by the key struct (version 0), a value the int16 version 0
followed by the value struct (flexible: tagged fields), a deletion the key with a null value.

| record type | key | value |
|---|---|---|
| 3 ConsumerGroupMetadata | group | group epoch, metadata hash |
| 4 ConsumerGroupPartitionMetadata | group | (Kafka 3.x subscription metadata: read and ignored) |
| 5 ConsumerGroupMemberMetadata | group, member | instance, rack, client, subscriptions, assignor |
| 6 ConsumerGroupTargetAssignmentMetadata | group | assignment epoch |
| 7 ConsumerGroupTargetAssignmentMember | group, member | target partitions |
| 8 ConsumerGroupCurrentMemberAssignment | group, member | epochs, state, assigned, revoking |
| 16 ConsumerGroupRegularExpression | group, regex | matched topics |

Replay (`ConsumerGroupReplay`): the last value of each key wins, a tombstone deletes it; the groups
are built once the partition is read (`groups()`), a group existing while its metadata record does.
Deletion order as Kafka writes it: a member's current assignment, target and metadata tombstones;
a group's target assignment metadata then metadata tombstone.

Callers: the coordinator shard (writes), the loader (replay) and tests. Pure: bytes in, values out.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator import classic
from odradek.coordinator.consumer_group import (
    CgRecord,
    ClassicGroupRecord,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberMetadataRecord,
    MemberState,
    RegexRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicPartitions,
)
from odradek.coordinator.group import Protocol
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    encode_group_metadata_value,
    encode_key,
)
from odradek.protocol import codec
from odradek.protocol.messages import (
    consumer_group_current_member_assignment_key as current_key,
)
from odradek.protocol.messages import (
    consumer_group_current_member_assignment_value as current_value,
)
from odradek.protocol.messages import consumer_group_member_metadata_key as member_key
from odradek.protocol.messages import consumer_group_member_metadata_value as member_value
from odradek.protocol.messages import consumer_group_metadata_key as metadata_key
from odradek.protocol.messages import consumer_group_metadata_value as metadata_value
from odradek.protocol.messages import consumer_group_partition_metadata_key as partition_metadata_key
from odradek.protocol.messages import consumer_group_regular_expression_key as regex_key
from odradek.protocol.messages import consumer_group_regular_expression_value as regex_value
from odradek.protocol.messages import (
    consumer_group_target_assignment_member_key as target_member_key,
)
from odradek.protocol.messages import (
    consumer_group_target_assignment_member_value as target_member_value,
)
from odradek.protocol.messages import (
    consumer_group_target_assignment_metadata_key as target_metadata_key,
)
from odradek.protocol.messages import (
    consumer_group_target_assignment_metadata_value as target_metadata_value,
)
from odradek.protocol.primitives import ProtocolDecodeError

_VERSION = 0

RECORD_TYPES = frozenset(
    {
        metadata_key.RECORD_TYPE,
        partition_metadata_key.RECORD_TYPE,
        member_key.RECORD_TYPE,
        target_metadata_key.RECORD_TYPE,
        target_member_key.RECORD_TYPE,
        current_key.RECORD_TYPE,
        regex_key.RECORD_TYPE,
    }
)


class ConsumerRecordError(ValueError):
    """An undecodable consumer group record."""


def _key(module: Any, key: object) -> bytes:
    return module.RECORD_TYPE.to_bytes(2, "big", signed=True) + codec.encode_message(
        module.SPEC, _VERSION, key
    )


def _value(module: Any, value: object) -> bytes:
    return _VERSION.to_bytes(2, "big", signed=True) + codec.encode_message(module.SPEC, _VERSION, value)


def _topic_partitions(cls: Any, partitions: TopicPartitions) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(partitions.items()) if p]


def encode(record: CgRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a record; value None for a tombstone."""
    match record:
        case GroupEpochRecord(group_id, epoch, metadata_hash):
            key = _key(metadata_key, metadata_key.ConsumerGroupMetadataKey(group_id))
            if epoch is None:
                return key, None
            return key, _value(
                metadata_value, metadata_value.ConsumerGroupMetadataValue(epoch, metadata_hash)
            )
        case MemberMetadataRecord(group_id, member_id, member):
            key = _key(member_key, member_key.ConsumerGroupMemberMetadataKey(group_id, member_id))
            if member is None:
                return key, None
            return key, _value(
                member_value,
                member_value.ConsumerGroupMemberMetadataValue(
                    instance_id=member.instance_id,
                    rack_id=member.rack_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    subscribed_topic_names=list(member.subscribed_topic_names),
                    subscribed_topic_regex=member.subscribed_topic_regex,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    server_assignor=member.server_assignor,
                    classic_member_metadata=_classic_metadata(member.classic),
                ),
            )
        case TargetMemberRecord(group_id, member_id, partitions):
            key = _key(
                target_member_key,
                target_member_key.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
            )
            if partitions is None:
                return key, None
            target_cls = target_member_value.ConsumerGroupTargetAssignmentMemberValue
            return key, _value(
                target_member_value, target_cls(_topic_partitions(target_cls.TopicPartition, partitions))
            )
        case TargetEpochRecord(group_id, epoch, timestamp_ms):
            key = _key(
                target_metadata_key, target_metadata_key.ConsumerGroupTargetAssignmentMetadataKey(group_id)
            )
            if epoch is None:
                return key, None
            epoch_value = target_metadata_value.ConsumerGroupTargetAssignmentMetadataValue(
                epoch, timestamp_ms
            )
            return key, _value(target_metadata_value, epoch_value)
        case CurrentAssignmentRecord(group_id, member_id, member):
            key = _key(current_key, current_key.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id))
            if member is None:
                return key, None
            cls = current_value.ConsumerGroupCurrentMemberAssignmentValue
            return key, _value(
                current_value,
                cls(
                    member_epoch=member.member_epoch,
                    previous_member_epoch=member.previous_member_epoch,
                    state=int(member.state),
                    assigned_partitions=_topic_partitions(cls.TopicPartitions, member.assigned),
                    partitions_pending_revocation=_topic_partitions(
                        cls.TopicPartitions, member.pending_revocation
                    ),
                ),
            )
        case RegexRecord(group_id, regex, topics, timestamp_ms):
            key = _key(regex_key, regex_key.ConsumerGroupRegularExpressionKey(group_id, regex))
            if topics is None:
                return key, None
            matched = regex_value.ConsumerGroupRegularExpressionValue(sorted(topics), 0, timestamp_ms)
            return key, _value(regex_value, matched)
        case ClassicGroupRecord(group_id, group):
            key = encode_key(GroupMetadataKey(group_id))
            if group is None:
                return key, None
            metadata = classic.group_metadata_record(group)[1]
            assert isinstance(metadata, GroupMetadataValue)
            return key, encode_group_metadata_value(metadata)
    raise TypeError(f"not a consumer group record: {record!r}")


def _classic_metadata(
    metadata: ClassicMemberMetadata | None,
) -> member_value.ConsumerGroupMemberMetadataValue.ClassicMemberMetadata | None:
    if metadata is None:
        return None
    cls = member_value.ConsumerGroupMemberMetadataValue
    protocols = [cls.ClassicProtocol(p.name, p.metadata) for p in metadata.protocols]
    return cls.ClassicMemberMetadata(metadata.session_timeout_ms, protocols)


def _classic_member(value: Any) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    protocols = tuple(Protocol(p.name, bytes(p.metadata)) for p in value.supported_protocols)
    return ClassicMemberMetadata(value.session_timeout_ms, protocols)


def record_type(key: bytes | memoryview) -> int:
    """The record type of a `__consumer_offsets` key (its leading int16)."""
    return int.from_bytes(bytes(key[:2]), "big", signed=True) if len(key) >= 2 else -1


@dataclass(slots=True)
class _GroupRecords:
    epoch: int | None = None
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, Any] = field(default_factory=dict)  # member id -> member metadata value
    current: dict[str, Any] = field(default_factory=dict)  # member id -> current assignment value
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    regexes: dict[str, frozenset[str]] = field(default_factory=dict)


class ConsumerGroupReplay:
    """The consumer group records of one partition in log order; `groups()` builds the result."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupRecords] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        try:
            self._apply(record_type(key), memoryview(key)[2:], value)
        except (ProtocolDecodeError, ValueError) as exc:
            raise ConsumerRecordError(f"malformed consumer group record: {exc}") from None

    def _apply(self, kind: int, key: memoryview, value: bytes | None) -> None:
        def decode_value(module: Any) -> Any:
            assert value is not None
            return codec.decode_message(module.SPEC, _VERSION, memoryview(value)[2:])

        if kind == partition_metadata_key.RECORD_TYPE:
            return  # Kafka 3.x's subscription metadata: odradek recomputes it
        if kind == metadata_key.RECORD_TYPE:
            group_id = codec.decode_message(metadata_key.SPEC, _VERSION, key).group_id
            if value is None:
                self._groups.pop(group_id, None)
                return
            decoded = decode_value(metadata_value)
            state = self._groups.setdefault(group_id, _GroupRecords())
            state.epoch, state.metadata_hash = decoded.epoch, decoded.metadata_hash
            return
        if kind == target_metadata_key.RECORD_TYPE:
            group_id = codec.decode_message(target_metadata_key.SPEC, _VERSION, key).group_id
            state = self._groups.setdefault(group_id, _GroupRecords())
            state.assignment_epoch = (
                0 if value is None else decode_value(target_metadata_value).assignment_epoch
            )
            return
        if kind == regex_key.RECORD_TYPE:
            decoded_key = codec.decode_message(regex_key.SPEC, _VERSION, key)
            state = self._groups.setdefault(decoded_key.group_id, _GroupRecords())
            if value is None:
                state.regexes.pop(decoded_key.regular_expression, None)
            else:
                state.regexes[decoded_key.regular_expression] = frozenset(decode_value(regex_value).topics)
            return
        modules = {
            member_key.RECORD_TYPE: (member_key, member_value, "members"),
            target_member_key.RECORD_TYPE: (target_member_key, target_member_value, "target"),
            current_key.RECORD_TYPE: (current_key, current_value, "current"),
        }
        if kind not in modules:
            raise ValueError(f"record type {kind} is not a consumer group record")
        key_module, value_module, attribute = modules[kind]
        decoded_key = codec.decode_message(key_module.SPEC, _VERSION, key)
        state = self._groups.setdefault(decoded_key.group_id, _GroupRecords())
        held: dict[str, Any] = getattr(state, attribute)
        if value is None:
            held.pop(decoded_key.member_id, None)
        elif kind == target_member_key.RECORD_TYPE:
            held[decoded_key.member_id] = _partitions(decode_value(value_module).topic_partitions)
        else:
            held[decoded_key.member_id] = decode_value(value_module)

    def groups(self) -> dict[str, ConsumerGroup]:
        """The groups whose metadata record stands (deadlines unset: the shard gives fresh ones)."""
        return {
            group_id: _group(group_id, records)
            for group_id, records in self._groups.items()
            if records.epoch is not None
        }


def _partitions(topic_partitions: list[Any]) -> dict[uuid.UUID, frozenset[int]]:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def _group(group_id: str, records: _GroupRecords) -> ConsumerGroup:
    members: dict[str, ConsumerMember] = {}
    for member_id, metadata in records.members.items():
        current = records.current.get(member_id)
        try:
            state = MemberState(current.state) if current is not None else MemberState.STABLE
        except ValueError:
            state = MemberState.UNKNOWN
        members[member_id] = ConsumerMember(
            member_id=member_id,
            instance_id=metadata.instance_id,
            rack_id=metadata.rack_id,
            client_id=metadata.client_id,
            client_host=metadata.client_host,
            subscribed_topic_names=tuple(metadata.subscribed_topic_names),
            subscribed_topic_regex=metadata.subscribed_topic_regex or None,
            rebalance_timeout_ms=metadata.rebalance_timeout_ms,
            server_assignor=metadata.server_assignor,
            member_epoch=current.member_epoch if current is not None else 0,
            previous_member_epoch=current.previous_member_epoch if current is not None else 0,
            state=state,
            assigned=_partitions(current.assigned_partitions) if current is not None else {},
            pending_revocation=_partitions(current.partitions_pending_revocation)
            if current is not None
            else {},
            classic=_classic_member(metadata.classic_member_metadata),
        )
    statics = {m.instance_id: m.member_id for m in members.values() if m.instance_id is not None}
    target: Mapping[str, TopicPartitions] = {m: p for m, p in records.target.items() if m in members}
    assert records.epoch is not None
    return ConsumerGroup(
        group_id,
        group_epoch=records.epoch,
        assignment_epoch=records.assignment_epoch,
        metadata_hash=records.metadata_hash,
        members=members,
        static_members=statics,
        target=dict(target),
        regexes=dict(records.regexes),
    )
