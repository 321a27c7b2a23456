"""Broker membership: the controller's answer to brokers joining and leaving, and the offline
elections it makes (Kafka's onBrokerStartup / onBrokerFailure, the OfflinePartition and
OfflineReplica transitions of its partition and replica state machines).

Owns the `BrokersChanged` event and every partition state a change of the live brokers makes, at a
membership change and when a controller starts.

Behaviour (Kafka's ZooKeeper-mode controller):
- Brokers changed (ZooKeeper mode: the children of `/brokers/ids`): the live brokers are replaced,
  and the channel made to reach exactly them in the same step (`ControllerContext.set_live_brokers`);
  a broker whose id stayed but whose broker epoch changed (it registered again between two reads of
  the children) is handled as one that left and then joined (Kafka's bounced brokers);
  every partition whose leader is no longer live, and every leaderless partition with a replica on a
  broker that joined, gets an offline election, a partition whose live leader has dead brokers in
  its ISR loses them (leader epoch + 1, as Kafka's OfflineReplica transition); the states are
  written fenced, then UpdateMetadata with everything goes to every live broker, LeaderAndIsr for
  all its partitions to a broker that joined and for the changed partitions to their live replicas
  (Kafka's onBrokerStartup / onBrokerFailure).
- An offline election is unclean only if unclean.leader.election.enable (topic config over the
  broker's default, `ControllerContext.unclean_default`); an unclean leader is logged as a warning.
  Brokers shutting down are never elected.
- At startup (`startup_states`), with `reelect_live_leaders`: a single node re-elects every partition
  (its one broker is new, so leader epochs move on); a ZooKeeper-mode controller taking over
  re-elects only partitions whose leader is not live, as Kafka's failover does. Partitions stored
  without a state (a crash between the topic write and the state write) are brought online as new.

Callers: `Controller` (controller/controller.py): its startup and its event queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.controller import decisions
from odradek.controller.channel import TopicStates
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import BrokerInfo, PartitionState
from odradek.controller.sending import (
    for_replica,
    send_leader_and_isr,
    send_leader_and_isr_to,
    send_update_metadata,
    states_of,
)
from odradek.controller.store import StoredTopic

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The live brokers now (ZooKeeper mode's `/brokers/ids` watch), with their broker epochs
    (the registrations' czxids; empty when unknown)."""

    live: tuple[BrokerInfo, ...]
    epochs: Mapping[int, int] = field(default_factory=dict)


async def on_brokers_changed(ctx: ControllerContext, event: BrokersChanged) -> None:
    restarted = {b for b, epoch in event.epochs.items() if ctx.broker_epochs.get(b, epoch) != epoch}
    if restarted:  # Kafka's bounced brokers: each fails (leaders move, it leaves ISRs), then starts
        survivors = tuple(b for b in ctx.live_brokers.values() if b.broker_id not in restarted)
        await _apply(ctx, survivors, ctx.broker_epochs)
    await _apply(ctx, event.live, event.epochs)


async def _apply(ctx: ControllerContext, live: tuple[BrokerInfo, ...], epochs: Mapping[int, int]) -> None:
    change = await ctx.set_live_brokers(live, epochs)
    joined, left = change.joined, change.left
    if not joined and not left:
        return
    log.info(
        "Live brokers are now %s (joined %s, left %s)",
        sorted(ctx.live_brokers),
        sorted(joined),
        sorted(left),
    )
    elected = _elect_offline(ctx, joined)
    if elected:
        await ctx.store.write_partition_states(elected, ctx.epoch)
    topics = {n: t for n, t in ctx.store.topics().items() if not t.marked_for_deletion}
    changed: TopicStates = {n: (topics[n].topic_id, elected[n]) for n in elected if n in topics}
    await send_update_metadata(ctx, states_of(topics.values()))
    everything = states_of(topics.values())
    for broker_id in sorted(joined):
        mine = for_replica(everything, broker_id)
        await send_leader_and_isr_to(ctx, broker_id, mine, full=True)
    await send_leader_and_isr(ctx, changed)
    if changed:
        log.info(
            "Membership change: %d partitions have a new leader or ISR",
            sum(len(s) for _, s in changed.values()),
        )


def startup_states(
    ctx: ControllerContext, topic: StoredTopic, reelect_live_leaders: bool
) -> dict[int, PartitionState]:
    """The states a starting controller writes for `topic` (see the module docstring)."""
    live = ctx.eligible()
    states: dict[int, PartitionState] = {}
    for index, replicas in topic.assignment.items():
        state = topic.states.get(index)
        if state is None:
            states[index] = decisions.new_partition_state(replicas, live, ctx.epoch)
        elif reelect_live_leaders:
            election = decisions.offline_election(state, live, ctx.unclean(topic))
            states[index] = decisions.next_state(state, election, ctx.epoch)
        else:
            changed = _after_membership(ctx, topic, index, state, set(live))
            if changed is not None:
                states[index] = changed
    return states


def _elect_offline(ctx: ControllerContext, joined: set[int]) -> dict[str, dict[int, PartitionState]]:
    """The new states of every partition a membership change changes."""
    elected: dict[str, dict[int, PartitionState]] = {}
    for name, topic in ctx.store.topics().items():
        if topic.marked_for_deletion:
            continue
        for index, state in topic.states.items():
            changed = _after_membership(ctx, topic, index, state, joined)
            if changed is not None:
                elected.setdefault(name, {})[index] = changed
    return elected


def _after_membership(
    ctx: ControllerContext, topic: StoredTopic, index: int, state: PartitionState, joined: set[int]
) -> PartitionState | None:
    """A partition's state over the current live brokers, None when unchanged: an offline
    election when its leader is not live (for a leaderless one, only when a broker holding a
    replica `joined`); the ISR without its dead members when the leader lives (Kafka's
    OfflineReplica transition; the leader epoch moves). Brokers shutting down are not elected."""
    live = ctx.live_brokers.keys()
    if state.leader in live:
        election = decisions.Election(state.leader, tuple(r for r in state.isr if r in live))
    elif state.leader == decisions.NO_LEADER and not joined & set(state.replicas):
        return None
    else:
        election = decisions.offline_election(state, ctx.eligible(), ctx.unclean(topic))
        if election.leader != decisions.NO_LEADER and election.leader not in state.isr:
            log.warning(
                "Unclean leader election for %s-%d: broker %d was not in the ISR %s; records the "
                "ISR acknowledged beyond its log are lost (unclean.leader.election.enable)",
                topic.name,
                index,
                election.leader,
                list(state.isr),
            )
    if election.leader == state.leader and election.isr == state.isr:
        return None
    return decisions.next_state(state, election, ctx.epoch)
