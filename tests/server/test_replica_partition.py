"""Partition: high watermark = min LEO over the ISR, reads bounded by HW/LSO/LEO, epochs, min ISR, and
the checked path that applies a partition state."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.controller.metadata import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.replication.partition import (
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_LEADER_EPOCH,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Partition,
    TimestampAndOffset,
)
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.log import Log


def batch(count: int = 1, timestamp: int = 1_000) -> memoryview:
    records = [SimpleRecord(b"v%d" % i, timestamp=timestamp + i) for i in range(count)]
    return memoryview(build_batch(records))


def state(
    leader: int = 0,
    epoch: int = 5,
    replicas: tuple[int, ...] = (0,),
    isr: tuple[int, ...] | None = None,
    partition_epoch: int = 0,
) -> PartitionState:
    return PartitionState(leader, epoch, replicas, replicas if isr is None else isr, 1, partition_epoch)


def make_partition(tmp_path: Path, high_watermark: int = 0, **config: int) -> Partition:
    log = Log(tmp_path / "t-0", LogConfig(**config), ManualClock())
    return Partition("t", 0, uuid.uuid4(), 0, log, high_watermark)


def test_single_replica_append_moves_high_watermark_to_log_end(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state())
    info, moved = partition.append_records_to_leader(batch(3), required_acks=1)
    assert (info.first_offset, info.last_offset, moved) == (0, 2, True)
    assert partition.high_watermark == partition.log_end_offset == 3
    assert partition.last_stable_offset == 3
    read = partition.read_records(0, 1 << 20, READ_COMMITTED, True)
    assert read.size > 0 and read.high_watermark == 3 and len(read.records) == 1


def test_high_watermark_is_min_leo_over_isr(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1, 2)))
    _, moved = partition.append_records_to_leader(batch(4), required_acks=1)
    assert not moved and partition.high_watermark == 0  # followers have not fetched yet
    assert partition.update_follower_fetch_state(1, 4)[0] is False  # replica 2 still unknown
    assert partition.update_follower_fetch_state(2, 2)[0] is True
    assert partition.high_watermark == 2
    assert partition.update_follower_fetch_state(2, 4)[0] is True
    assert partition.high_watermark == 4
    assert partition.update_follower_fetch_state(1, 1)[0] is False  # never moves backwards
    assert partition.high_watermark == 4


def test_out_of_sync_replica_does_not_hold_back_the_high_watermark(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1, 2), isr=(0, 1)))
    partition.append_records_to_leader(batch(2), required_acks=1)
    assert partition.update_follower_fetch_state(1, 2)[0] is True
    assert partition.high_watermark == 2 and partition.follower_log_end_offset(2) == -1


def test_consumers_read_below_high_watermark_replicas_to_log_end(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1)))
    partition.append_records_to_leader(batch(2), required_acks=1)
    consumer = partition.read_records(0, 1 << 20, READ_UNCOMMITTED, True)
    assert consumer.size == 0 and consumer.records == [] and consumer.high_watermark == 0
    replica = partition.read_records(0, 1 << 20, READ_UNCOMMITTED, True, replica_id=1)
    assert replica.size > 0 and replica.log_end_offset == 2


def test_at_fetchable_end_only_when_nothing_is_new_and_the_epochs_match(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1)))
    partition.append_records_to_leader(batch(2), required_acks=1)
    partition.update_follower_fetch_state(1, 1)  # HW 1, LEO 2
    at_end = partition.at_fetchable_end
    assert at_end(1, -1, READ_UNCOMMITTED, -1, -1) and not at_end(0, -1, READ_UNCOMMITTED, -1, -1)
    assert at_end(2, 1, READ_UNCOMMITTED, 5, 5) and not at_end(1, 1, READ_UNCOMMITTED, 5, 5)
    assert not at_end(1, -1, READ_UNCOMMITTED, 4, -1)  # a fenced epoch is answered by the read
    assert not at_end(2, 1, READ_UNCOMMITTED, 5, 4)  # an older last fetched epoch may diverge
    partition.make_follower(state(leader=1, epoch=6, replicas=(0, 1)))
    assert not at_end(1, -1, READ_UNCOMMITTED, -1, -1)


def test_acks_all_refused_when_isr_below_min_insync_replicas(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, min_insync_replicas=2)
    partition.make_leader(state())
    with pytest.raises(KafkaError) as refused:
        partition.append_records_to_leader(batch(), required_acks=-1)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == 0
    info, _ = partition.append_records_to_leader(batch(), required_acks=1)
    assert info.first_offset == 0


def test_enough_replicas_reached_follows_high_watermark_and_isr(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, min_insync_replicas=2)
    partition.make_leader(state(replicas=(0, 1)))
    partition.append_records_to_leader(batch(), required_acks=-1)
    assert partition.check_enough_replicas_reached(1) == (False, ErrorCode.NONE)
    partition.update_follower_fetch_state(1, 1)
    assert partition.check_enough_replicas_reached(1) == (True, ErrorCode.NONE)
    partition.make_leader(state(replicas=(0, 1), isr=(0,), partition_epoch=1))  # an ISR change
    assert partition.check_enough_replicas_reached(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_only_newer_states_are_applied(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(epoch=5, partition_epoch=3))
    for stale in (state(epoch=4, partition_epoch=9), state(epoch=5, partition_epoch=3)):
        for apply in (partition.make_leader, partition.make_follower):
            with pytest.raises(KafkaError) as refused:
                apply(stale)
            assert refused.value.code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert (partition.leader_epoch, partition.partition_epoch, partition.is_leader) == (5, 3, True)
    partition.make_follower(state(leader=1, epoch=6, replicas=(1, 0), partition_epoch=4))
    assert (partition.leader_id, partition.leader_epoch) == (1, 6)


def test_leader_epoch_fencing(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(epoch=5))
    partition.check_leader(-1)
    partition.check_leader(5)
    for epoch, code in ((4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        with pytest.raises(KafkaError) as failed:
            partition.read_records(0, 100, READ_UNCOMMITTED, True, current_leader_epoch=epoch)
        assert failed.value.code == code


def test_follower_refuses_leader_requests(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_follower(state(leader=1, replicas=(1, 0)))
    for call in (
        lambda: partition.append_records_to_leader(batch(), 1),
        lambda: partition.read_records(0, 100, READ_UNCOMMITTED, True),
        lambda: partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_UNCOMMITTED),
    ):
        with pytest.raises(KafkaError) as failed:
            call()
        assert failed.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_unknown_follower_fetch_is_refused(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1)))
    with pytest.raises(KafkaError) as failed:
        partition.update_follower_fetch_state(7, 0)
    assert failed.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_checkpointed_high_watermark_is_clamped_to_the_log(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(), ManualClock())
    log.append_as_leader(batch(3), 0)
    partition = Partition("t", 0, uuid.uuid4(), 0, log, high_watermark=99)
    assert partition.high_watermark == 3
    partition = Partition("t", 0, uuid.uuid4(), 0, log, high_watermark=2)
    partition.make_leader(state(replicas=(0, 1)))
    assert partition.high_watermark == 2  # the follower has not confirmed offset 2 yet


def test_read_out_of_range(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state())
    partition.append_records_to_leader(batch(2), 1)
    assert partition.read_records(2, 100, READ_UNCOMMITTED, True).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        partition.read_records(3, 100, READ_UNCOMMITTED, True)


def test_offsets_for_timestamps(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(epoch=3, replicas=(0, 1)))
    partition.append_records_to_leader(batch(3, timestamp=100), 1)  # offsets 0-2, timestamps 100-102
    partition.append_records_to_leader(batch(2, timestamp=200), 1)  # offsets 3-4, timestamps 200-201
    partition.update_follower_fetch_state(1, 3)
    assert partition.high_watermark == 3
    lookup = partition.fetch_offset_for_timestamp
    assert lookup(LATEST_TIMESTAMP, READ_UNCOMMITTED) == TimestampAndOffset(-1, 3, 3)
    assert lookup(LATEST_TIMESTAMP, None) == TimestampAndOffset(-1, 5, 3)  # a replica asking: log end offset
    assert lookup(EARLIEST_TIMESTAMP, READ_UNCOMMITTED).offset == 0
    assert lookup(LATEST_TIERED_TIMESTAMP, READ_UNCOMMITTED).offset == -1
    found = lookup(101, READ_UNCOMMITTED)
    assert (found.timestamp, found.offset) == (101, 1)
    assert lookup(150, READ_UNCOMMITTED) is None  # offset 3 is above the high watermark
    assert lookup(150, None).offset == 3
    assert lookup(MAX_TIMESTAMP, None).offset == 4
    assert lookup(MAX_TIMESTAMP, READ_UNCOMMITTED) is None
    assert lookup(10_000, None) is None


def idempotent_batch(sequence: int, producer_epoch: int = 0, producer_id: int = 7) -> memoryview:
    record = SimpleRecord(b"s%d" % sequence, timestamp=1_000)
    return memoryview(
        build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=sequence)
    )


def refusal(partition: Partition, records: memoryview) -> ErrorCode:
    with pytest.raises(KafkaError) as refused:
        partition.append_records_to_leader(records, required_acks=-1)
    return refused.value.code


def test_a_gap_left_by_a_batch_refused_for_min_isr_is_answered_with_that_refusal(tmp_path: Path) -> None:
    """Seed 53 of the fault runs: batch N refused NOT_ENOUGH_REPLICAS, the ISR grows back, N+1
    arrives before N is retried. Kafka answers N+1 OUT_OF_ORDER_SEQUENCE_NUMBER, which makes
    librdkafka bump its epoch and write unacknowledged batches twice; this leader answers N+1 with
    N's retriable refusal, and both go in, in order, once N is retried."""
    partition = make_partition(tmp_path, min_insync_replicas=2)
    partition.make_leader(state(replicas=(0, 1)))
    partition.append_records_to_leader(idempotent_batch(0), required_acks=1)
    partition.update_follower_fetch_state(1, 1)
    partition.apply_isr(5, 1, (0,))  # the ISR shrinks
    assert refusal(partition, idempotent_batch(1)) == ErrorCode.NOT_ENOUGH_REPLICAS
    partition.apply_isr(5, 2, (0, 1))  # and grows back before batch 2 arrives
    assert refusal(partition, idempotent_batch(2)) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.append_records_to_leader(idempotent_batch(1), required_acks=-1)[0].first_offset == 1
    assert partition.append_records_to_leader(idempotent_batch(2), required_acks=-1)[0].first_offset == 2
    assert (
        refusal(partition, idempotent_batch(4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )  # a gap of its own


def test_a_refusal_explains_no_gap_of_another_epoch_or_leader_epoch(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, min_insync_replicas=2)
    partition.make_leader(state(replicas=(0,)))
    partition.append_records_to_leader(idempotent_batch(0), required_acks=1)
    assert refusal(partition, idempotent_batch(1)) == ErrorCode.NOT_ENOUGH_REPLICAS
    partition.log.update_config(LogConfig(min_insync_replicas=1))
    assert refusal(partition, idempotent_batch(2, producer_epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    partition.make_leader(state(epoch=6, replicas=(0,)))  # a new leader epoch forgets the refusal
    assert refusal(partition, idempotent_batch(2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert partition.append_records_to_leader(idempotent_batch(1), required_acks=-1)[0].first_offset == 1


# -- transactions ----------------------------------------------------------------------------------


def txn_batch(producer_id: int, sequence: int = 0, count: int = 1) -> memoryview:
    records = [SimpleRecord(b"t%d" % i, timestamp=1_000) for i in range(count)]
    return memoryview(
        bytearray(
            build_batch(
                records,
                producer_id=producer_id,
                producer_epoch=0,
                base_sequence=sequence,
                is_transactional=True,
            )
        )
    )


def test_an_open_transaction_holds_the_last_stable_offset_and_read_committed_reads(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state())
    partition.append_records_to_leader(batch(2), 1)  # 0-1
    partition.append_records_to_leader(txn_batch(7, count=2), 1)  # 2-3
    partition.append_records_to_leader(batch(1), 1)  # 4
    assert (partition.high_watermark, partition.last_stable_offset) == (5, 2)
    committed = partition.read_records(0, 1 << 20, READ_COMMITTED, True)
    uncommitted = partition.read_records(0, 1 << 20, READ_UNCOMMITTED, True)
    assert 0 < committed.size < uncommitted.size and committed.last_stable_offset == 2
    assert committed.aborted_transactions == [] and uncommitted.aborted_transactions is None
    assert partition.read_records(2, 1 << 20, READ_COMMITTED, True).size == 0
    assert partition.at_fetchable_end(2, -1, READ_COMMITTED, NO_LEADER_EPOCH, -1)
    lookup = partition.fetch_offset_for_timestamp
    assert lookup(LATEST_TIMESTAMP, READ_COMMITTED).offset == 2
    assert lookup(LATEST_TIMESTAMP, READ_UNCOMMITTED).offset == 5

    _, moved = partition.append_marker(7, 0, coordinator_epoch=0, commit=True)
    assert moved and (partition.high_watermark, partition.last_stable_offset) == (6, 6)
    assert lookup(LATEST_TIMESTAMP, READ_COMMITTED).offset == 6


def test_read_committed_reads_list_the_aborted_transactions(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state())
    partition.append_records_to_leader(txn_batch(7, count=2), 1)  # 0-1
    partition.append_records_to_leader(txn_batch(8), 1)  # 2
    partition.append_marker(7, 0, coordinator_epoch=0, commit=False)  # 3
    assert partition.last_stable_offset == 2  # 8's transaction is open
    read = partition.read_records(0, 1 << 20, READ_COMMITTED, True)
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions or ()] == [(7, 0)]
    partition.append_marker(8, 0, coordinator_epoch=0, commit=False)  # 4
    read = partition.read_records(3, 1 << 20, READ_COMMITTED, True)  # 7's marker is in the range
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions or ()] == [(7, 0), (8, 2)]
    read = partition.read_records(4, 1 << 20, READ_COMMITTED, True)
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions or ()] == [(8, 2)]
    assert partition.read_records(0, 1 << 20, READ_UNCOMMITTED, True).aborted_transactions is None


def test_a_marker_is_stable_only_once_the_isr_has_it(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state(replicas=(0, 1)))
    partition.append_records_to_leader(txn_batch(7), 1)  # 0
    partition.update_follower_fetch_state(1, 1)
    assert (partition.high_watermark, partition.last_stable_offset) == (1, 0)
    _, moved = partition.append_marker(7, 0, coordinator_epoch=0, commit=True)  # 1
    assert not moved and partition.last_stable_offset == 0
    assert partition.update_follower_fetch_state(1, 2)[0]
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 2)


def test_markers_need_the_leader_and_a_current_producer_epoch(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_follower(state(leader=1))
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(7, 0, 0, commit=True)
    assert raised.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    partition.make_leader(state(epoch=6))
    partition.append_records_to_leader(
        memoryview(
            bytearray(build_batch([SimpleRecord(b"x")], producer_id=7, producer_epoch=2, base_sequence=0))
        ),
        1,
    )
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(7, 1, 0, commit=False)
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_follower_last_stable_offset_follows_replicated_markers(tmp_path: Path) -> None:
    leader = make_partition(tmp_path / "leader")
    leader.make_leader(state())
    leader.append_records_to_leader(txn_batch(7), 1)
    leader.append_marker(7, 0, coordinator_epoch=0, commit=False)
    leader.append_records_to_leader(txn_batch(8), 1)
    follower = make_partition(tmp_path / "follower")
    follower.make_follower(state(leader=1))
    data = b"".join(segment.path(".log").read_bytes() for segment in leader.log.segments)
    follower.append_records_as_follower(memoryview(bytearray(data)), leader_high_watermark=1)
    assert follower.last_stable_offset == 0  # the abort at 1 is not below the HW yet
    follower.append_records_as_follower(memoryview(b""), leader_high_watermark=3)
    assert follower.last_stable_offset == 2 == leader.last_stable_offset
    assert follower.log.collect_aborted_transactions(0, 2) == leader.log.collect_aborted_transactions(0, 2)


def test_the_last_stable_offset_never_falls_below_the_log_start_offset(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(state())
    partition.append_records_to_leader(txn_batch(7), 1)  # 0
    partition.append_records_to_leader(batch(3), 1)  # 1-3
    assert partition.last_stable_offset == 0
    partition.log.advance_start_offset(2)  # DeleteRecords past the open transaction's start
    assert partition.last_stable_offset == 2


def test_a_leader_continuing_into_a_new_epoch_starts_it_after_its_old_epoch_batches(tmp_path: Path) -> None:
    """A leader kept through an ISR change (leader epoch 7 -> 8) may append in epoch 7 until the new
    state is applied: epoch 8 starts at the log end when it is applied, after those batches (written
    at load time in a worker, it started below them, and the followers, whose fetched batches say
    epoch 7, diverged from the leader for ever)."""
    partition = make_partition(tmp_path)
    partition.make_leader(state(epoch=7))
    partition.append_records_to_leader(batch(2), required_acks=1)
    partition.make_leader(state(epoch=8, partition_epoch=1))
    cache = partition.log.leader_epoch_cache
    assert [(e.epoch, e.start_offset) for e in cache.entries][-2:] == [(7, 0), (8, 2)]
    assert partition.leader_epoch_start_offset == 2
