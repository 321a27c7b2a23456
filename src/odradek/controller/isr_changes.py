"""ISR changes asked by partition leaders (AlterPartition; Kafka's ZooKeeper-mode
KafkaController.processAlterPartition).

Owns the `IsrChangeAsked` event: checking each partition's change, writing the accepted states and
answering the leader.

Behaviour:
- ISR change asked by a partition's leader (AlterPartition, `Controller.alter_partition`): handled in
  turn with the other events; each partition is checked by `decisions.isr_change` (leader and leader
  epoch, partition epoch, live replicas), the accepted states are written (the store's conditional
  write moves the partition epoch), the leader gets its answer, then UpdateMetadata with the changed
  partitions goes to every live broker (Kafka's ZooKeeper-mode AlterPartition: no LeaderAndIsr, the
  leader epoch stays). A request from a broker that is not live, or with a broker epoch other than
  its registration's (-1 included, as Kafka checks), is STALE_BROKER_EPOCH; a broker that is not
  (or no longer) controller answers NOT_CONTROLLER. A broker shutting down is never added to an ISR
  (INELIGIBLE_REPLICA).
- After every accepted change the controller finishes the reassignments now complete
  (partition_reassignments.py).

Callers: `Controller` (controller/controller.py): its event queue.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from odradek.controller import decisions
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import PartitionState
from odradek.controller.sending import send_update_metadata
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from odradek.tasks import answer

log = logging.getLogger(__name__)

IsrDecision = ErrorCode | PartitionState


@dataclass(frozen=True, slots=True)
class IsrChangeAsked:
    """A leader's AlterPartition, answered through `answer`."""

    request: AlterPartitionRequest
    answer: asyncio.Future[AlterPartitionResponse]

    def refuse(self, code: ErrorCode) -> None:
        answer(self.answer, AlterPartitionResponse(error_code=code))


async def change_isr(ctx: ControllerContext, event: IsrChangeAsked) -> None:
    request = event.request
    stale = ctx.stale(request.broker_id, request.broker_epoch, required=True)
    if request.broker_id not in ctx.live_brokers or stale:
        answer(event.answer, AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
        return
    decided = _decide_isr_changes(ctx, request)
    writes: dict[str, dict[int, PartitionState]] = {}
    topics = ctx.store.topics()
    for (name, index), decision in decided.items():
        if isinstance(decision, PartitionState) and decision != topics[name].states[index]:
            writes.setdefault(name, {})[index] = replace(decision, controller_epoch=ctx.epoch)
    changed = await ctx.write_states(writes) if writes else {}
    answer(event.answer, _isr_response(ctx, decided))
    if changed:
        for name, (_, states) in changed.items():
            for index, state in states.items():
                log.info(
                    "ISR of %s-%d is now %s (asked by its leader %d, partition epoch %d)",
                    name,
                    index,
                    list(state.isr),
                    request.broker_id,
                    state.partition_epoch,
                )
        await send_update_metadata(ctx, changed)


def _decide_isr_changes(
    ctx: ControllerContext, request: AlterPartitionRequest
) -> dict[tuple[str, int], IsrDecision]:
    topics = ctx.store.topics()
    by_id = {t.topic_id: t for t in topics.values()}
    decided: dict[tuple[str, int], IsrDecision] = {}
    for asked in request.topics:
        topic = topics.get(asked.topic_name) if asked.topic_name else by_id.get(asked.topic_id)
        for p in asked.partitions:
            name = topic.name if topic is not None else asked.topic_name or str(asked.topic_id)
            state = None
            if topic is not None and not topic.marked_for_deletion:
                state = topic.states.get(p.partition_index)
            if state is None:
                decided[(name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            isr = [b.broker_id for b in p.new_isr_with_epochs] or p.new_isr
            decided[(name, p.partition_index)] = decisions.isr_change(
                state,
                request.broker_id,
                p.leader_epoch,
                p.partition_epoch,
                isr,
                ctx.live_brokers,
                ctx.shutting_down,
            )
    return decided


def _isr_response(
    ctx: ControllerContext, decided: Mapping[tuple[str, int], IsrDecision]
) -> AlterPartitionResponse:
    """Each partition's answer: its stored state when the change (or no change) holds there."""
    topics = ctx.store.topics()
    answered: dict[str, AlterPartitionResponse.TopicData] = {}
    for (name, index), decision in decided.items():
        topic = topics.get(name)
        entry = answered.setdefault(
            name,
            AlterPartitionResponse.TopicData(
                topic_name=name, topic_id=topic.topic_id if topic else uuid.UUID(int=0)
            ),
        )
        stored = topic.states.get(index) if topic is not None else None
        if isinstance(decision, PartitionState) and (stored is None or stored.isr != decision.isr):
            decision = ErrorCode.INVALID_UPDATE_VERSION
        if isinstance(decision, ErrorCode) or stored is None:
            code = decision if isinstance(decision, ErrorCode) else ErrorCode.INVALID_UPDATE_VERSION
            entry.partitions.append(
                AlterPartitionResponse.PartitionData(partition_index=index, error_code=code)
            )
            continue
        entry.partitions.append(
            AlterPartitionResponse.PartitionData(
                partition_index=index,
                leader_id=stored.leader,
                leader_epoch=stored.leader_epoch,
                isr=list(stored.isr),
                partition_epoch=stored.partition_epoch,
            )
        )
    return AlterPartitionResponse(topics=list(answered.values()))
