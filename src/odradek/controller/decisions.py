"""The controller's decisions, as pure functions over state: replica assignment, leader election,
the partition state that follows a decision, and the per-broker partition cap.

Owns Kafka's rules (ZooKeeper-mode controller, see /work/shared/kafka-zk-layout.md):
- Replica assignment (Kafka's `assignReplicasToBrokers`): brokers sorted by id; a start index and a
  replica shift drawn in [0, n) (fixed by the caller in tests). Partition p's first replica is
  broker (p + start) % n; the shift grows by one every n partitions; the j-th further replica is
  (first + 1 + (shift + j) % (n - 1)) % n. Rack-aware when every broker has a rack: brokers are
  first interleaved by rack (racks sorted, brokers of a rack sorted by id), and a further replica
  goes only to a rack, and a broker, not yet used by the partition while such ones remain. Some
  brokers with a rack and some without: INVALID_REPLICA_ASSIGNMENT, as Kafka refuses.
- New partition: leader = first live replica of the assignment, ISR = the live replicas, leader
  epoch 0, partition epoch 0 (no live replica: NoLeader, empty ISR).
- Offline partition: the first replica in assignment order that is alive and in the ISR, the ISR
  losing dead members; none: with unclean election allowed the first live replica and ISR = [it],
  otherwise NoLeader (-1) and the ISR as it was.
- Preferred replica: the first replica of the assignment, only if alive and in the ISR.
- Election asked by an admin (ElectLeaders, KIP-460; `requested_election`): PREFERRED moves
  leadership to the preferred replica (ELECTION_NOT_NEEDED when it already leads,
  PREFERRED_LEADER_NOT_AVAILABLE when it is not alive or not in the ISR); UNCLEAN only touches a
  partition without a live leader (else ELECTION_NOT_NEEDED) and runs the offline election with
  unclean election allowed whatever the topic says (ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica
  is alive).
- Auto leader rebalance (auto.leader.rebalance.enable): per broker, the share of the partitions it
  is preferred for that another broker leads; above leader.imbalance.per.broker.percentage, each of
  those partitions gets a preferred replica election.
- Controlled shutdown: the first live ISR member not shutting down; shutting brokers leave the ISR
  (no such member: no change).
- ISR change asked by a leader (AlterPartition): refused with FENCED_LEADER_EPOCH when the leader
  epoch is not the current one or the asker does not lead, INVALID_UPDATE_VERSION when the
  partition epoch is not the current one, INELIGIBLE_REPLICA when the new ISR names a broker that is
  not a live replica, adds a broker in controlled shutdown, or leaves the leader out; accepted, the
  leader epoch stays and only the partition epoch moves (the store's version).
- Every decision that changes leader or ISR moves leader epoch and partition epoch by one and stamps
  the controller epoch (`next_state`).
- max.broker.partitions (KIP-578's proposed name): a request that would put more replicas on a
  broker than the cap is refused whole with POLICY_VIOLATION, before anything is written.

Invariants: no I/O, no clock, no randomness except through the `Random` the caller passes.
Callers: the controller's event handlers (controller/membership.py, topics.py, isr_changes.py,
controlled_shutdown.py, elections.py, partition_reassignments.py) and the admin manager
(controller/admin.py); unit-tested in tests/controller/test_decisions.py.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from odradek.controller.metadata import NO_LEADER, Assignments, PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class BrokerPlacement:
    """What assignment needs to know about a live broker: its id and rack."""

    broker_id: int
    rack: str | None = None


# -- replica assignment ---------------------------------------------------------------------------


def assign_replicas(
    brokers: Sequence[BrokerPlacement],
    num_partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    rng: random.Random | None = None,
    start_index: int | None = None,
    replica_shift: int | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's assignment of `num_partitions` partitions from `first_partition` (see the module doc)."""
    if num_partitions < 1:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor < 1:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    racks = {b.rack for b in brokers}
    if None in racks and len(racks) > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    rng = rng or random.Random()
    n = len(brokers)
    start = rng.randrange(n) if start_index is None else start_index
    shift = rng.randrange(n) if replica_shift is None else replica_shift
    if None in racks:
        ordered = sorted(b.broker_id for b in brokers)
        return _assign_rack_unaware(
            ordered, num_partitions, replication_factor, first_partition, start, shift
        )
    return _assign_rack_aware(brokers, num_partitions, replication_factor, first_partition, start, shift)


def _further_replica(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _assign_rack_unaware(
    brokers: list[int], count: int, rf: int, first_partition: int, start: int, shift: int
) -> dict[int, tuple[int, ...]]:
    n = len(brokers)
    assignment: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + count):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        further = [brokers[_further_replica(first, shift, j, n)] for j in range(rf - 1)]
        assignment[p] = (brokers[first], *further)
    return assignment


def rack_alternated(brokers: Sequence[BrokerPlacement]) -> list[BrokerPlacement]:
    """Brokers interleaved by rack: the first of each rack (racks sorted), then the second, ..."""
    by_rack: dict[str, list[BrokerPlacement]] = {}
    for broker in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(str(broker.rack), []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns))) for column in columns if i < len(column)]


def _assign_rack_aware(
    brokers: Sequence[BrokerPlacement], count: int, rf: int, first_partition: int, start: int, shift: int
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated(brokers)
    n, num_racks = len(arranged), len({b.rack for b in arranged})
    assignment: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + count):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        chosen = [arranged[first]]
        k = 0
        while len(chosen) < rf:
            candidate = arranged[_further_replica(first, shift * num_racks, k, n)]
            k += 1
            used_racks = {b.rack for b in chosen}
            rack_ok = candidate.rack not in used_racks or len(used_racks) == num_racks
            broker_ok = candidate not in chosen or len(chosen) == n
            if rack_ok and broker_ok:
                chosen.append(candidate)
        assignment[p] = tuple(b.broker_id for b in chosen)
    return assignment


def check_assignments(
    assignments: Assignments, known_brokers: Collection[int], first: int = 0
) -> dict[int, tuple[int, ...]]:
    """An explicit assignment's checks (INVALID_REPLICA_ASSIGNMENT): consecutive partitions from
    `first`, non-empty replica lists without duplicates, known brokers, one replication factor."""
    indexes = sorted(assignments)
    if indexes != list(range(first, first + len(indexes))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence",
        )
    for p in indexes:
        replicas = tuple(assignments[p])
        if not replicas or len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate or empty replica assignment for partition {p}: {list(replicas)}",
            )
        unknown = [b for b in replicas if b not in known_brokers]
        if unknown:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) {unknown} in partition {p}"
            )
    if len({len(assignments[p]) for p in indexes}) > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas"
        )
    return {p: tuple(assignments[p]) for p in indexes}


# -- partition cap --------------------------------------------------------------------------------


def replicas_per_broker(assignments: Iterable[Sequence[int]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for replicas in assignments:
        for broker in replicas:
            counts[broker] = counts.get(broker, 0) + 1
    return counts


def check_broker_partition_cap(
    current: Mapping[int, int], added: Mapping[int, Sequence[int]], max_broker_partitions: int
) -> None:
    """POLICY_VIOLATION if `added` would put more than `max_broker_partitions` replicas on a broker
    (`current`: replicas each broker holds now)."""
    for broker, extra in sorted(replicas_per_broker(added.values()).items()):
        total = current.get(broker, 0) + extra
        if total > max_broker_partitions:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"The request would put {total} partition replicas on broker {broker} "
                f"({current.get(broker, 0)} now), more than max.broker.partitions={max_broker_partitions}.",
            )


def check_partition_count_fits(count: int, live_brokers: int, max_broker_partitions: int) -> None:
    """POLICY_VIOLATION, before any assignment is computed or walked, when `count` new partitions
    cannot fit under the cap even spread evenly (each has at least one replica), so a request for
    millions of partitions costs no more than its size."""
    if count > max_broker_partitions * max(live_brokers, 1):
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"The request asks for {count} partitions, more than max.broker.partitions="
            f"{max_broker_partitions} allows on {max(live_brokers, 1)} broker(s).",
        )


# -- leader election ------------------------------------------------------------------------------


def new_partition_state(
    replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> PartitionState:
    """A new partition: leader = first live replica, ISR = the live replicas, epochs 0."""
    isr = tuple(r for r in replicas if r in live)
    return PartitionState(
        leader=isr[0] if isr else NO_LEADER,
        leader_epoch=0,
        replicas=tuple(replicas),
        isr=isr,
        controller_epoch=controller_epoch,
        partition_epoch=0,
    )


@dataclass(frozen=True, slots=True)
class Election:
    """An election's outcome: the new leader (NO_LEADER when none qualifies) and the new ISR."""

    leader: int
    isr: tuple[int, ...]


def offline_election(state: PartitionState, live: Collection[int], unclean_allowed: bool) -> Election:
    """Kafka's offline partition election (see the module doc)."""
    live_isr = tuple(r for r in state.isr if r in live)
    leader = next((r for r in state.replicas if r in live and r in state.isr), None)
    if leader is not None:
        return Election(leader, live_isr)
    if unclean_allowed:
        unclean = next((r for r in state.replicas if r in live), None)
        if unclean is not None:
            return Election(unclean, (unclean,))
    return Election(NO_LEADER, state.isr)


def preferred_election(state: PartitionState, live: Collection[int]) -> Election | None:
    """The preferred replica, if it is alive and in the ISR; None otherwise."""
    preferred = state.replicas[0] if state.replicas else None
    if preferred is None or preferred not in live or preferred not in state.isr:
        return None
    return Election(preferred, state.isr)


class ElectionType(IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


def requested_election(
    state: PartitionState, election_type: ElectionType, live: Collection[int]
) -> Election | ErrorCode:
    """An admin's election of `election_type` for one partition: the election, or why there is none
    (see the module doc)."""
    if election_type is ElectionType.PREFERRED:
        if state.replicas and state.leader == state.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED
        return preferred_election(state, live) or ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    if state.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED
    election = offline_election(state, live, unclean_allowed=True)
    return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if election.leader == NO_LEADER else election


def imbalanced_partitions(
    states: Mapping[tuple[str, int], PartitionState], live: Collection[int], imbalance_percentage: int
) -> dict[tuple[str, int], Election]:
    """Preferred replica elections for the brokers whose imbalance passes `imbalance_percentage`."""
    preferred: dict[int, list[tuple[str, int]]] = {}
    for key, state in states.items():
        if state.replicas:
            preferred.setdefault(state.replicas[0], []).append(key)
    elections: dict[tuple[str, int], Election] = {}
    for keys in preferred.values():
        not_led = [key for key in keys if states[key].leader != states[key].replicas[0]]
        if len(not_led) * 100 <= imbalance_percentage * len(keys):
            continue
        for key in not_led:
            election = preferred_election(states[key], live)
            if election is not None:
                elections[key] = election
    return elections


def controlled_shutdown_election(
    state: PartitionState, live: Collection[int], shutting_down: Collection[int]
) -> Election | None:
    """The first live ISR member not shutting down, the shutting brokers leaving the ISR; None when
    no such member exists (the partition keeps its leader until the broker goes)."""
    isr = tuple(r for r in state.isr if r not in shutting_down)
    leader = next((r for r in state.replicas if r in isr and r in live), None)
    return None if leader is None else Election(leader, isr)


def isr_change(
    state: PartitionState,
    asker: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int] = (),
) -> ErrorCode | PartitionState:
    """A leader's AlterPartition for one partition: the error, or the state to write (the same
    state when nothing changes). Members already in the ISR may be shutting down; new ones not. A
    request asking for the ISR the partition already has is answered with the current state whatever
    its partition epoch (Kafka checks this before the epoch): the leader's retry of a change that
    was written but whose answer it never got, which must learn the new epoch, not be refused
    INVALID_UPDATE_VERSION for ever."""
    if state.leader != asker or leader_epoch != state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    isr = tuple(new_isr)
    if isr == state.isr:
        return state
    if partition_epoch != state.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if asker not in isr or any(r not in state.replicas or r not in live for r in isr):
        return ErrorCode.INELIGIBLE_REPLICA
    if any(r in shutting_down and r not in state.isr for r in isr):
        return ErrorCode.INELIGIBLE_REPLICA
    return replace(state, isr=isr, partition_epoch=state.partition_epoch + 1)


def next_state(state: PartitionState, election: Election, controller_epoch: int) -> PartitionState:
    """The LeaderAndIsr after a decision: new leader and ISR, leader and partition epochs + 1."""
    return replace(
        state,
        leader=election.leader,
        isr=election.isr,
        leader_epoch=state.leader_epoch + 1,
        partition_epoch=state.partition_epoch + 1,
        controller_epoch=controller_epoch,
    )
