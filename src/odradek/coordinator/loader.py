"""Replaying a `__consumer_offsets` partition into groups.

Owns the meaning of the log on load: records are applied in offset order, the last value of a key
wins and a tombstone (null value) deletes it. A group metadata record gives a group its protocol,
generation, leader and members (loaded Empty when it has none, else Stable, each member with a
fresh session timeout from the load instant, as Kafka does); offsets whose group has no metadata
record form a group without protocol type (a group that only commits offsets). Keys of record types
odradek does not keep are skipped; an undecodable record is skipped and counted, never fatal.
Transactional batches (TxnOffsetCommit) wait for their producer's marker: a COMMIT applies their
records at the marker's place, an ABORT drops them; those of a transaction still open at the end
of the log are handed to the shard as pending, with the sequence the shard continues from.

Callers: the coordinator shard while it loads its partition, and tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from odradek.coordinator.consumer_records import (
    RECORD_TYPES as CONSUMER_GROUP_RECORD_TYPES,
)
from odradek.coordinator.consumer_records import (
    ConsumerGroupReplay,
    ConsumerRecordError,
    record_type,
)
from odradek.coordinator.group import (
    CommittedOffset,
    Group,
    GroupState,
    Member,
    Now,
    Protocol,
    TopicPartition,
)
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.coordinator.share_group_records import RECORD_TYPES as SHARE_GROUP_RECORD_TYPES
from odradek.coordinator.share_group_records import ShareGroupReplay
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.control import CONTROL_KEY, ControlRecordType
from odradek.protocol.records.record import Record

log = logging.getLogger(__name__)


PendingTxnOffsets = dict[int, dict[str, dict[TopicPartition, CommittedOffset]]]
RawRecord = tuple[bytes | None, bytes | None]


class GroupLoader:
    """Accumulates one partition's records in log order; `groups(now)` builds the result."""

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._metadata: dict[str, GroupMetadataValue] = {}
        self._open_txns: dict[int, list[RawRecord]] = {}
        self.txn_sequences: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, next sequence)
        self.skipped = 0
        self.consumer_groups = ConsumerGroupReplay()  # the KIP-848 groups' records
        self.share_groups = ShareGroupReplay()  # the KIP-932 share groups' records

    def apply_batch(self, header: BatchHeader, records: list[Record]) -> None:
        if header.is_control:
            self._end_txn(header.producer_id, records)
        elif header.is_transactional:
            self._open_txns.setdefault(header.producer_id, []).extend((r.key, r.value) for r in records)
            self.txn_sequences[header.producer_id] = (
                header.producer_epoch,
                header.base_sequence + len(records),
            )
        else:
            self.apply_all((r.key, r.value) for r in records)

    def _end_txn(self, producer_id: int, records: list[Record]) -> None:
        pending = self._open_txns.pop(producer_id, [])
        key = records[0].key if records else None
        if key is not None and len(key) >= CONTROL_KEY.size:
            if CONTROL_KEY.unpack_from(key)[1] == ControlRecordType.COMMIT:
                self.apply_all(pending)

    @property
    def pending_txn_offsets(self) -> PendingTxnOffsets:
        """The offsets of the transactions still open at the end of the log."""
        loaded: PendingTxnOffsets = {}
        for producer_id, records in self._open_txns.items():
            replay = GroupLoader()
            replay.apply_all(records)
            loaded[producer_id] = {group: dict(offsets) for group, offsets in replay._offsets.items()}
        return loaded

    def apply_all(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        for key, value in records:
            self.apply(key, value)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            self.skipped += 1
            return
        try:
            kind = record_type(key)
            if kind in CONSUMER_GROUP_RECORD_TYPES:
                self.consumer_groups.apply(key, value)
            elif kind in SHARE_GROUP_RECORD_TYPES:
                self.share_groups.apply(key, value)
            else:
                self._apply(key, value)
        except (RecordFormatError, ConsumerRecordError) as exc:
            self.skipped += 1
            log.warning("Skipping an undecodable __consumer_offsets record: %s", exc)

    def _apply(self, key_bytes: bytes, value: bytes | None) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            offsets = self._offsets.setdefault(key.group, {})
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                offsets.pop(tp, None)
                return
            decoded = decode_offset_commit_value(value)
            expire = decoded.expire_timestamp if decoded.expire_timestamp != -1 else None
            offsets[tp] = CommittedOffset(
                decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp, expire
            )
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self._metadata.pop(key.group, None)
            else:
                self._metadata[key.group] = decode_group_metadata_value(value)

    def groups(self, now: Now) -> dict[str, Group]:
        groups = {group_id: _group_from(group_id, value, now) for group_id, value in self._metadata.items()}
        for group_id, offsets in self._offsets.items():
            if not offsets:
                continue
            group = groups.get(group_id) or Group(group_id)
            groups[group_id] = replace(group, offsets=dict(offsets))
        return groups


def _group_from(group_id: str, value: GroupMetadataValue, now: Now) -> Group:
    members = {
        m.member_id: Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=value.protocol_type,
            protocols=(Protocol(value.protocol or "", m.subscription),),
            assignment=m.assignment,
            session_deadline_ms=now.monotonic_ms + m.session_timeout,
        )
        for m in value.members
    }
    return Group(
        group_id=group_id,
        state=GroupState.STABLE if members else GroupState.EMPTY,
        state_timestamp_ms=value.current_state_timestamp if value.current_state_timestamp >= 0 else None,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader if members else None,
        members=members,
        static_members={m.group_instance_id: m.member_id for m in value.members if m.group_instance_id},
    )
