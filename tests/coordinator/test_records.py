from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    _encode_offset_commit_value_at,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_layout() -> None:
    key = OffsetCommitKey("g", "topic", 7)
    assert encode_key(key) == struct.pack(">h", 1) + _string("g") + _string("topic") + struct.pack(">i", 7)
    assert decode_key(encode_key(key)) == key


def test_offset_commit_key_version_0_is_read() -> None:
    data = struct.pack(">h", 0) + _string("g") + _string("t") + struct.pack(">i", 3)
    assert decode_key(data) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_key_layout() -> None:
    assert encode_key(GroupMetadataKey("grp")) == struct.pack(">h", 2) + _string("grp")
    assert decode_key(encode_key(GroupMetadataKey("grp"))) == GroupMetadataKey("grp")


def test_other_key_versions_are_skipped() -> None:
    # Version 3+ keys belong to the KIP-848 consumer-group records.
    assert decode_key(struct.pack(">h", 3) + _string("grp")) is None


def test_truncated_key_is_an_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 1) + _string("g"))


def test_offset_commit_value_v3_layout() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expected = struct.pack(">hqi", 3, 42, 5) + _string("m") + struct.pack(">q", 1000)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_offset_commit_value_with_expiry_is_written_as_v1() -> None:
    value = OffsetCommitValue(
        offset=42, leader_epoch=-1, metadata="", commit_timestamp=1000, expire_timestamp=9000
    )
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hq", 1, 42) + _string("") + struct.pack(">qq", 1000, 9000)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_v4_flexible() -> None:
    # compact string "ab" (length+1 = 3), then an empty tagged-field section
    data = struct.pack(">hqi", 4, 9, 2) + bytes([3]) + b"ab" + struct.pack(">q", 77) + bytes([0])
    assert decode_offset_commit_value(data) == OffsetCommitValue(9, 2, "ab", 77)
    value = OffsetCommitValue(9, 2, "ab", 77)
    assert _encode_offset_commit_value_at(value, 4) == data


def test_offset_commit_value_v0() -> None:
    data = struct.pack(">hq", 0, 5) + _string("x") + struct.pack(">q", 11)
    assert decode_offset_commit_value(data) == OffsetCommitValue(5, -1, "x", 11)


def test_unknown_value_version_is_an_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(struct.pack(">hq", 9, 5))


def _member(i: int, instance: str | None = None) -> MemberMetadataValue:
    return MemberMetadataValue(f"m{i}", instance, f"c{i}", "/127.0.0.1", 30000, 10000, b"sub", b"asg")


def test_group_metadata_value_v3_layout() -> None:
    value = GroupMetadataValue("consumer", 3, "range", "m1", 123, (_member(1, "i1"),))
    expected = (
        struct.pack(">h", 3)
        + _string("consumer")
        + struct.pack(">i", 3)
        + _string("range")
        + _string("m1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + _string("m1")
        + _string("i1")
        + _string("c1")
        + _string("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_group_metadata_value_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    data = (
        struct.pack(">h", 0)
        + _string("consumer")
        + struct.pack(">i", 1)
        + struct.pack(">h", -1)  # null protocol
        + struct.pack(">h", -1)  # null leader
        + struct.pack(">i", 1)
        + _string("m")
        + _string("c")
        + _string("h")
        + struct.pack(">i", 5000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    value = decode_group_metadata_value(data)
    assert value.protocol is None and value.leader is None and value.current_state_timestamp == -1
    assert value.members == (MemberMetadataValue("m", None, "c", "h", 5000, 5000, b"", b""),)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_group_metadata_value_versions_round_trip(version: int) -> None:
    value = GroupMetadataValue("consumer", 7, "roundrobin", "m0", 55, (_member(0), _member(1)))
    decoded = decode_group_metadata_value(encode_group_metadata_value(value, version))
    assert decoded.members == value.members
    assert decoded.generation == 7 and decoded.protocol == "roundrobin"
    assert decoded.current_state_timestamp == (55 if version >= 2 else -1)


_text = st.text(max_size=20)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)


@given(st.builds(OffsetCommitKey, _text, _text, _int32) | st.builds(GroupMetadataKey, _text))
def test_keys_round_trip(key: OffsetCommitKey | GroupMetadataKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(st.builds(OffsetCommitValue, _int64, _int32, _text, _int64, st.just(-1) | st.integers(0, 2**62)))
def test_offset_commit_values_round_trip(value: OffsetCommitValue) -> None:
    decoded = decode_offset_commit_value(encode_offset_commit_value(value))
    if value.expire_timestamp != -1:
        value = OffsetCommitValue(
            value.offset, -1, value.metadata, value.commit_timestamp, value.expire_timestamp
        )
    assert decoded == value


_members = st.lists(
    st.builds(
        MemberMetadataValue, _text, st.none() | _text, _text, _text, _int32, _int32, st.binary(), st.binary()
    ),
    max_size=4,
).map(tuple)


@given(st.builds(GroupMetadataValue, _text, _int32, st.none() | _text, st.none() | _text, _int64, _members))
def test_group_metadata_values_round_trip(value: GroupMetadataValue) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value
    assert decode_group_metadata_value(encode_group_metadata_value(value, 4)) == value
