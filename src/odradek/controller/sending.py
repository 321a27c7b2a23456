"""How the controller tells the brokers: LeaderAndIsr, UpdateMetadata and StopReplica through its
channel (the sending side of Kafka's ControllerChannelManager / ControllerBrokerRequestBatch).

Owns which live brokers get which request for a set of partition states, and what becomes of their
answers. The requests themselves are built by channel.py.

Behaviour:
- LeaderAndIsr goes to every live broker holding a replica of the partitions sent (with the live
  leaders among them); a full one (`full`) goes to a broker even with none. UpdateMetadata goes to
  every live broker. StopReplica goes to the one broker named; its callers pick the live ones.
- Requests to brokers are queued on the channel and never waited for (Kafka's controller
  enqueues and moves on): a broker cut off but still registered, or one that leaves with requests
  outstanding, delays no event and no other broker; its answers, refusals and departure are logged
  when they come, and the membership change that follows covers a broker that left.

Callers: the controller's life cycle (controller/controller.py) and the handlers of each concern.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.controller.channel import (
    TopicStates,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import PartitionState
from odradek.controller.store import StoredTopic
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NO_EPOCH = -1  # StopReplica's leader epoch that the broker does not check


async def send_leader_and_isr(
    ctx: ControllerContext,
    topics: TopicStates,
    new_partitions: frozenset[tuple[str, int]] = frozenset(),
    full: bool = False,
) -> None:
    """LeaderAndIsr to every live broker holding a replica of some of `topics`."""
    for broker_id in sorted(ctx.live_brokers):
        mine = for_replica(topics, broker_id)
        if not mine and not full:
            continue
        await send_leader_and_isr_to(ctx, broker_id, mine, new_partitions, full)


async def send_leader_and_isr_to(
    ctx: ControllerContext,
    broker_id: int,
    mine: TopicStates,
    new_partitions: frozenset[tuple[str, int]] = frozenset(),
    full: bool = False,
) -> None:
    leaders = {s.leader for _, states in mine.values() for s in states.values()}
    live_leaders = [ctx.live_brokers[b] for b in sorted(leaders) if b in ctx.live_brokers]
    request = leader_and_isr_request(ctx.identity(), mine, live_leaders, new_partitions, full)
    await _post(broker_id, "LeaderAndIsr", ctx.channel.leader_and_isr(broker_id, request))


async def send_update_metadata(ctx: ControllerContext, topics: TopicStates) -> None:
    request = update_metadata_request(ctx.identity(), topics, ctx.live_brokers.values())
    for broker_id in sorted(ctx.live_brokers):
        await _post(broker_id, "UpdateMetadata", ctx.channel.update_metadata(broker_id, request))


async def send_stop_replica(
    ctx: ControllerContext, broker_id: int, partitions: Mapping[str, Mapping[int, int]], delete: bool
) -> None:
    """StopReplica to `broker_id` for `partitions` (topic -> partition -> leader epoch)."""
    request = stop_replica_request(ctx.identity(), partitions, delete=delete)
    await _post(broker_id, "StopReplica", ctx.channel.stop_replica(broker_id, request))


async def _post(broker_id: int, api: str, answer: asyncio.Future[Any]) -> None:
    """Leave the answer to a request the channel has queued to arrive in its own time (it is
    logged then), and yield once, so other work runs between requests."""
    answer.add_done_callback(functools.partial(_note_answer, broker_id, api))
    await asyncio.sleep(0)


def _note_answer(broker_id: int, api: str, answer: asyncio.Future[Any]) -> None:
    """Log how a broker answered the controller's `api` request, when it was not plain success."""
    if answer.cancelled():
        return
    failure = answer.exception()
    if failure is None:
        if answer.result().error_code:
            log.warning("Broker %d refused %s: error %d", broker_id, api, answer.result().error_code)
    elif isinstance(failure, KafkaError) and failure.code == ErrorCode.BROKER_NOT_AVAILABLE:
        log.info("Broker %d left before answering the controller's %s: %s", broker_id, api, failure)
    else:
        log.error("Controller's %s to broker %d failed", api, broker_id, exc_info=failure)


def states_of(topics: Iterable[StoredTopic]) -> TopicStates:
    return {t.name: (t.topic_id, dict(t.states)) for t in topics}


def for_replica(topics: TopicStates, broker_id: int) -> TopicStates:
    """The partitions of `topics` that have a replica on `broker_id`."""
    mine: dict[str, tuple[uuid.UUID, Mapping[int, PartitionState]]] = {}
    for name, (topic_id, states) in topics.items():
        held = {index: s for index, s in states.items() if broker_id in s.replicas}
        if held:
            mine[name] = (topic_id, held)
    return mine
