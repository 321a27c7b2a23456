from __future__ import annotations

from odradek.coordinator.group import GroupState, Now, TopicPartition
from odradek.coordinator.loader import GroupLoader
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from odradek.protocol.records.record import iter_batch_records

NOW = Now(1_000_000, 5_000)


def offset(group: str, partition: int, value: int | None) -> tuple[bytes, bytes | None]:
    key = encode_key(OffsetCommitKey(group, "t", partition))
    if value is None:
        return key, None
    return key, encode_offset_commit_value(OffsetCommitValue(value, -1, "", 10))


def metadata(group: str, members: tuple[MemberMetadataValue, ...] = ()) -> tuple[bytes, bytes]:
    value = GroupMetadataValue(
        "consumer", 4, "range" if members else None, "m1" if members else None, 77, members
    )
    return encode_key(GroupMetadataKey(group)), encode_group_metadata_value(value)


def test_last_value_wins_and_tombstones_delete() -> None:
    loader = GroupLoader()
    loader.apply_all([offset("a", 0, 1), offset("a", 0, 2), offset("a", 1, 5), offset("a", 1, None)])
    groups = loader.groups(NOW)
    assert set(groups["a"].offsets) == {TopicPartition("t", 0)}
    assert groups["a"].offsets[TopicPartition("t", 0)].offset == 2
    assert groups["a"].protocol_type is None and groups["a"].state is GroupState.EMPTY


def test_group_with_members_loads_stable_with_fresh_sessions() -> None:
    member = MemberMetadataValue("m1", "i1", "c", "/h", 30_000, 10_000, b"sub", b"asg")
    loader = GroupLoader()
    loader.apply_all([metadata("g", (member,)), offset("g", 0, 9)])
    group = loader.groups(NOW)["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 4 and group.leader_id == "m1"
    assert group.static_members == {"i1": "m1"}
    loaded = group.members["m1"]
    assert loaded.assignment == b"asg" and loaded.protocol_metadata("range") == b"sub"
    assert loaded.session_deadline_ms == NOW.monotonic_ms + 10_000
    assert group.state_timestamp_ms == 77 and group.offsets[TopicPartition("t", 0)].offset == 9


def test_group_tombstone_removes_metadata_but_not_offsets() -> None:
    loader = GroupLoader()
    loader.apply_all([metadata("g"), offset("g", 0, 3), (encode_key(GroupMetadataKey("g")), None)])
    group = loader.groups(NOW)["g"]
    assert group.protocol_type is None and group.offsets[TopicPartition("t", 0)].offset == 3
    loader.apply_all([metadata("h"), (encode_key(GroupMetadataKey("h")), None)])
    assert "h" not in loader.groups(NOW)


def test_bad_records_are_skipped() -> None:
    loader = GroupLoader()
    loader.apply_all(
        [
            (b"\x00", b"x"),
            (None, b"y"),
            (encode_key(OffsetCommitKey("g", "t", 0)), b"\x00\x09"),
            offset("g", 1, 4),
        ]
    )
    assert loader.skipped == 3
    assert set(loader.groups(NOW)["g"].offsets) == {TopicPartition("t", 1)}


def _batches(*batches: bytes) -> list:
    return list(iter_batch_records(b"".join(batches)))


def test_transactional_offsets_wait_for_their_marker() -> None:
    def txn(producer_id: int, sequence: int, *records: tuple[bytes, bytes | None]) -> bytes:
        simple = [SimpleRecord(value, key, timestamp=1) for key, value in records]
        return build_batch(
            simple, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
        )

    def marker(producer_id: int, commit: bool) -> bytes:
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        return build_end_txn_marker(producer_id, 0, EndTransactionMarker(kind, 0), 1)

    loader = GroupLoader()
    for header, records in _batches(
        txn(1, 0, offset("g", 0, 5)),
        txn(2, 0, offset("g", 1, 6)),
        txn(3, 0, offset("g", 2, 7), offset("g", 3, 8)),
        marker(1, True),
        marker(2, False),
    ):
        loader.apply_batch(header, records)
    offsets = loader.groups(NOW)["g"].offsets
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5}
    pending = loader.pending_txn_offsets
    assert {tp.partition: o.offset for tp, o in pending[3]["g"].items()} == {2: 7, 3: 8}
    assert set(pending) == {3}
    assert loader.txn_sequences[3] == (0, 2)
