"""Partition reassignment as the controller runs it (AlterPartitionReassignments,
ListPartitionReassignments; KIP-455 as Kafka's ZooKeeper-mode controller runs it in
onPartitionReassignment).

Owns the `ReassignmentsAsked` and `ReassignmentsResumed` events: starting, replacing, cancelling
and finishing reassignments, and listing the ones in progress. The rules (targets, adding and
removing replicas, completion) are reassignment.py's.

Behaviour:
- Partition reassignment (AlterPartitionReassignments, `Controller.alter_partition_reassignments`):
  handled in turn with the other events; each partition is checked and its new assignment computed
  by `reassignment`. One not complete yet (a target replica outside the ISR): the full replicas with
  the adding and removing ones are written to the store, the leader epoch moves (leader and ISR kept
  within the replicas) and LeaderAndIsr goes to every replica, so the new ones start fetching;
  replicas a replaced reassignment no longer needs get StopReplica (delete). Once every target
  replica is in the ISR (checked after every accepted AlterPartition and when a reassignment is
  asked): a leader from the target if the current one is not in it, replicas and ISR shrunk to the
  target (leader epoch + 1, written first), the final assignment written, LeaderAndIsr to the
  target, StopReplica (delete) to the removed replicas. UpdateMetadata to every live broker follows
  each step. A null target cancels: the target becomes the original replicas. With
  allow_replication_factor_change false (v1+), a valid target whose size is not the partition's
  replication factor before any reassignment in progress (its original replicas) is refused with
  INVALID_REPLICATION_FACTOR, as Kafka 4.4 answers; the answer echoes the flag. A new controller
  finishes the reassignments it finds complete at start-up (the others were sent in its full
  LeaderAndIsr and complete as their ISR grows).
- `Controller.list_partition_reassignments` answers from the store (`list_in_progress`): every partition being
  reassigned (or the ones asked for that are) with its replicas, adding and removing replicas.

Callers: `Controller` (controller/controller.py): its event queue and
`list_partition_reassignments`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from odradek.controller import decisions, reassignment
from odradek.controller.channel import TopicStates
from odradek.controller.context import ControllerContext
from odradek.controller.sending import (
    NO_EPOCH,
    send_leader_and_isr,
    send_stop_replica,
    send_update_metadata,
)
from odradek.controller.store import ReplicaAssignment
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from odradek.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from odradek.tasks import answer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReassignmentsAsked:
    """An AlterPartitionReassignments, answered through `answer`."""

    request: AlterPartitionReassignmentsRequest
    answer: asyncio.Future[AlterPartitionReassignmentsResponse]

    def refuse(self, code: ErrorCode) -> None:
        answer(self.answer, AlterPartitionReassignmentsResponse(error_code=code))


@dataclass(frozen=True, slots=True)
class ReassignmentsResumed:
    """A new controller's check of the reassignments it found in the store."""


async def alter_reassignments(ctx: ControllerContext, event: ReassignmentsAsked) -> None:
    responses = []
    allow_rf_change = event.request.allow_replication_factor_change
    for topic in event.request.topics:
        answered = []
        for asked in topic.partitions:
            error = await _reassign(ctx, topic.name, asked.partition_index, asked.replicas, allow_rf_change)
            answered.append(
                AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                    partition_index=asked.partition_index,
                    error_code=ErrorCode.NONE if error is None else error.code,
                    error_message=None if error is None else error.message,
                )
            )
        responses.append(
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                name=topic.name, partitions=answered
            )
        )
    answer(
        event.answer,
        AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=allow_rf_change, responses=responses
        ),
    )


async def complete_finished_reassignments(ctx: ControllerContext) -> None:
    """Finish every reassignment whose target replicas are all in the ISR."""
    for (name, index), assigned in _in_progress(ctx).items():
        state = ctx.store.topics()[name].states.get(index)
        if state is not None and reassignment.is_complete(assigned, state.isr):
            await _finish_reassignment(ctx, name, index, assigned.replicas, assigned.target)


def list_in_progress(
    ctx: ControllerContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """The reassignments in progress (all, or those of the partitions asked for)."""
    in_progress = _in_progress(ctx)
    if request.topics is not None:
        asked = {(t.name, p) for t in request.topics for p in t.partition_indexes}
        in_progress = {key: a for key, a in in_progress.items() if key in asked}
    return _reassignments_listed(in_progress)


async def _reassign(
    ctx: ControllerContext, name: str, index: int, replicas: list[int] | None, allow_rf_change: bool = True
) -> KafkaError | None:
    """Start, replace or cancel one partition's reassignment; the error to answer, if any."""
    topic = ctx.store.topics().get(name)
    if topic is None or topic.marked_for_deletion or index not in topic.states:
        return KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} partition {index} does not exist."
        )
    current = topic.replica_assignment(index)
    try:
        target = reassignment.target_of(current, replicas, ctx.live_brokers)
    except KafkaError as exc:
        return exc
    if not allow_rf_change and replicas is not None and len(target) != len(current.original):
        return KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {len(current.original)} to {len(target)}",
        )
    if target == current.replicas and not current.being_reassigned:
        return None
    moving = reassignment.reassign_to(current, target)
    if reassignment.is_complete(moving, topic.states[index].isr):
        await _finish_reassignment(ctx, name, index, current.replicas, target)
    else:
        await _start_reassignment(ctx, name, index, current, moving)
    return None


async def _start_reassignment(
    ctx: ControllerContext, name: str, index: int, current: ReplicaAssignment, moving: ReplicaAssignment
) -> None:
    """Kafka's phase A: the full replicas stored, LeaderAndIsr to all of them (new epoch)."""
    await ctx.store.write_replica_assignments(name, {index: moving}, ctx.epoch)
    changed = await _move_partition(ctx, name, index, moving.replicas)
    unneeded = [r for r in current.replicas if r not in moving.replicas]
    await _delete_replicas(ctx, name, index, unneeded, changed)
    await send_update_metadata(ctx, changed)
    log.info(
        "Reassignment of %s-%d to %s started: replicas %s, adding %s, removing %s",
        name,
        index,
        list(moving.target),
        list(moving.replicas),
        list(moving.adding),
        list(moving.removing),
    )


async def _finish_reassignment(
    ctx: ControllerContext, name: str, index: int, hosting: tuple[int, ...], target: tuple[int, ...]
) -> None:
    """Kafka's phase B: leader and ISR within `target` (state written first), the final
    assignment stored, StopReplica (delete) to the replicas `hosting` held that leave."""
    changed = await _move_partition(ctx, name, index, target)
    await ctx.store.write_replica_assignments(name, {index: ReplicaAssignment(target)}, ctx.epoch)
    await _delete_replicas(ctx, name, index, [r for r in hosting if r not in target], changed)
    await send_update_metadata(ctx, changed)
    log.info("Reassignment of %s-%d completed: replicas %s", name, index, list(target))


async def _move_partition(
    ctx: ControllerContext, name: str, index: int, replicas: tuple[int, ...]
) -> TopicStates:
    """Leader and ISR over `replicas` (leader epoch + 1), written, then LeaderAndIsr to them."""
    state = ctx.store.topics()[name].states[index]
    election = reassignment.election_over(state, replicas, ctx.eligible())
    moved = decisions.next_state(replace(state, replicas=replicas), election, ctx.epoch)
    changed = await ctx.write_states({name: {index: moved}})
    await send_leader_and_isr(ctx, changed)
    return changed


async def _delete_replicas(
    ctx: ControllerContext, name: str, index: int, brokers: Iterable[int], changed: TopicStates
) -> None:
    """StopReplica (delete) to the live `brokers`, at the partition's new leader epoch."""
    states = changed.get(name, (None, {}))[1]
    epoch = states[index].leader_epoch if index in states else NO_EPOCH
    for broker_id in brokers:
        if broker_id in ctx.live_brokers:
            await send_stop_replica(ctx, broker_id, {name: {index: epoch}}, delete=True)


def _in_progress(ctx: ControllerContext) -> dict[tuple[str, int], ReplicaAssignment]:
    return {
        (name, index): topic.replica_assignment(index)
        for name, topic in ctx.store.topics().items()
        if not topic.marked_for_deletion
        for index in topic.adding_replicas.keys() | topic.removing_replicas.keys()
    }


def _reassignments_listed(
    in_progress: Mapping[tuple[str, int], ReplicaAssignment],
) -> ListPartitionReassignmentsResponse:
    listed: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for (name, index), assigned in sorted(in_progress.items()):
        listed.setdefault(name, []).append(
            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=index,
                replicas=list(assigned.replicas),
                adding_replicas=list(assigned.adding),
                removing_replicas=list(assigned.removing),
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=[
            ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=name, partitions=partitions)
            for name, partitions in listed.items()
        ]
    )
