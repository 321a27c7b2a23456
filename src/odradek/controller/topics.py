"""Topics appearing and going: the controller's answer to the store's topic events (Kafka's
onNewPartitionCreation, the NewPartition -> OnlinePartition transition, and its
TopicDeletionManager).

Owns bringing the partitions of a created topic, or partitions added to one, online, and the
deletion of a topic once it is requested.

Behaviour (Kafka's ZooKeeper-mode controller):
- Topic created / partitions added: each new partition gets `decisions.new_partition_state` (brokers
  shutting down are not elected); LeaderAndIsr (is_new) to its live replicas, UpdateMetadata to all.
- Deletion requested: StopReplica (delete, leader epoch EPOCH_DURING_DELETE) to the replicas,
  UpdateMetadata with leader LEADER_DURING_DELETE (brokers drop the partitions from their cache), then
  the topic is removed from the store. A new controller finishes the deletions it finds requested.

Callers: `Controller` (controller/controller.py), for the store's TOPIC_CREATED, PARTITIONS_ADDED
and DELETION_REQUESTED events.
"""

from __future__ import annotations

import logging

from odradek.controller import decisions
from odradek.controller.channel import TopicStates
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import EPOCH_DURING_DELETE, LEADER_DURING_DELETE, PartitionState
from odradek.controller.sending import send_leader_and_isr, send_stop_replica, send_update_metadata

log = logging.getLogger(__name__)


async def bring_new_partitions_online(ctx: ControllerContext, name: str) -> None:
    topic = ctx.store.topics().get(name)
    if topic is None or topic.marked_for_deletion:
        return
    new = {
        index: decisions.new_partition_state(replicas, ctx.eligible(), ctx.epoch)
        for index, replicas in topic.assignment.items()
        if index not in topic.states
    }
    if not new:
        return
    await ctx.store.write_partition_states({name: new}, ctx.epoch)
    states: TopicStates = {name: (topic.topic_id, new)}
    await send_leader_and_isr(ctx, states, new_partitions=frozenset((name, p) for p in new))
    await send_update_metadata(ctx, states)
    created = "created" if len(new) == len(topic.assignment) else "grew"
    log.info(
        "Topic %s %s: %d new partitions online (controller epoch %d)", name, created, len(new), ctx.epoch
    )


async def delete_topic(ctx: ControllerContext, name: str) -> None:
    topic = ctx.store.topics().get(name)
    if topic is None:
        return
    by_broker: dict[int, dict[int, int]] = {}
    for index, replicas in topic.assignment.items():
        for replica in replicas:
            by_broker.setdefault(replica, {})[index] = EPOCH_DURING_DELETE
    for broker_id, partitions in sorted(by_broker.items()):
        if broker_id in ctx.live_brokers:
            await send_stop_replica(ctx, broker_id, {name: partitions}, delete=True)
    gone = {
        index: PartitionState(LEADER_DURING_DELETE, 0, replicas, (), ctx.epoch, 0)
        for index, replicas in topic.assignment.items()
    }
    await send_update_metadata(ctx, {name: (topic.topic_id, gone)})
    await ctx.store.remove_topic(name, ctx.epoch)
    log.info("Topic %s deleted (%d partitions)", name, len(topic.assignment))
