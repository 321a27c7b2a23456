"""The fault harness's measures: unavailability windows within a cycle, and what a run may lose."""

from __future__ import annotations

from odradek.testing.chaos import ChaosResult, unavailability


def test_a_window_is_the_longest_gap_from_the_fault_start_within_its_cycle() -> None:
    acks = [[0.5, 1.0, 4.0, 4.5, 30.0, 40.0], [2.0, 5.0]]
    # fault from 1.0 to its cycle's end at 6.0, healed at 3.0: both partitions wait 3 s at most,
    # partition 1 for 2 s of them after the heal (3.0 -> 5.0); nothing after 6.0 counts
    assert unavailability(acks, start=1.0, healed=3.0, end=6.0) == (3.0, 2.0)


def test_a_partition_silent_through_its_cycle_counts_until_its_next_acknowledgement_only() -> None:
    """Seed 62 of the fault runs: a fault whose cycle ended before one partition was acknowledged
    again was measured to the end of the run, and took the longest gap of a later fault."""
    acks = [[0.5, 7.0, 20.0, 28.5], [1.5, 2.0, 6.0]]
    assert unavailability(acks, start=1.0, healed=4.0, end=5.0) == (6.0, 3.0)
    assert unavailability([[0.5]], start=1.0, healed=4.0, end=5.0) is None


def test_with_unclean_election_on_loss_is_reported_and_allowed_other_findings_still_fail() -> None:
    clean = ChaosResult(seed=1, data_dir="d", lost=["w00000001"])
    unclean = ChaosResult(seed=1, data_dir="d", lost=["w00000001"], unclean_election=True)
    assert not clean.ok and unclean.ok
    assert "lost=1" in unclean.summary() and "unclean_election=on: loss allowed" in unclean.summary()
    assert not ChaosResult(seed=1, data_dir="d", holes={0: [5]}, unclean_election=True).ok
