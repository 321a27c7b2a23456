"""The log cleaner (storage.cleaner): dedupe, tombstones, compaction lag, offset map bound, swap and
crash recovery, indexes, producer state, compression, and the LogManager hook."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records.batch import BatchHeader, iter_batches
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.record import Record, decode_records
from odradek.storage.checkpoint import read_checkpoint
from odradek.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_HORIZON_MASK,
    CleanerConfig,
    LogCleaner,
)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from tests.storage.storage_helpers import slice_bytes

SEGMENT_BYTES = 400


def compacted_log(path: Path, clock: ManualClock, **config: int | float | str) -> Log:
    settings: dict[str, int | float | str] = {"cleanup_policy": "compact", "segment_bytes": SEGMENT_BYTES}
    settings.update(config)
    return Log(path / "topic-0", LogConfig(**settings), clock)  # type: ignore[arg-type]


def put(log: Log, clock: ManualClock, key: bytes, value: bytes | None, **producer: int) -> int:
    batch = build_batch([SimpleRecord(value, key, (), clock.time_ms())], **producer)
    return log.append_as_leader(batch, 0).first_offset


def cleaner_for(log: Log, **config: int | float) -> LogCleaner:
    return LogCleaner([log.dir.parent], lambda: [log], CleanerConfig(**config))  # type: ignore[arg-type]


def all_batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    out = []
    for segment in log.segments:
        with segment.opened() as fd:
            data = os.pread(fd, segment.size, 0)
        out += [(header, data[p : p + header.size_in_bytes]) for p, header in iter_batches(data)]
    return out


def all_records(log: Log) -> list[Record]:
    return [record for _, data in all_batches(log) for record in decode_records(data)]


def latest_values(records: list[Record]) -> dict[bytes | None, bytes | None]:
    return {record.key: record.value for record in records}


def write_updates(log: Log, clock: ManualClock, rounds: int, keys: int = 3) -> dict[bytes, int]:
    """`rounds` updates of each key; returns each key's last offset."""
    last: dict[bytes, int] = {}
    for round_ in range(rounds):
        for index in range(keys):
            key = b"key-%d" % index
            last[key] = put(log, clock, key, b"value-%d-%d" % (index, round_))
            clock.advance(1)
    return last


def test_dedupe_keeps_latest_value_per_key_at_its_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    write_updates(log, clock, rounds=20)
    before = all_records(log)
    active_base = log.active_segment.base_offset
    assert len(log.segments) > 5

    assert cleaner_for(log).clean_logs(clock.time_ms()) == 1

    after = all_records(log)
    cleaned = [record for record in after if record.offset < active_base]
    assert len({record.key for record in cleaned}) == len(cleaned)
    superseded = {r.key for r in before if r.offset >= active_base}
    for record in cleaned:
        last_below = max(r.offset for r in before if r.key == record.key and r.offset < active_base)
        assert record.offset == last_below
        assert record.key not in superseded or record.offset == last_below
    assert [r for r in after if r.offset >= active_base] == [r for r in before if r.offset >= active_base]
    assert latest_values(after) == latest_values(before)
    assert log.log_end_offset == before[-1].offset + 1


def test_small_cleaned_segments_merge_up_to_segment_bytes(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.0)
    write_updates(log, clock, rounds=20)
    cleaner = cleaner_for(log)
    cleaner.clean_logs(clock.time_ms())
    segments = len(log.segments)
    write_updates(log, clock, rounds=1)
    log.roll()

    cleaner.clean_logs(clock.time_ms())
    assert len(log.segments) < segments / 2
    assert all(segment.size <= SEGMENT_BYTES for segment in log.segments)
    cleaned = [r for r in all_records(log) if r.offset < log.active_segment.base_offset]
    assert len({r.key for r in cleaned}) == len(cleaned) == 3


def test_fetch_from_a_compacted_away_offset_returns_the_next_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    write_updates(log, clock, rounds=20)
    cleaner_for(log).clean_logs(clock.time_ms())
    kept = [record.offset for record in all_records(log)]
    gaps = [offset for offset in range(kept[-1]) if offset not in kept]
    assert gaps

    for offset in gaps:
        records = decode_records(slice_bytes(log.read(offset, 1 << 20)))
        assert records[0].offset == min(o for o in kept if o > offset)

    offset, seen = 0, []
    while offset < log.log_end_offset:
        data = slice_bytes(log.read(offset, 100))
        headers = [header for _, header in iter_batches(data)]
        seen += [record.offset for record in decode_records(data)]
        offset = headers[-1].next_offset
    assert seen == kept


def test_tombstones_stay_for_delete_retention_ms_then_go(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, delete_retention_ms=10_000)
    write_updates(log, clock, rounds=5)
    tombstone = put(log, clock, b"key-1", None)
    write_updates(log, clock, rounds=1, keys=1)
    write_updates(log, clock, rounds=10, keys=1)
    cleaner = cleaner_for(log, backoff_ms=1)

    cleaner.clean_logs(clock.time_ms())
    records = all_records(log)
    assert [r.offset for r in records if r.key == b"key-1"] == [tombstone]
    header = next(h for h, _ in all_batches(log) if h.base_offset == tombstone)
    assert header.attributes & DELETE_HORIZON_MASK
    assert header.base_timestamp == clock.time_ms() + 10_000
    assert next(r for r in records if r.key == b"key-1").timestamp < clock.time_ms()

    clock.advance(9_999)
    cleaner.clean_logs(clock.time_ms())
    assert [r.offset for r in all_records(log) if r.key == b"key-1"] == [tombstone]

    clock.advance(1)
    assert cleaner.clean_logs(clock.time_ms()) == 1
    assert [r for r in all_records(log) if r.key == b"key-1"] == []
    assert {r.key for r in all_records(log)} == {b"key-0", b"key-2"}


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, min_compaction_lag_ms=60_000)
    write_updates(log, clock, rounds=20)
    cleaner = cleaner_for(log)
    before = all_records(log)

    assert cleaner.clean_logs(clock.time_ms()) == 0
    assert all_records(log) == before

    clock.advance(60_000)
    assert cleaner.clean_logs(clock.time_ms()) == 1
    assert len(all_records(log)) < len(before)


def test_min_cleanable_dirty_ratio_and_checkpoint(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.9)
    write_updates(log, clock, rounds=20)
    cleaner = cleaner_for(log)
    assert cleaner.clean_logs(clock.time_ms()) == 1
    checkpoint = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint == {("topic", 0): log.active_segment.base_offset}

    write_updates(log, clock, rounds=3)
    assert cleaner.clean_logs(clock.time_ms()) == 0  # a little dirt on a clean log: below 0.9
    assert (
        LogCleaner([tmp_path], lambda: [log], CleanerConfig())
        .log_to_clean(log, clock.time_ms())
        .first_dirty_offset
        == checkpoint[("topic", 0)]
    )


def test_a_small_offset_map_cleans_in_several_passes(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.0)
    write_updates(log, clock, rounds=10, keys=60)
    before = latest_values(all_records(log))
    config = CleanerConfig(dedupe_buffer_size=40 * 24, io_buffer_load_factor=1.0)
    assert config.max_map_entries == 40
    cleaner = cleaner_for(log, dedupe_buffer_size=40 * 24, io_buffer_load_factor=1.0)
    to_clean = cleaner.log_to_clean(log, clock.time_ms())
    stats = cleaner.clean(to_clean, clock.time_ms())
    assert stats.map_entries <= 40
    assert stats.end_offset < to_clean.first_uncleanable_offset

    passes = 1
    while cleaner.clean_logs(clock.time_ms()):
        passes += 1
    assert passes > 2
    assert latest_values(all_records(log)) == before
    cleaned = [r for r in all_records(log) if r.offset < log.active_segment.base_offset]
    assert len({r.key for r in cleaned}) == len(cleaned)


def test_indexes_of_cleaned_segments_are_rebuilt(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=100)
    write_updates(log, clock, rounds=60, keys=40)
    cleaner_for(log).clean_logs(clock.time_ms())
    cleaned = max(log.segments[:-1], key=lambda segment: segment.size)
    assert len(cleaned.offset_index) > 2
    for relative, position in zip(cleaned.offset_index.keys, cleaned.offset_index.values, strict=True):
        with cleaned.opened() as fd:
            header = BatchHeader.unpack_from(os.pread(fd, 61, position))
        assert header.base_offset == cleaned.base_offset + relative
    assert cleaned.time_index.last_timestamp == cleaned.max_timestamp
    assert cleaned.offset_index.path.name == f"{cleaned.base_offset:020d}.index"
    assert len(cleaned.offset_index.path.read_bytes()) == 8 * len(cleaned.offset_index)
    log.close()

    reopened = Log(tmp_path / "topic-0", log.config, clock, clean_shutdown=True)
    first = next(s for s in reopened.segments if s.base_offset == cleaned.base_offset)
    assert list(first.offset_index.keys) == list(cleaned.offset_index.keys)
    assert list(first.time_index.keys) == list(cleaned.time_index.keys)
    records = all_records(reopened)
    for record in records[:50]:
        found = reopened.offset_for_timestamp(record.timestamp)
        assert found is not None and found.offset == record.offset


def clean_until_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> tuple[Log, ManualClock, list[Record]]:
    """A compacted log whose cleaning dies in `Log.<method>`; returns it, its clock and its records
    from before the cleaning."""
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    write_updates(log, clock, rounds=20)
    before = all_records(log)

    def crash(*args: object) -> None:
        raise SystemExit("crash")

    monkeypatch.setattr(Log, method, crash)
    with pytest.raises(SystemExit):
        cleaner_for(log).clean_logs(clock.time_ms())
    monkeypatch.undo()
    return log, clock, before


def test_crash_before_the_swap_keeps_the_old_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, clock, before = clean_until_crash(tmp_path, monkeypatch, "replace_segments")
    directory = tmp_path / "topic-0"
    assert (directory / "00000000000000000000.log.cleaned").exists()  # its indexes: none, it is empty
    reopened = Log(directory, log.config, clock)
    assert not list(directory.glob("*.cleaned"))
    assert all_records(reopened) == before


def test_crash_during_the_swap_is_finished_by_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, clock, before = clean_until_crash(tmp_path, monkeypatch, "_delete_segments")
    directory = tmp_path / "topic-0"
    assert list(directory.glob("*.log.swap"))

    reopened = Log(directory, log.config, clock)
    after = all_records(reopened)
    assert not list(directory.glob("*.swap"))
    assert len(after) < len(before)
    assert latest_values(after) == latest_values(before)
    offsets = [record.offset for record in after]
    assert offsets == sorted(set(offsets))


def test_idempotent_producer_keeps_its_last_batch_as_an_empty_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    for sequence in range(12):
        put(log, clock, b"key-0", b"v%d" % sequence, producer_id=7, producer_epoch=0, base_sequence=sequence)
    last_producer_offset = log.log_end_offset - 1
    write_updates(log, clock, rounds=20, keys=1)
    cleaner_for(log).clean_logs(clock.time_ms())

    producer_batches = [(h, d) for h, d in all_batches(log) if h.producer_id == 7]
    assert [h.base_sequence for h, _ in producer_batches] == [7, 8, 9, 10, 11]
    assert all(h.records_count == 0 for h, _ in producer_batches)
    assert producer_batches[-1][0].last_offset == last_producer_offset
    log.close()

    reopened = Log(tmp_path / "topic-0", log.config, clock)
    reopened.producer_state.load(reopened.segments, reopened.log_end_offset, clock.time_ms())
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 11


def test_compressed_batches_keep_their_codec(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, segment_bytes=600)
    for round_ in range(10):
        records = [
            SimpleRecord(b"v%d-%d" % (round_, i), b"k%d" % (i % 3 + round_ % 2), (), 5) for i in range(4)
        ]
        log.append_as_leader(build_batch(records, CompressionType.GZIP), 0)
    before = all_records(log)
    cleaner_for(log).clean_logs(clock.time_ms())
    headers = [header for header, _ in all_batches(log)]
    assert all(header.compression == CompressionType.GZIP for header in headers)
    assert any(header.records_count < 4 for header in headers)
    assert latest_values(all_records(log)) == latest_values(before)


def test_log_manager_runs_the_cleaner_on_compacted_logs_only(tmp_path: Path) -> None:
    clock = ManualClock()
    compact = LogConfig(cleanup_policy="compact,delete", segment_bytes=SEGMENT_BYTES)
    manager = LogManager([tmp_path], LogConfig(segment_bytes=SEGMENT_BYTES), clock, {"compacted": compact})
    try:
        for topic in ("compacted", "plain"):
            log = manager.get_or_create_log(topic, 0)
            write_updates(log, clock, rounds=20)
        sizes = {log.topic: len(all_records(log)) for log in manager.all_logs()}
        assert manager.run_cleaner(clock.time_ms()) == 1
        after = {log.topic: len(all_records(log)) for log in manager.all_logs()}
        assert after["plain"] == sizes["plain"]
        assert after["compacted"] < sizes["compacted"]
        assert ("compacted", 0) in read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    finally:
        manager.shutdown()


def test_broker_cleaner_configs_are_typed_and_validated() -> None:
    from odradek.server.config import ConfigError, KafkaConfig

    config = KafkaConfig(
        {
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "48000",
            "log.cleaner.io.buffer.load.factor": "0.5",
            "log.cleaner.backoff.ms": "100",
            "log.cleaner.min.compaction.lag.ms": "7",
            "log.cleaner.delete.retention.ms": "9",
        }
    )
    cleaner = config.cleaner_config()
    assert (cleaner.threads, cleaner.backoff_ms, cleaner.max_map_entries) == (2, 100, 500)
    topic = config.log_config({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25"})
    assert (topic.min_compaction_lag_ms, topic.delete_retention_ms, topic.min_cleanable_dirty_ratio) == (
        7,
        9,
        0.25,
    )
    assert not KafkaConfig({"log.cleaner.enable": "false"}).cleaner_config().enabled
    with pytest.raises(ConfigError, match="log.cleaner.io.buffer.load.factor"):
        KafkaConfig({"log.cleaner.io.buffer.load.factor": "1.5"})
    with pytest.raises(ConfigError, match="min.cleanable.dirty.ratio"):
        config.log_config({"min.cleanable.dirty.ratio": "2"})
    with pytest.raises(ConfigError, match="delete.retention.ms"):
        config.log_config({"delete.retention.ms": "-1"})


def put_txn(log: Log, clock: ManualClock, key: bytes, value: bytes, producer_id: int, sequence: int) -> int:
    batch = build_batch(
        [SimpleRecord(value, key, (), clock.time_ms())],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    )
    return log.append_as_leader(batch, 0).first_offset


def test_aborted_data_is_removed_and_never_shadows_committed_values(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    put(log, clock, b"kept", b"committed")
    for sequence in range(3):
        put_txn(log, clock, b"kept", b"aborted-%d" % sequence, producer_id=9, sequence=sequence)
    log.append_marker(9, 0, 0, commit=False, leader_epoch=0)
    put_txn(log, clock, b"key-1", b"committed-txn", producer_id=8, sequence=0)
    log.append_marker(8, 0, 0, commit=True, leader_epoch=0)
    log.on_high_watermark_updated(log.log_end_offset)
    write_updates(log, clock, rounds=10, keys=1)
    aborted_before = [entry for segment in log.segments for entry in segment.txn_index.entries]

    cleaner_for(log).clean_logs(clock.time_ms())

    values = {record.value for record in all_records(log)}
    assert b"committed" in values and b"committed-txn" in values
    assert not any(value.startswith(b"aborted") for value in values if value)
    markers = [header for header, _ in all_batches(log) if header.is_control]
    assert [(h.producer_id, h.base_offset) for h in markers] == [(9, 4), (8, 6)]
    assert [entry for segment in log.segments for entry in segment.txn_index.entries] == aborted_before
    log.close()
    reopened = Log(tmp_path / "topic-0", log.config, clock, clean_shutdown=True)
    assert [entry for segment in reopened.segments for entry in segment.txn_index.entries] == aborted_before


def test_the_cleaner_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    write_updates(log, clock, rounds=5, keys=1)
    open_at = put_txn(log, clock, b"key-0", b"open", producer_id=9, sequence=0)
    write_updates(log, clock, rounds=20, keys=1)
    cleaner = cleaner_for(log)
    to_clean = cleaner.log_to_clean(log, clock.time_ms())
    holding = next(s for s in log.segments if s.next_offset > open_at)
    assert to_clean.first_uncleanable_offset == holding.base_offset
    cleaner.clean_logs(clock.time_ms())
    assert any(record.value == b"open" for record in all_records(log))
    assert all_records(log)[0].offset < open_at


def test_a_swap_finished_by_the_loader_rebuilds_the_txn_index_from_the_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    log = compacted_log(tmp_path, clock)
    for sequence in range(4):
        put_txn(log, clock, b"kept-%d" % sequence, b"aborted", producer_id=9, sequence=sequence)
    log.append_marker(9, 0, 0, commit=False, leader_epoch=0)
    log.on_high_watermark_updated(log.log_end_offset)
    write_updates(log, clock, rounds=20)

    def crash(*args: object) -> None:
        raise SystemExit("crash")

    monkeypatch.setattr(Log, "_delete_segments", crash)
    with pytest.raises(SystemExit):
        cleaner_for(log).clean_logs(clock.time_ms())
    monkeypatch.undo()
    reopened = Log(tmp_path / "topic-0", log.config, clock, clean_shutdown=True)
    producer_batches = [header for header, _ in all_batches(reopened) if header.producer_id == 9]
    assert [h.records_count for h in producer_batches] == [0, 0, 0, 0, 1]  # retained empty, marker
    aborted = reopened.collect_aborted_transactions(0, reopened.log_end_offset)
    assert [(txn.producer_id, txn.first_offset, txn.last_offset) for txn in aborted] == [(9, 0, 4)]
    assert all(not segment.txn_index_stale for segment in reopened.segments)


def markers_of(log: Log) -> list[tuple[int, int, int, bool]]:
    """(producer id, offset, records, has a delete horizon) of every control batch."""
    return [
        (h.producer_id, h.base_offset, h.records_count, bool(h.attributes & DELETE_HORIZON_MASK))
        for h, _ in all_batches(log)
        if h.is_control
    ]


def aborted_of(log: Log) -> list[tuple[int, int, int]]:
    entries = [entry for segment in log.segments for entry in segment.txn_index.entries]
    return [(entry.producer_id, entry.first_offset, entry.last_offset) for entry in entries]


def test_markers_go_once_their_transaction_left_the_log_and_the_delete_horizon_passed(
    tmp_path: Path,
) -> None:
    """KIP-534 for markers: a pass that finds no batch of a marker's transaction before it gives the
    marker a delete horizon (attribute bit 6, baseTimestamp = now + delete.retention.ms), a pass
    after the horizon removes it; the aborted transaction leaves the .txnindex with its data."""
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, delete_retention_ms=1000)
    aborted_at = put_txn(log, clock, b"k", b"aborted", producer_id=8, sequence=0)
    abort_marker = log.append_marker(8, 0, 0, commit=False, leader_epoch=0).first_offset
    commit_markers = []
    for sequence in range(1, 7):  # the producer state retains the batches of the last five
        put_txn(log, clock, b"k", b"committed-%d" % sequence, producer_id=8, sequence=sequence)
        commit_markers.append(log.append_marker(8, 0, 0, commit=True, leader_epoch=0).first_offset)
    log.on_high_watermark_updated(log.log_end_offset)
    write_updates(log, clock, rounds=20, keys=1)
    log.on_high_watermark_updated(log.log_end_offset)
    cleaner = cleaner_for(log)
    every_marker = [abort_marker, *commit_markers]

    # Pass 1: every transaction had a batch in the log, so every marker stays as it was.
    assert cleaner.clean_logs(clock.time_ms()) == 1
    assert [(m[1], m[3]) for m in markers_of(log)] == [(offset, False) for offset in every_marker]
    assert aborted_of(log) == [(8, aborted_at, abort_marker)]
    assert not any(r.value == b"aborted" for r in all_records(log))

    # Pass 2: the batches of the aborted and of the first committed transaction are gone, so
    # their markers get a delete horizon; the aborted transaction leaves the transaction index.
    write_updates(log, clock, rounds=20, keys=1)
    log.on_high_watermark_updated(log.log_end_offset)
    second_pass = clock.time_ms()
    assert cleaner.clean_logs(second_pass) == 1
    assert [(m[1], m[3]) for m in markers_of(log)] == [
        (abort_marker, True),
        (commit_markers[0], True),
        *[(offset, False) for offset in commit_markers[1:]],
    ]
    horizons = {h.base_offset: h.base_timestamp for h, _ in all_batches(log) if h.is_control}
    assert horizons[abort_marker] == horizons[commit_markers[0]] == second_pass + 1000
    assert aborted_of(log) == []
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []

    # Before the horizon nothing changes; after it, the log qualifies on its own and both go.
    clock.advance(500)
    assert cleaner.clean_logs(clock.time_ms()) == 0
    clock.advance(600)
    assert cleaner.clean_logs(clock.time_ms()) == 1
    assert [m[1] for m in markers_of(log)] == commit_markers[1:]
    assert {r.value for r in all_records(log) if r.key == b"k"} == {b"committed-6"}

    # The cleaned log loads with the same producer state and transaction index.
    log.close()
    reopened = Log(tmp_path / "topic-0", log.config, clock, clean_shutdown=False)
    entry = reopened.producer_state.last_entry(8)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (0, 6)
    reopened.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset == -1
    assert aborted_of(reopened) == []
    reopened.close()


def test_a_marker_that_is_its_producers_last_record_stays_as_an_empty_batch(tmp_path: Path) -> None:
    """A fencing abort (a bumped epoch, no data batch retained) keeps the epoch that fences: past
    its delete horizon it stays as an empty control batch, which a reload and a follower accept."""
    clock = ManualClock()
    log = compacted_log(tmp_path, clock, delete_retention_ms=1000)
    put_txn(log, clock, b"k", b"aborted", producer_id=7, sequence=0)
    marker = log.append_marker(7, 1, 0, commit=False, leader_epoch=0).first_offset
    log.on_high_watermark_updated(log.log_end_offset)
    cleaner = cleaner_for(log)
    for _ in range(3):
        write_updates(log, clock, rounds=20, keys=1)
        log.on_high_watermark_updated(log.log_end_offset)
        clock.advance(2000)
        assert cleaner.clean_logs(clock.time_ms()) == 1
    assert [(m[0], m[1], m[2]) for m in markers_of(log)] == [(7, marker, 0)]
    (empty,) = [h for h, _ in all_batches(log) if h.is_control]
    assert (empty.producer_epoch, empty.attributes & DELETE_HORIZON_MASK) == (1, 0)
    assert aborted_of(log) == []
    write_updates(log, clock, rounds=20, keys=1)
    assert cleaner.clean_logs(clock.time_ms()) == 1
    assert [(m[0], m[1], m[2]) for m in markers_of(log)] == [(7, marker, 0)]

    follower = Log(tmp_path / "follower-0", log.config, clock)
    for _, data in all_batches(log):
        follower.append_as_follower(data)
    assert follower.log_end_offset == log.log_end_offset
    follower.close()
    log.close()
    reopened = Log(tmp_path / "topic-0", log.config, clock, clean_shutdown=False)
    entry = reopened.producer_state.last_entry(7)
    assert entry is None or entry.current_txn_first_offset == -1
    reopened.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset == -1
    reopened.close()
