"""Partition replication rules: ISR expansion and shrink proposals, the controller's answer, the
HW over the maximal ISR, the leader's divergence check, and a follower's append and truncation."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.clock import ManualClock
from odradek.protocol.records.batch import BatchHeader
from odradek.replication.partition import FetchClock, IsrProposal, Partition
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.server.test_replica_partition import batch, state

LAG_MS = 10_000


def partition_at(tmp_path: Path, name: str = "leader", broker_id: int = 0) -> Partition:
    log = Log(tmp_path / name / "t-0", LogConfig(), ManualClock())
    return Partition("t", 0, uuid.uuid4(), broker_id, log, 0)


def test_caught_up_follower_is_proposed_for_the_isr_once(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1), isr=(0,), partition_epoch=3), now_ms=0)
    leader.append_records_to_leader(batch(4), required_acks=1)
    assert leader.high_watermark == 4  # the ISR is the leader alone
    assert leader.update_follower_fetch_state(1, 2, now_ms=10) == (False, None)  # behind the HW
    moved, proposal = leader.update_follower_fetch_state(1, 4, now_ms=20)
    assert proposal == IsrProposal(5, 3, (0, 1)) and leader.pending_isr == (0, 1)
    assert leader.update_follower_fetch_state(1, 4, now_ms=30)[1] is None  # one proposal in flight
    leader.append_records_to_leader(batch(2), required_acks=1)
    assert leader.high_watermark == 4  # the pending member counts for the HW (maximal ISR)
    assert leader.apply_isr(5, 4, (0, 1)) is False and leader.isr == (0, 1) and leader.pending_isr is None
    assert leader.update_follower_fetch_state(1, 6, now_ms=40)[0] is True and leader.high_watermark == 6


def test_follower_not_caught_up_for_the_lag_time_is_proposed_out(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1, 2), partition_epoch=1), now_ms=1_000)
    leader.append_records_to_leader(batch(3), required_acks=1)
    leader.update_follower_fetch_state(1, 3, now_ms=5_000)  # caught up
    leader.update_follower_fetch_state(2, 1, now_ms=5_000)  # fetching, but behind
    assert leader.isr_to_shrink(now_ms=1_000 + LAG_MS, lag_time_max_ms=LAG_MS) is None
    proposal = leader.isr_to_shrink(now_ms=1_001 + LAG_MS, lag_time_max_ms=LAG_MS)
    assert proposal == IsrProposal(5, 1, (0, 1))
    assert leader.high_watermark == 1  # a pending shrink does not count until confirmed
    assert leader.apply_isr(5, 2, (0, 1)) is True and leader.high_watermark == 3


def test_a_follower_fetching_from_the_leo_seen_at_its_previous_fetch_stays_caught_up(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1)), now_ms=0)
    leader.append_records_to_leader(batch(2), required_acks=1)
    leader.update_follower_fetch_state(1, 0, now_ms=100)  # the leader's LEO is 2 at this fetch
    leader.append_records_to_leader(batch(2), required_acks=1)  # a steady stream of appends
    leader.update_follower_fetch_state(1, 2, now_ms=LAG_MS + 50)  # reached what it saw last time
    assert leader.isr_to_shrink(now_ms=LAG_MS + 60, lag_time_max_ms=LAG_MS) is None


def test_refused_or_stale_answers_leave_the_isr_and_allow_a_new_proposal(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1), isr=(0,), partition_epoch=3), now_ms=0)
    _, proposal = leader.update_follower_fetch_state(1, 0, now_ms=1)
    assert proposal is not None
    leader.clear_pending_isr(proposal)
    assert leader.isr == (0,) and leader.pending_isr is None
    _, again = leader.update_follower_fetch_state(1, 0, now_ms=2)
    assert again == proposal
    assert leader.apply_isr(4, 9, (0, 1)) is False and leader.isr == (0,)  # another leader epoch
    assert leader.apply_isr(5, 3, (0, 1)) is False and leader.isr == (0,)  # not a newer partition epoch


def test_leader_reports_where_a_fetcher_diverges(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(epoch=1, replicas=(0, 1)))
    leader.append_records_to_leader(batch(3), required_acks=1)  # epoch 1: offsets 0-2
    leader.log.maybe_assign_epoch_start_offset(3, 3)
    leader.make_leader(state(epoch=3, replicas=(0, 1), partition_epoch=1))
    leader.append_records_to_leader(batch(2), required_acks=1)  # epoch 3: offsets 3-4
    assert leader.diverging_epoch(-1, 7) is None  # no epoch named: no check
    assert leader.diverging_epoch(1, 3) is None and leader.diverging_epoch(3, 5) is None
    found = leader.diverging_epoch(1, 5)  # a follower with epoch-1 data up to offset 5
    assert (found.leader_epoch, found.end_offset) == (1, 3)
    found = leader.diverging_epoch(2, 4)  # an epoch this leader never had: ends where 3 began
    assert (found.leader_epoch, found.end_offset) == (1, 3)


def test_a_follower_that_led_an_empty_epoch_stops_diverging_after_one_truncation(tmp_path: Path) -> None:
    """Seed 52 of bench/chaos.py: broker 2 led epoch 2 and appended nothing before a split took it
    away; the new leader never had epoch 2 and answers (1, 3) to a fetch naming it. The follower's
    truncation to 3, its LEO, must drop epoch 2, or it names epoch 2 again and loops."""
    leader = partition_at(tmp_path)
    leader.make_leader(state(epoch=1, replicas=(0, 1)))
    leader.append_records_to_leader(batch(3), required_acks=1)  # epoch 1: offsets 0-2
    leader.make_leader(state(epoch=3, replicas=(0, 1), partition_epoch=1))
    leader.append_records_to_leader(batch(2), required_acks=1)  # epoch 3: offsets 3-4
    follower = partition_at(tmp_path, "follower", broker_id=1)
    follower.make_follower(state(leader=0, epoch=1, replicas=(0, 1)))
    with open(leader.log.dir / "00000000000000000000.log", "rb") as segment:
        follower.append_records_as_follower(memoryview(segment.read()[: len(batch(3))]), 3)
    follower.log.maybe_assign_epoch_start_offset(2, 3)  # led epoch 2, appended nothing
    cache = follower.log.leader_epoch_cache
    found = leader.diverging_epoch(cache.latest_epoch, follower.log_end_offset)
    assert (found.leader_epoch, found.end_offset) == (1, 3)
    follower.truncate_to(found.end_offset)
    assert follower.log_end_offset == 3
    assert leader.diverging_epoch(cache.latest_epoch, follower.log_end_offset) is None


def test_follower_appends_the_leaders_batches_and_takes_its_high_watermark(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(epoch=2, replicas=(0, 1)))
    leader.append_records_to_leader(batch(3), required_acks=1)
    follower = partition_at(tmp_path, "follower", broker_id=1)
    follower.make_follower(state(leader=0, epoch=2, replicas=(0, 1)))
    fetched = leader.read_records(0, 1 << 20, 0, True, replica_id=1)
    with open(leader.log.dir / "00000000000000000000.log", "rb") as segment:
        data = memoryview(segment.read()[: fetched.size])
    follower.append_records_as_follower(data, leader_high_watermark=1)
    assert follower.log_end_offset == 3 and follower.high_watermark == 1
    assert BatchHeader.unpack_from(data).partition_leader_epoch == 2
    assert follower.log.leader_epoch_cache.latest_epoch == 2
    follower.append_records_as_follower(memoryview(b""), leader_high_watermark=3)
    assert follower.high_watermark == 3
    follower.truncate_to(1)
    assert follower.log_end_offset == 0 and follower.high_watermark == 0  # the whole batch goes
    follower.truncate_fully_and_start_at(7)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (7, 7, 7)


def test_a_refused_expansion_stops_holding_the_hw_back(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1), isr=(0,), partition_epoch=3), now_ms=0)
    leader.append_records_to_leader(batch(4), required_acks=1)
    proposal = leader.update_follower_fetch_state(1, 4, now_ms=10)[1]
    assert proposal is not None and leader.pending_isr == (0, 1)
    leader.append_records_to_leader(batch(2), required_acks=1)
    assert leader.high_watermark == 4  # the candidate, at 4, holds the HW of the maximal ISR
    assert leader.update_follower_fetch_state(1, 4, now_ms=20)[0] is False  # its LEO did not move
    assert leader.clear_pending_isr(proposal) is True and leader.high_watermark == 6


def test_a_follower_resting_on_a_clock_wakes_caught_up_as_of_it(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1), isr=(0, 1)), now_ms=0)
    leader.append_records_to_leader(batch(2), required_acks=1)
    leader.update_follower_fetch_state(1, 2, now_ms=100)
    clock = FetchClock(100)
    assert leader.rest_follower(1, clock)
    clock.ms = 5_000  # the session fetched at 5,000 and skipped this partition
    leader.append_records_to_leader(batch(2), required_acks=1)
    leader.update_follower_fetch_state(1, 2, now_ms=5_100)  # from the LEO it was at: caught up at 5,000
    assert leader.isr_to_shrink(now_ms=5_000 + LAG_MS, lag_time_max_ms=LAG_MS) is None
    clock.ms = 50_000  # woken: the clock no longer speaks for it
    proposal = leader.isr_to_shrink(now_ms=5_001 + LAG_MS, lag_time_max_ms=LAG_MS)
    assert proposal is not None and proposal.isr == (0,)


def test_only_a_caught_up_isr_member_rests(tmp_path: Path) -> None:
    leader = partition_at(tmp_path)
    leader.make_leader(state(replicas=(0, 1, 2), isr=(0, 1)), now_ms=0)
    leader.append_records_to_leader(batch(2), required_acks=1)
    leader.update_follower_fetch_state(1, 1, now_ms=10)
    leader.update_follower_fetch_state(2, 2, now_ms=10)  # caught up, but not a member yet
    assert not leader.rest_follower(1, FetchClock())  # behind the LEO
    assert not leader.rest_follower(2, FetchClock())  # its expansion is pending
