"""The controller's pure decisions: replica assignment, elections, the next state, the partition cap."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from odradek.controller.decisions import (
    BrokerPlacement,
    Election,
    ElectionType,
    assign_replicas,
    check_assignments,
    check_broker_partition_cap,
    check_partition_count_fits,
    controlled_shutdown_election,
    imbalanced_partitions,
    isr_change,
    new_partition_state,
    next_state,
    offline_election,
    preferred_election,
    rack_alternated,
    requested_election,
)
from odradek.controller.metadata import NO_LEADER, PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError

FIVE = [BrokerPlacement(b) for b in (3, 1, 4, 0, 2)]  # given unsorted on purpose


def code(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.code


def test_rack_unaware_assignment_follows_kafkas_layout():
    """Kafka's documented example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0."""
    assignment = assign_replicas(FIVE, 10, 3, start_index=0, replica_shift=0)
    assert assignment[0] == (0, 1, 2)
    assert assignment[1] == (1, 2, 3)
    assert assignment[4] == (4, 0, 1)
    assert assignment[5] == (0, 2, 3)  # the shift grew by one after n partitions
    assert assignment[9] == (4, 1, 2)
    assert Counter(r[0] for r in assignment.values()) == {b: 2 for b in range(5)}  # leaders spread


def test_assignment_of_added_partitions_continues_from_first_partition():
    grown = assign_replicas(FIVE, 3, 2, first_partition=5, start_index=0, replica_shift=0)
    assert sorted(grown) == [5, 6, 7]
    assert grown[5] == assign_replicas(FIVE, 10, 2, start_index=0, replica_shift=0)[5]


def test_random_start_is_drawn_from_the_given_rng():
    first = assign_replicas(FIVE, 20, 3, rng=random.Random(7))
    assert first == assign_replicas(FIVE, 20, 3, rng=random.Random(7))
    assert all(len(set(replicas)) == 3 for replicas in first.values())


def test_rack_alternated_list_interleaves_racks():
    brokers = [BrokerPlacement(b, f"rack{b // 3 + 1}") for b in range(9)]
    assert [b.broker_id for b in rack_alternated(brokers)] == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_assignment_uses_every_rack_before_repeating_one():
    brokers = [BrokerPlacement(b, ("a", "b", "c")[b % 3]) for b in range(6)]
    for replicas in assign_replicas(brokers, 12, 3, rng=random.Random(1)).values():
        assert len({brokers[r].rack for r in replicas}) == 3
    two_racks = [BrokerPlacement(b, ("a", "b")[b % 2]) for b in range(4)]
    for replicas in assign_replicas(two_racks, 8, 3, rng=random.Random(2)).values():
        assert len(set(replicas)) == 3 and len({two_racks[r].rack for r in replicas}) == 2


def test_assignment_refusals():
    assert code(assign_replicas, FIVE, 0, 1) == ErrorCode.INVALID_PARTITIONS
    assert code(assign_replicas, FIVE, 1, 0) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert code(assign_replicas, FIVE, 1, 6) == ErrorCode.INVALID_REPLICATION_FACTOR
    mixed = [BrokerPlacement(0, "a"), BrokerPlacement(1)]
    assert code(assign_replicas, mixed, 1, 1) == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_explicit_assignment_checks():
    assert check_assignments({0: [1, 2], 1: [2, 1]}, {1, 2}) == {0: (1, 2), 1: (2, 1)}
    for bad in ({0: [1], 2: [1]}, {0: [1, 1]}, {0: []}, {0: [9]}, {0: [1], 1: [1, 2]}):
        assert code(check_assignments, bad, {1, 2}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert check_assignments({3: [1]}, {1}, first=3) == {3: (1,)}


def test_partition_cap_refuses_the_whole_request_with_policy_violation():
    check_broker_partition_cap({0: 8}, {0: (0,), 1: (0,)}, 10)
    with pytest.raises(KafkaError) as info:
        check_broker_partition_cap({0: 9, 1: 0}, {0: (1, 0), 1: (0, 1)}, 10)
    assert info.value.code == ErrorCode.POLICY_VIOLATION and "broker 0" in info.value.message


STATE = PartitionState(
    leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 3), controller_epoch=2, partition_epoch=9
)


def test_new_partition_leader_is_the_first_live_replica():
    state = new_partition_state((2, 0, 1), {0, 1}, 5)
    assert (state.leader, state.isr, state.leader_epoch, state.partition_epoch) == (0, (0, 1), 0, 0)
    assert new_partition_state((2,), set(), 5).leader == NO_LEADER


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order():
    assert offline_election(STATE, {2, 3}, unclean_allowed=False) == Election(3, (3,))
    assert offline_election(STATE, {1, 2, 3}, unclean_allowed=False) == Election(1, (1, 3))


def test_offline_election_without_a_live_isr_member():
    assert offline_election(STATE, {2}, unclean_allowed=False) == Election(NO_LEADER, (1, 3))
    assert offline_election(STATE, {2}, unclean_allowed=True) == Election(2, (2,))
    assert offline_election(STATE, set(), unclean_allowed=True) == Election(NO_LEADER, (1, 3))


def test_preferred_election_only_when_the_preferred_replica_is_live_and_in_sync():
    moved = PartitionState(3, 5, (1, 2, 3), (1, 3), 2, 10)
    assert preferred_election(moved, {1, 2, 3}) == Election(1, (1, 3))
    assert preferred_election(moved, {2, 3}) is None
    assert preferred_election(PartitionState(3, 5, (2, 1, 3), (1, 3), 2, 10), {1, 2, 3}) is None


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr():
    assert controlled_shutdown_election(STATE, {1, 2, 3}, {1}) == Election(3, (3,))
    alone = PartitionState(1, 4, (1, 2), (1,), 2, 9)
    assert controlled_shutdown_election(alone, {1, 2}, {1}) is None


def test_an_isr_expansion_to_a_broker_shutting_down_is_ineligible():
    assert isr_change(STATE, 1, 4, 9, (1, 2, 3), {1, 2, 3}, shutting_down={2}) == ErrorCode.INELIGIBLE_REPLICA
    kept = isr_change(STATE, 1, 4, 9, (1, 3), {1, 2, 3}, shutting_down={1, 3})
    assert kept == STATE  # members already in the ISR may stay while they shut down


def test_next_state_moves_both_epochs_and_stamps_the_controller_epoch():
    state = next_state(STATE, Election(3, (3,)), controller_epoch=7)
    assert (state.leader, state.isr, state.replicas) == (3, (3,), (1, 2, 3))
    assert (state.leader_epoch, state.partition_epoch, state.controller_epoch) == (5, 10, 7)


def test_a_partition_count_beyond_every_brokers_cap_is_refused_before_assignment():
    check_partition_count_fits(30, 3, 10)
    with pytest.raises(KafkaError) as refused:
        check_partition_count_fits(31, 3, 10)
    assert (
        refused.value.code == ErrorCode.POLICY_VIOLATION
        and "max.broker.partitions=10" in refused.value.message
    )


def test_rebalance_elects_preferred_replicas_only_for_brokers_past_the_imbalance_share():
    def led(leader: int, replicas: tuple[int, ...]) -> PartitionState:
        return PartitionState(leader, 1, replicas, replicas, 1, 1)

    states = {
        ("t", 0): led(2, (1, 2, 3)),  # broker 1 preferred, not leading: 1 of its 4 (25%)
        ("t", 1): led(1, (1, 2, 3)),
        ("t", 2): led(1, (1, 3, 2)),
        ("t", 3): led(1, (1, 3, 2)),
        ("t", 4): led(3, (2, 3, 1)),  # broker 2 preferred: 1 of 1 not led (100%)
        ("u", 0): led(1, (3, 1, 2)),  # broker 3 preferred but out of the live set
    }
    assert imbalanced_partitions(states, {1, 2, 3}, 10) == {
        ("t", 0): Election(1, (1, 2, 3)),
        ("t", 4): Election(2, (2, 3, 1)),
        ("u", 0): Election(3, (3, 1, 2)),
    }
    assert imbalanced_partitions(states, {1, 2}, 25) == {
        ("t", 4): Election(2, (2, 3, 1))
    }  # 25% is not past 25
    assert imbalanced_partitions({("t", 0): led(1, (1, 2))}, {1, 2}, 0) == {}  # balanced


def test_preferred_election_asked_by_an_admin():
    def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
        return PartitionState(leader, 4, (1, 2, 3), isr, 1, 6)

    preferred = ElectionType.PREFERRED
    assert requested_election(state(2, (1, 2, 3)), preferred, {1, 2, 3}) == Election(1, (1, 2, 3))
    assert requested_election(state(1, (1, 2)), preferred, {1, 2}) == ErrorCode.ELECTION_NOT_NEEDED
    assert requested_election(state(2, (2, 3)), preferred, {1, 2, 3}) == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # out of the ISR
    )
    assert requested_election(state(2, (1, 2)), preferred, {2, 3}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert requested_election(state(NO_LEADER, (1,)), preferred, {1}) == Election(1, (1,))  # offline


def test_unclean_election_asked_by_an_admin_only_for_partitions_without_a_live_leader():
    def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
        return PartitionState(leader, 4, (1, 2, 3), isr, 1, 6)

    unclean = ElectionType.UNCLEAN
    assert requested_election(state(2, (2,)), unclean, {1, 2}) == ErrorCode.ELECTION_NOT_NEEDED
    assert requested_election(state(NO_LEADER, (1,)), unclean, {2, 3}) == Election(2, (2,))  # outside the ISR
    assert requested_election(state(1, (1, 3)), unclean, {2, 3}) == Election(
        3, (3,)
    )  # dead leader: clean first
    assert (
        requested_election(state(NO_LEADER, (1,)), unclean, set()) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
