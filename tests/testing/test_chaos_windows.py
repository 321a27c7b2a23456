"""The unavailability window of a fault: gaps between acknowledgements within its cycle only."""

from __future__ import annotations

from odradek.testing.chaos import unavailability


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
