"""Partition reassignment's decisions (KIP-455, Kafka's ZooKeeper-mode controller), as pure
functions over a partition's `ReplicaAssignment` and state.

Owns Kafka's rules:
- A target (TRS) for a partition with replicas RS and original replicas ORS (RS less the replicas a
  reassignment in progress is adding): the new assignment is RS' = TRS + (ORS - TRS) in that order,
  adding AR = RS' - ORS, removing RR = RS' - TRS (Kafka's ReplicaAssignment.reassignTo). A new
  target replaces one in progress; the replicas it no longer needs are stopped at once.
- Cancellation (a null target): the target is ORS; a partition not being reassigned answers
  NO_REASSIGNMENT_IN_PROGRESS.
- A target is INVALID_REPLICA_ASSIGNMENT when empty, with duplicates or negative ids, or when a
  replica it adds is not a live broker (Kafka's message). A target equal to the replicas of a
  partition not being reassigned changes nothing.
- The reassignment is complete once every target replica is in the ISR.
- Leader and ISR over a new replica set: the ISR keeps its members in the set; the leader stays if
  it is in the set and eligible, else the first replica of the set that is eligible and in the ISR
  (Kafka's reassignPartitionLeaderElection), else none.

Invariants: no I/O; every function is deterministic in its arguments.
Callers: the controller (controller/partition_reassignments.py); unit-tested in
tests/controller/test_reassignment.py.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from odradek.controller.decisions import Election
from odradek.controller.metadata import NO_LEADER, PartitionState
from odradek.controller.store import ReplicaAssignment
from odradek.protocol.errors import ErrorCode, KafkaError


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """The assignment while moving from `current` to `target` (see the module doc)."""
    original = current.original
    replicas = tuple(dict.fromkeys((*target, *original)))
    return ReplicaAssignment(
        replicas,
        tuple(r for r in replicas if r not in original),
        tuple(r for r in replicas if r not in target),
    )


def target_of(
    current: ReplicaAssignment, replicas: Sequence[int] | None, live: Collection[int]
) -> tuple[int, ...]:
    """The target an AlterPartitionReassignments entry asks for (None: cancel), checked as Kafka
    checks it; raises KafkaError."""
    if replicas is None:
        if not current.being_reassigned:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress.")
        return current.original
    target = tuple(replicas)
    if not target:
        raise _invalid("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise _invalid(f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
    if any(r < 0 for r in target):
        raise _invalid(f"Invalid broker id in replica list: {list(target)}")
    adding = reassign_to(current, target).adding
    if not set(adding) <= set(live):
        raise _invalid(
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}"
        )
    return target


def is_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """Every target replica is in the ISR."""
    return set(assignment.target) <= set(isr)


def election_over(state: PartitionState, replicas: Sequence[int], eligible: Collection[int]) -> Election:
    """Leader and ISR of `state` once its replicas are `replicas` (see the module doc)."""
    isr = tuple(r for r in state.isr if r in replicas)
    if state.leader in replicas and state.leader in eligible:
        return Election(state.leader, isr)
    leader = next((r for r in replicas if r in eligible and r in isr), NO_LEADER)
    return Election(leader, isr)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
