"""Controlled shutdown asked by a broker (ControlledShutdown; Kafka's
KafkaController.doControlledShutdown).

Owns the `ControlledShutdownAsked` event: moving leadership off the broker, taking it out of the
ISRs it follows, and answering it with what it still leads. The set of brokers shutting down it
fills is shared (`ControllerContext.shutting_down`); a membership change empties it of brokers gone.

Behaviour:
- Controlled shutdown asked by a broker (ControlledShutdown, `Controller.controlled_shutdown`):
  handled in turn with the other events; the broker is marked shutting down until it leaves the live
  brokers. Every partition it leads with another live ISR member not shutting down gets
  `decisions.controlled_shutdown_election`; every partition it follows under a live leader loses it
  from the ISR (both: leader epoch + 1); the states are written fenced, then LeaderAndIsr goes to
  the partitions' live replicas and UpdateMetadata to every live broker, StopReplica (logs kept) to
  the broker for the partitions it now only follows (it stops fetching them), and the broker is answered
  with the partitions it still leads (remaining_partitions). Partitions with one replica are left
  alone and not counted, as Kafka does: they cannot move. A broker that is not live answers
  BROKER_NOT_AVAILABLE, a stale broker epoch STALE_BROKER_EPOCH, a non-controller NOT_CONTROLLER.
  Brokers shutting down are never elected leader (new partitions, offline elections) and never
  added to an ISR (AlterPartition: INELIGIBLE_REPLICA).

Callers: `Controller` (controller/controller.py): its event queue.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from odradek.controller import decisions
from odradek.controller.channel import TopicStates
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import PartitionState
from odradek.controller.sending import (
    NO_EPOCH,
    send_leader_and_isr,
    send_stop_replica,
    send_update_metadata,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from odradek.tasks import answer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControlledShutdownAsked:
    """A broker's ControlledShutdown, answered through `answer`."""

    request: ControlledShutdownRequest
    answer: asyncio.Future[ControlledShutdownResponse]

    def refuse(self, code: ErrorCode) -> None:
        answer(self.answer, ControlledShutdownResponse(error_code=code))


async def shut_down_broker(ctx: ControllerContext, event: ControlledShutdownAsked) -> None:
    broker_id, broker_epoch = event.request.broker_id, event.request.broker_epoch
    if broker_id not in ctx.live_brokers:
        answer(event.answer, ControlledShutdownResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE))
        return
    if ctx.stale(broker_id, broker_epoch):
        answer(event.answer, ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
        return
    ctx.shutting_down.add(broker_id)
    moved = _without_shutting_broker(ctx, broker_id)
    if moved:
        changed = await ctx.write_states(moved)
        await send_leader_and_isr(ctx, changed)
        await send_update_metadata(ctx, changed)
        await _stop_following(ctx, broker_id, changed)
    remaining = _still_led_by(ctx, broker_id)
    log.info(
        "Controlled shutdown of broker %d: %d partitions changed, %d still led by it",
        broker_id,
        sum(len(states) for states in moved.values()),
        len(remaining),
    )
    answer(event.answer, ControlledShutdownResponse(remaining_partitions=remaining))


async def _stop_following(ctx: ControllerContext, broker_id: int, changed: TopicStates) -> None:
    """StopReplica (logs kept) to the shutting broker for the partitions it now only follows, so
    it stops fetching and no leader keeps asking to put it back in an ISR (Kafka's
    OfflineReplica transition). Leader epoch -1: not checked against what it holds."""
    following = {
        name: {index: NO_EPOCH for index, state in states.items() if state.leader != broker_id}
        for name, (_, states) in changed.items()
    }
    following = {name: partitions for name, partitions in following.items() if partitions}
    if following:
        await send_stop_replica(ctx, broker_id, following, delete=False)


def _without_shutting_broker(ctx: ControllerContext, broker_id: int) -> dict[str, dict[int, PartitionState]]:
    """The new states of the partitions with more than one replica a controlled shutdown changes:
    leadership moved off `broker_id`, or `broker_id` out of a live leader's ISR."""
    changed: dict[str, dict[int, PartitionState]] = {}
    for name, topic in ctx.store.topics().items():
        if topic.marked_for_deletion:
            continue
        for index, state in topic.states.items():
            if len(state.replicas) < 2:
                continue
            election = _shutdown_election(ctx, state, broker_id)
            if election is not None:
                changed.setdefault(name, {})[index] = decisions.next_state(state, election, ctx.epoch)
    return changed


def _shutdown_election(
    ctx: ControllerContext, state: PartitionState, broker_id: int
) -> decisions.Election | None:
    if state.leader == broker_id:
        return decisions.controlled_shutdown_election(state, ctx.live_brokers.keys(), ctx.shutting_down)
    if broker_id in state.isr and state.leader in ctx.live_brokers:
        return decisions.Election(state.leader, tuple(r for r in state.isr if r != broker_id))
    return None


def _still_led_by(
    ctx: ControllerContext, broker_id: int
) -> list[ControlledShutdownResponse.RemainingPartition]:
    return [
        ControlledShutdownResponse.RemainingPartition(topic_name=name, partition_index=index)
        for name, topic in sorted(ctx.store.topics().items())
        if not topic.marked_for_deletion
        for index, state in sorted(topic.states.items())
        if state.leader == broker_id and len(state.replicas) > 1
    ]
