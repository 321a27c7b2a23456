"""The key and value formats of records in `__consumer_offsets`.

Owns the byte layout of the compacted internal topic, Kafka's own (so a log written by either
system replays in the other). Every key and value starts with an int16 version:

- key version 0 or 1, `OffsetCommitKey`: group (string), topic (string), partition (int32).
- key version 2, `GroupMetadataKey`: group (string).
- `OffsetCommitValue` v0-v4: offset (int64), leader epoch (int32, v3+), metadata (string), commit
  timestamp (int64), expire timestamp (int64, v1 only); v4 is flexible (compact strings, tagged fields).
- `GroupMetadataValue` v0-v4: protocol type, generation, protocol (nullable), leader (nullable),
  current state timestamp (int64, v2+), members; a member is member id, group instance id
  (nullable, v3+), client id, client host, rebalance timeout (int32, v1+), session timeout,
  subscription (bytes), assignment (bytes); v4 is flexible.

A deletion is a tombstone: the key with a null value. Keys of other versions (records of the
consumer-group protocol of KIP-848, which odradek does not implement) decode to None and are skipped.

Written: `OffsetCommitValue` v3 (v1 when the commit carries an explicit expire timestamp, the only
version able to hold it) and `GroupMetadataValue` v3, as Kafka 3.x writes them.
Callers: the coordinator shard (writes, and replay on load) and tests. Pure: bytes in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.primitives import ProtocolDecodeError, Reader, Writer

OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
_GROUP_METADATA_KEY_VERSION = 2
_FIRST_FLEXIBLE_VERSION = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


CoordinatorKey = OffsetCommitKey | GroupMetadataKey


class RecordFormatError(ValueError):
    """A key or value in `__consumer_offsets` is malformed or of an unknown version."""


# ---------------------------------------------------------------------------------------------
# keys


def encode_key(key: CoordinatorKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(1)
        w.nullable_string(key.group)
        w.nullable_string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(_GROUP_METADATA_KEY_VERSION)
        w.nullable_string(key.group)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> CoordinatorKey | None:
    """The key, or None for record types odradek does not keep (other key versions)."""
    r = Reader(data)
    try:
        version = r.int16()
        if version in (0, 1):
            return OffsetCommitKey(r.string(), r.string(), r.int32())
        if version == _GROUP_METADATA_KEY_VERSION:
            return GroupMetadataKey(r.string())
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"malformed __consumer_offsets key: {exc}") from None
    return None


# ---------------------------------------------------------------------------------------------
# values


class _Fields:
    """Reads or writes strings and bytes in the flexible or classic encoding of one version."""

    def __init__(self, version: int) -> None:
        self.flexible = version >= _FIRST_FLEXIBLE_VERSION

    def read_string(self, r: Reader) -> str:
        return r.compact_string() if self.flexible else r.string()

    def read_nullable_string(self, r: Reader) -> str | None:
        return r.compact_nullable_string() if self.flexible else r.nullable_string()

    def read_bytes(self, r: Reader) -> bytes:
        return r.compact_bytes() if self.flexible else r.bytes()

    def read_array_length(self, r: Reader) -> int:
        count = r.compact_array_length() if self.flexible else r.array_length()
        if count < 0:
            raise RecordFormatError("null array in __consumer_offsets value")
        return count

    def skip_tagged_fields(self, r: Reader) -> None:
        if self.flexible:
            r.tagged_fields()

    def write_string(self, w: Writer, value: str | None) -> None:
        if self.flexible:
            w.compact_nullable_string(value)
        else:
            w.nullable_string(value)

    def write_bytes(self, w: Writer, value: bytes) -> None:
        if self.flexible:
            w.compact_nullable_bytes(value)
        else:
            w.nullable_bytes(value)

    def write_array_length(self, w: Writer, count: int) -> None:
        if self.flexible:
            w.compact_array_length(count)
        else:
            w.array_length(count)

    def write_tagged_fields(self, w: Writer) -> None:
        if self.flexible:
            w.tagged_fields({})


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v3, or v1 when the value carries an expire timestamp."""
    w = Writer()
    if value.expire_timestamp != -1:
        w.int16(OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION)
        w.int64(value.offset)
        w.nullable_string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
        return w.getvalue()
    return _encode_offset_commit_value_at(value, OFFSET_COMMIT_VALUE_VERSION)


def _encode_offset_commit_value_at(value: OffsetCommitValue, version: int) -> bytes:
    """v2+ layouts (without expire timestamp); tests use it to write v4."""
    f = _Fields(version)
    w = Writer()
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    f.write_string(w, value.metadata)
    w.int64(value.commit_timestamp)
    f.write_tagged_fields(w)
    return w.getvalue()


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    r = Reader(data)
    try:
        version = r.int16()
        if not 0 <= version <= 4:
            raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
        f = _Fields(version)
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = f.read_string(r)
        commit_timestamp = r.int64()
        expire_timestamp = r.int64() if version == 1 else -1
        f.skip_tagged_fields(r)
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"malformed OffsetCommitValue: {exc}") from None
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    f = _Fields(version)
    w = Writer()
    w.int16(version)
    f.write_string(w, value.protocol_type)
    w.int32(value.generation)
    f.write_string(w, value.protocol)
    f.write_string(w, value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    f.write_array_length(w, len(value.members))
    for member in value.members:
        _encode_member(w, f, member, version)
    f.write_tagged_fields(w)
    return w.getvalue()


def _encode_member(w: Writer, f: _Fields, member: MemberMetadataValue, version: int) -> None:
    f.write_string(w, member.member_id)
    if version >= 3:
        f.write_string(w, member.group_instance_id)
    f.write_string(w, member.client_id)
    f.write_string(w, member.client_host)
    if version >= 1:
        w.int32(member.rebalance_timeout)
    w.int32(member.session_timeout)
    f.write_bytes(w, member.subscription)
    f.write_bytes(w, member.assignment)
    f.write_tagged_fields(w)


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    r = Reader(data)
    try:
        version = r.int16()
        if not 0 <= version <= 4:
            raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
        f = _Fields(version)
        protocol_type = f.read_string(r)
        generation = r.int32()
        protocol = f.read_nullable_string(r)
        leader = f.read_nullable_string(r)
        state_timestamp = r.int64() if version >= 2 else -1
        members = tuple(_decode_member(r, f, version) for _ in range(f.read_array_length(r)))
        f.skip_tagged_fields(r)
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"malformed GroupMetadataValue: {exc}") from None
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, members)


def _decode_member(r: Reader, f: _Fields, version: int) -> MemberMetadataValue:
    member_id = f.read_string(r)
    instance_id = f.read_nullable_string(r) if version >= 3 else None
    client_id = f.read_string(r)
    client_host = f.read_string(r)
    session_timeout_or_rebalance = r.int32()
    if version >= 1:
        rebalance_timeout, session_timeout = session_timeout_or_rebalance, r.int32()
    else:
        rebalance_timeout = session_timeout = session_timeout_or_rebalance
    subscription = f.read_bytes(r)
    assignment = f.read_bytes(r)
    f.skip_tagged_fields(r)
    return MemberMetadataValue(
        member_id,
        instance_id,
        client_id,
        client_host,
        rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )
