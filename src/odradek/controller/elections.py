"""Leader elections no failure forced: the periodic leader rebalance and the elections an admin asks
for (Kafka's onReplicaElection, AutoTriggered and AdminClientTriggered).

Owns the `LeaderRebalanceDue` and `LeaderElectionAsked` events, the rebalance's settings
(`LeaderRebalance`) and an admin election's answer (`ElectionResult` per partition).

Behaviour (Kafka's ZooKeeper-mode controller):
- Leader rebalance (auto.leader.rebalance.enable, ZooKeeper mode): every
  leader.imbalance.check.interval.seconds an event checks `decisions.imbalanced_partitions` and
  moves the partitions of brokers above leader.imbalance.per.broker.percentage back to their
  preferred replica (live, in the ISR, not shutting down; leader epoch + 1), then LeaderAndIsr and
  UpdateMetadata as for any election. The controller's life cycle runs the timer.
- Leader election asked by an admin (ElectLeaders, `Controller.elect_leaders`; KIP-460): handled in
  turn with the other events; each named partition (None: every partition) is decided by
  `decisions.requested_election` over the live brokers not shutting down: PREFERRED back to the
  first replica of the assignment, UNCLEAN for a partition without a live leader (a live ISR member
  first, else the first live replica, even outside the ISR, whatever
  unclean.leader.election.enable says: the admin asked for it). The elected states are written
  fenced (leader epoch + 1), LeaderAndIsr goes to their live replicas and UpdateMetadata to every
  live broker, and only then is the admin answered, per partition: the new leader, or
  ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
  UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (topic being deleted). A broker that is not
  (or stops being) controller raises NOT_CONTROLLER.

Callers: `Controller` (controller/controller.py): its event queue; the broker (`LeaderRebalance`)
and the ElectLeaders handler (`ElectionResult`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.controller import decisions
from odradek.controller.context import ControllerContext
from odradek.controller.metadata import NO_LEADER, PartitionState
from odradek.controller.sending import send_leader_and_isr, send_update_metadata
from odradek.controller.store import StoredTopic
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.tasks import answer

log = logging.getLogger(__name__)

UNKNOWN_PARTITION = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class LeaderRebalance:
    """auto.leader.rebalance.enable's settings: how often, and above which share per broker."""

    interval_s: float = 300.0  # leader.imbalance.check.interval.seconds
    imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage


@dataclass(frozen=True, slots=True)
class LeaderRebalanceDue:
    """leader.imbalance.check.interval.seconds passed (auto.leader.rebalance.enable)."""


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's outcome of an admin's election: its leader now, or why there was no election."""

    leader: int = NO_LEADER
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


ElectionResults = dict[tuple[str, int], ElectionResult]


@dataclass(frozen=True, slots=True)
class LeaderElectionAsked:
    """An admin's ElectLeaders (`partitions` None: every partition), answered through `answer`."""

    election_type: decisions.ElectionType
    partitions: tuple[tuple[str, int], ...] | None
    answer: asyncio.Future[ElectionResults]

    def refuse(self, code: ErrorCode) -> None:
        if not self.answer.done():
            self.answer.set_exception(KafkaError(code))


async def rebalance_leaders(ctx: ControllerContext, settings: LeaderRebalance) -> None:
    """Preferred replica elections where a broker's imbalance passes the threshold."""
    topics = {n: t for n, t in ctx.store.topics().items() if not t.marked_for_deletion}
    states = {(n, i): s for n, t in topics.items() for i, s in t.states.items()}
    elections = decisions.imbalanced_partitions(states, ctx.eligible(), settings.imbalance_percentage)
    if not elections:
        return
    moved: dict[str, dict[int, PartitionState]] = {}
    for (name, index), election in elections.items():
        moved.setdefault(name, {})[index] = decisions.next_state(states[(name, index)], election, ctx.epoch)
    changed = await ctx.write_states(moved)
    await send_leader_and_isr(ctx, changed)
    await send_update_metadata(ctx, changed)
    log.info("Leader rebalance: %d partitions back on their preferred replica", len(elections))


async def elect_leaders(ctx: ControllerContext, event: LeaderElectionAsked) -> None:
    topics = ctx.store.topics()
    asked = event.partitions if event.partitions is not None else _all_partitions(topics)
    results: ElectionResults = {}
    elected: dict[str, dict[int, PartitionState]] = {}
    for name, index in asked:
        decided = _requested_election(ctx, topics.get(name), name, index, event.election_type)
        if isinstance(decided, PartitionState):
            elected.setdefault(name, {})[index] = decided
        else:
            results[(name, index)] = decided
    if elected:
        changed = await ctx.write_states(elected)
        await send_leader_and_isr(ctx, changed)
        await send_update_metadata(ctx, changed)
        for name, (_, states) in changed.items():
            results.update({(name, index): ElectionResult(s.leader) for index, s in states.items()})
        log.info(
            "Leader election (%s) asked by an admin: %d partitions have a new leader",
            event.election_type.name,
            sum(len(states) for _, states in changed.values()),
        )
    gone = ElectionResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=UNKNOWN_PARTITION)
    results.update({tp: gone for tp in asked if tp not in results})  # deleted during the write
    answer(event.answer, results)


def _requested_election(
    ctx: ControllerContext,
    topic: StoredTopic | None,
    name: str,
    index: int,
    election_type: decisions.ElectionType,
) -> PartitionState | ElectionResult:
    """The state an admin's election of one partition writes, or its result when none."""
    state = topic.states.get(index) if topic is not None else None
    if topic is None or state is None:
        return ElectionResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=UNKNOWN_PARTITION)
    if topic.marked_for_deletion:
        return ElectionResult(error=ErrorCode.INVALID_TOPIC_EXCEPTION, message="The topic is being deleted")
    decided = decisions.requested_election(state, election_type, ctx.eligible())
    if isinstance(decided, ErrorCode):
        return ElectionResult(state.leader, decided, _election_failure(name, index, state, decided))
    if decided.leader not in state.isr:
        log.warning(
            "Unclean leader election for %s-%d asked by an admin: broker %d was not in the ISR %s; "
            "records the ISR acknowledged beyond its log are lost",
            name,
            index,
            decided.leader,
            list(state.isr),
        )
    return decisions.next_state(state, decided, ctx.epoch)


def _all_partitions(topics: Mapping[str, StoredTopic]) -> list[tuple[str, int]]:
    """Every partition with a state, of the topics not being deleted (ElectLeaders' null list)."""
    return [
        (name, index)
        for name, topic in sorted(topics.items())
        if not topic.marked_for_deletion
        for index in sorted(topic.states)
    ]


def _election_failure(name: str, index: int, state: PartitionState, code: ErrorCode) -> str | None:
    """The message of an admin's election that did not happen (None: not needed)."""
    prefix = f"Failed to elect leader for partition {name}-{index}"
    if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE:
        preferred = state.replicas[0] if state.replicas else NO_LEADER
        return f"{prefix}: its preferred replica {preferred} is not live or not in the ISR {list(state.isr)}"
    if code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        return f"{prefix}: none of its replicas {list(state.replicas)} is live"
    return None
