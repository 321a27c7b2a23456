"""The controller: the one writer of partition state, reacting to the metadata store.

Owns, while this broker is controller: the controller epoch, the live brokers, the brokers in
controlled shutdown, and the bringing of partitions online and offline. It reacts to store events (a
topic created, partitions added, a deletion requested) and to brokers' requests (AlterPartition,
ControlledShutdown) one at a time on its own queue (Kafka's ControllerEventManager), decides with
the pure functions of `decisions`, writes the new partition states to the store (fenced by its
epoch) and only then tells the brokers through its `ControllerChannel`: LeaderAndIsr to the
partition's replicas, UpdateMetadata to every live broker, StopReplica to the replicas of a deleted
topic.

Behaviour (Kafka's ZooKeeper-mode controller):
- `startup()`: elect (controller epoch + 1). The brokers of the previous run are gone, so every
  partition whose leader was one of them, or that had none, is offline: it gets an offline election
  over the live brokers (unclean only if unclean.leader.election.enable, topic config over broker
  default `unclean_default`, which the broker updates when a dynamic broker config changes it)
  with leader epoch + 1, so a restarted single node never serves under a leader epoch
  clients saw from the previous run; partitions stored without a state (a crash between the topic
  write and the state write) are brought online as new. Then LeaderAndIsr for every partition to its
  live replicas and UpdateMetadata with everything to every live broker.
- Topic created / partitions added: each new partition gets `new_partition_state`; LeaderAndIsr
  (is_new) to its live replicas, UpdateMetadata to all.
- Brokers changed (ZooKeeper mode: the children of `/brokers/ids`): the live brokers are replaced;
  every partition whose leader is no longer live, and every leaderless partition with a replica on a
  broker that joined, gets an offline election, a partition whose live leader has dead brokers in
  its ISR loses them (leader epoch + 1, as Kafka's OfflineReplica transition); the states are
  written fenced, then UpdateMetadata with everything goes to every live broker, LeaderAndIsr for
  all its partitions to a broker that joined and for the changed partitions to their live replicas
  (Kafka's onBrokerStartup / onBrokerFailure).
- ISR change asked by a partition's leader (AlterPartition, `alter_partition`): handled in turn
  with the other events; each partition is checked by `decisions.isr_change` (leader and leader
  epoch, partition epoch, live replicas), the accepted states are written (the store's conditional
  write moves the partition epoch), the leader gets its answer, then UpdateMetadata with the changed
  partitions goes to every live broker (Kafka's ZooKeeper-mode AlterPartition: no LeaderAndIsr, the
  leader epoch stays). A request from a broker that is not live, or with a broker epoch other than
  its registration's (-1 included, as Kafka checks), is STALE_BROKER_EPOCH; a broker that is not
  (or no longer) controller answers NOT_CONTROLLER.
- Controlled shutdown asked by a broker (ControlledShutdown, `controlled_shutdown`): handled in turn
  with the other events; the broker is marked shutting down until it leaves the live brokers. Every
  partition it leads with another live ISR member not shutting down gets
  `decisions.controlled_shutdown_election`; every partition it follows under a live leader loses it
  from the ISR (both: leader epoch + 1); the states are written fenced, then LeaderAndIsr goes to
  the partitions' live replicas and UpdateMetadata to every live broker, StopReplica (logs kept) to
  the broker for the partitions it now only follows (it stops fetching them), and the broker is answered
  with the partitions it still leads (remaining_partitions). Partitions with one replica are left
  alone and not counted, as Kafka does: they cannot move. A broker that is not live answers
  BROKER_NOT_AVAILABLE, a stale broker epoch STALE_BROKER_EPOCH, a non-controller NOT_CONTROLLER.
  Brokers shutting down are never elected leader (new partitions, offline elections) and never
  added to an ISR (AlterPartition: INELIGIBLE_REPLICA).
- Leader rebalance (auto.leader.rebalance.enable, ZooKeeper mode): every
  leader.imbalance.check.interval.seconds an event checks `decisions.imbalanced_partitions` and
  moves the partitions of brokers above leader.imbalance.per.broker.percentage back to their
  preferred replica (live, in the ISR, not shutting down; leader epoch + 1), then LeaderAndIsr and
  UpdateMetadata as for any election.
- Leader election asked by an admin (ElectLeaders, `elect_leaders`; KIP-460): handled in turn with
  the other events; each named partition (None: every partition) is decided by
  `decisions.requested_election` over the live brokers not shutting down: PREFERRED back to the
  first replica of the assignment, UNCLEAN for a partition without a live leader (a live ISR member
  first, else the first live replica, even outside the ISR, whatever
  unclean.leader.election.enable says: the admin asked for it). The elected states are written
  fenced (leader epoch + 1), LeaderAndIsr goes to their live replicas and UpdateMetadata to every
  live broker, and only then is the admin answered, per partition: the new leader, or
  ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
  UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (topic being deleted). A broker that is not
  (or stops being) controller raises NOT_CONTROLLER.
- Partition reassignment (AlterPartitionReassignments, `alter_partition_reassignments`; KIP-455 as
  Kafka's ZooKeeper-mode controller runs it): handled in turn with the other events; each partition
  is checked and its new assignment computed by `reassignment`. One not complete yet (a target
  replica outside the ISR): the full replicas with the adding and removing ones are written to the
  store, the leader epoch moves (leader and ISR kept within the replicas) and LeaderAndIsr goes to
  every replica, so the new ones start fetching; replicas a replaced reassignment no longer needs
  get StopReplica (delete). Once every target replica is in the ISR (checked after every accepted
  AlterPartition and when a reassignment is asked): a leader from the target if the current one is
  not in it, replicas and ISR shrunk to the target (leader epoch + 1, written first), the final
  assignment written, LeaderAndIsr to the target, StopReplica (delete) to the removed replicas.
  UpdateMetadata to every live broker follows each step. A null target cancels: the target becomes
  the original replicas. A new controller finishes the reassignments it finds complete at
  start-up (the others were sent in its full LeaderAndIsr and complete as their ISR grows).
  `list_partition_reassignments` answers from the store: every partition being reassigned (or the
  ones asked for that are) with its replicas, adding and removing replicas.
- Deletion requested: StopReplica (delete, leader epoch EPOCH_DURING_DELETE) to the replicas,
  UpdateMetadata with leader LEADER_DURING_DELETE (brokers drop the partitions from their cache), then
  the topic is removed from the store.

- Requests to brokers are queued on the channel and never waited for (Kafka's controller
  enqueues and moves on): a broker cut off but still registered, or one that leaves with requests
  outstanding, delays no event and no other broker; its answers, refusals and departure are logged
  when they come, and the membership change that follows covers a broker that left.

- Resignation: a store write refused because another controller was elected since
  (`ControllerMovedError`) stops the event handling and calls `on_resign` (the broker then watches
  `/controller` again).

`reelect_live_leaders`: at startup a single node re-elects every partition (its one broker is new,
so leader epochs move on); a ZooKeeper-mode controller taking over re-elects only partitions whose
leader is not live, as Kafka's failover does.

Invariants: state reaches the store before any broker hears of it; events are handled one at a time
in arrival order; a failure handling one event is logged and the next is handled.

Callers: the broker (construction, startup, shutdown); the store's watches feed the queue.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from odradek.controller import decisions, reassignment
from odradek.controller.channel import (
    ControllerChannel,
    ControllerIdentity,
    TopicStates,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_LEADER,
    BrokerInfo,
    PartitionState,
)
from odradek.controller.store import (
    MetadataStore,
    ReplicaAssignment,
    StoredTopic,
    StoreEvent,
    StoreEventKind,
)
from odradek.controller.zk.errors import ControllerMovedError
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from odradek.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from odradek.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from odradek.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
NO_EPOCH = -1  # StopReplica's leader epoch that the broker does not check
UNKNOWN_PARTITION = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The live brokers now (ZooKeeper mode's `/brokers/ids` watch)."""

    live: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class IsrChangeAsked:
    """A leader's AlterPartition, answered through `answer`."""

    request: AlterPartitionRequest
    answer: asyncio.Future[AlterPartitionResponse]


@dataclass(frozen=True, slots=True)
class ControlledShutdownAsked:
    """A broker's ControlledShutdown, answered through `answer`."""

    request: ControlledShutdownRequest
    answer: asyncio.Future[ControlledShutdownResponse]


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


@dataclass(frozen=True, slots=True)
class ReassignmentsAsked:
    """An AlterPartitionReassignments, answered through `answer`."""

    request: AlterPartitionReassignmentsRequest
    answer: asyncio.Future[AlterPartitionReassignmentsResponse]


@dataclass(frozen=True, slots=True)
class ReassignmentsResumed:
    """A new controller's check of the reassignments it found in the store."""


@dataclass(frozen=True, slots=True)
class LeaderRebalanceDue:
    """leader.imbalance.check.interval.seconds passed (auto.leader.rebalance.enable)."""


@dataclass(frozen=True, slots=True)
class LeaderRebalance:
    """auto.leader.rebalance.enable's settings: how often, and above which share per broker."""

    interval_s: float = 300.0  # leader.imbalance.check.interval.seconds
    imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage


ControllerEvent = (
    StoreEvent
    | BrokersChanged
    | IsrChangeAsked
    | ControlledShutdownAsked
    | LeaderRebalanceDue
    | LeaderElectionAsked
    | ReassignmentsAsked
    | ReassignmentsResumed
)
IsrDecision = ErrorCode | PartitionState


class Controller:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        channel: ControllerChannel,
        unclean_default: bool = False,
        *,
        reelect_live_leaders: bool = True,
        on_resign: Callable[[], None] | None = None,
        rebalance: LeaderRebalance | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self._channel = channel
        self.unclean_default = unclean_default
        self._reelect_live_leaders = reelect_live_leaders
        self._on_resign = on_resign
        self.epoch = 0
        self.live_brokers: dict[int, BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self._events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._rebalance = rebalance
        self._rebalance_timer: asyncio.Task[None] | None = None

    # -- life cycle ------------------------------------------------------------------------------

    async def startup(self, live_brokers: Iterable[BrokerInfo]) -> None:
        """Become controller over `live_brokers`; see the module docstring."""
        self.live_brokers = {b.broker_id: b for b in live_brokers}
        self.epoch = await self.store.elect_controller()
        log.info("Broker %d is controller at epoch %d", self.broker_id, self.epoch)
        changed = {name: self._startup_states(topic) for name, topic in self.store.topics().items()}
        changed = {name: states for name, states in changed.items() if states}
        if changed:
            await self.store.write_partition_states(changed, self.epoch)
        topics = {name: t for name, t in self.store.topics().items() if not t.marked_for_deletion}
        await self._send_leader_and_isr(_states_of(topics.values()), full=True)
        await self._send_update_metadata(_states_of(topics.values()))
        self.store.watch(self._on_store_event)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")
        if self._rebalance is not None:
            self._rebalance_timer = asyncio.get_running_loop().create_task(
                self._rebalance_periodically(self._rebalance.interval_s), name="leader-rebalance"
            )
        for name, topic in self.store.topics().items():
            if topic.marked_for_deletion:
                self._events.put_nowait(StoreEvent(StoreEventKind.DELETION_REQUESTED, name))
        self._events.put_nowait(ReassignmentsResumed())

    def _on_store_event(self, event: StoreEvent) -> None:
        if self._task is not None:
            self._events.put_nowait(event)

    def brokers_changed(self, live: Iterable[BrokerInfo]) -> None:
        """Queue a membership change (handled in order with the store's events)."""
        if self._task is not None:
            self._events.put_nowait(BrokersChanged(tuple(live)))

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """A leader's ISR change, decided in turn with the other events (module docstring)."""
        if self._task is None:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        answer: asyncio.Future[AlterPartitionResponse] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(IsrChangeAsked(request, answer))
        return await answer

    async def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """A broker's controlled shutdown, handled in turn with the other events (module docstring)."""
        if self._task is None:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        answer: asyncio.Future[ControlledShutdownResponse] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(ControlledShutdownAsked(request, answer))
        return await answer

    async def elect_leaders(
        self, election_type: decisions.ElectionType, partitions: Iterable[tuple[str, int]] | None
    ) -> ElectionResults:
        """An admin's elections, handled in turn with the other events (module docstring); raises
        KafkaError NOT_CONTROLLER when this broker is not, or stops being, the controller."""
        if self._task is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"Broker {self.broker_id} is not the controller.")
        answer: asyncio.Future[ElectionResults] = asyncio.get_running_loop().create_future()
        asked = None if partitions is None else tuple(dict.fromkeys(partitions))
        self._events.put_nowait(LeaderElectionAsked(election_type, asked, answer))
        return await answer

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        """Start or cancel reassignments, in turn with the other events (module docstring)."""
        if self._task is None:
            return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        answer: asyncio.Future[AlterPartitionReassignmentsResponse] = (
            asyncio.get_running_loop().create_future()
        )
        self._events.put_nowait(ReassignmentsAsked(request, answer))
        return await answer

    def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        """The reassignments in progress (all, or those of the partitions asked for)."""
        if self._task is None:
            return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        in_progress = self._reassignments_in_progress()
        if request.topics is not None:
            asked = {(t.name, p) for t in request.topics for p in t.partition_indexes}
            in_progress = {key: a for key, a in in_progress.items() if key in asked}
        return _reassignments_listed(in_progress)

    async def shutdown(self) -> None:
        """Stop handling events (one in progress is abandoned at its next await)."""
        task, self._task = self._task, None
        timer, self._rebalance_timer = self._rebalance_timer, None
        await cancel_and_wait(task, timer)
        self._refuse_waiting()

    async def _rebalance_periodically(self, interval_s: float) -> None:
        while self._task is not None:
            await asyncio.sleep(interval_s)
            if self._task is not None:
                self._events.put_nowait(LeaderRebalanceDue())

    def _refuse_waiting(self) -> None:
        """Answer NOT_CONTROLLER to every queued request (this broker stopped being controller)."""
        while not self._events.empty():
            event = self._events.get_nowait()
            self._events.task_done()
            _answer(event, ErrorCode.NOT_CONTROLLER)

    def _startup_states(self, topic: StoredTopic) -> dict[int, PartitionState]:
        live = self._eligible()
        states: dict[int, PartitionState] = {}
        for index, replicas in topic.assignment.items():
            state = topic.states.get(index)
            if state is None:
                states[index] = decisions.new_partition_state(replicas, live, self.epoch)
            elif self._reelect_live_leaders:
                election = decisions.offline_election(state, live, self._unclean(topic))
                states[index] = decisions.next_state(state, election, self.epoch)
            else:
                changed = self._after_membership(topic, index, state, set(live))
                if changed is not None:
                    states[index] = changed
        return states

    def _eligible(self) -> set[int]:
        """The live brokers that may be elected leader or join an ISR: not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    def _unclean(self, topic: StoredTopic) -> bool:
        value = topic.configs.get(UNCLEAN_LEADER_ELECTION)
        return self.unclean_default if value is None else value.strip().lower() == "true"

    # -- events ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle(event)
            except asyncio.CancelledError:
                _answer(event, ErrorCode.NOT_CONTROLLER)
                raise
            except ControllerMovedError as exc:
                log.warning("Broker %d resigns as controller (epoch %d): %s", self.broker_id, self.epoch, exc)
                self._task = None
                _answer(event, ErrorCode.NOT_CONTROLLER)
                self._refuse_waiting()
                if self._on_resign is not None:
                    self._on_resign()
                return
            except Exception:
                log.exception("The controller failed to handle %s", event)
                _answer(event, ErrorCode.UNKNOWN_SERVER_ERROR)
            finally:
                self._events.task_done()

    async def idle(self) -> None:
        """Wait until every event received so far is handled."""
        await self._events.join()

    async def _handle(self, event: ControllerEvent) -> None:
        if isinstance(event, BrokersChanged):
            await self._on_brokers_changed(event.live)
        elif isinstance(event, IsrChangeAsked):
            await self._change_isr(event)
            await self._complete_finished_reassignments()
        elif isinstance(event, LeaderRebalanceDue):
            await self._rebalance_leaders()
        elif isinstance(event, ControlledShutdownAsked):
            await self._shut_down_broker(event)
        elif isinstance(event, LeaderElectionAsked):
            await self._elect_leaders(event)
        elif isinstance(event, ReassignmentsAsked):
            await self._alter_reassignments(event)
        elif isinstance(event, ReassignmentsResumed):
            await self._complete_finished_reassignments()
        elif event.kind in (StoreEventKind.TOPIC_CREATED, StoreEventKind.PARTITIONS_ADDED):
            await self._bring_new_partitions_online(event.topic)
        elif event.kind is StoreEventKind.DELETION_REQUESTED:
            await self._delete_topic(event.topic)

    async def _change_isr(self, event: IsrChangeAsked) -> None:
        request = event.request
        stale = self._stale(request.broker_id, request.broker_epoch, required=True)
        if request.broker_id not in self.live_brokers or stale:
            event.answer.set_result(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
            return
        decided = self._decide_isr_changes(request)
        writes: dict[str, dict[int, PartitionState]] = {}
        topics = self.store.topics()
        for (name, index), decision in decided.items():
            if isinstance(decision, PartitionState) and decision != topics[name].states[index]:
                writes.setdefault(name, {})[index] = replace(decision, controller_epoch=self.epoch)
        changed = await self._write_states(writes) if writes else {}
        event.answer.set_result(self._isr_response(request, decided))
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
            await self._send_update_metadata(changed)

    def _stale(self, broker_id: int, broker_epoch: int, required: bool = False) -> bool:
        """A broker epoch other than the broker's registration's. -1 is not checked unless
        `required` (AlterPartition always carries one; ControlledShutdown v1 has none)."""
        registered = self.store.broker_epochs().get(broker_id)
        if registered is None or (broker_epoch == -1 and not required):
            return False
        return broker_epoch != registered

    def _decide_isr_changes(self, request: AlterPartitionRequest) -> dict[tuple[str, int], IsrDecision]:
        topics = self.store.topics()
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
                    self.live_brokers,
                    self.shutting_down,
                )
        return decided

    def _isr_response(
        self, request: AlterPartitionRequest, decided: Mapping[tuple[str, int], IsrDecision]
    ) -> AlterPartitionResponse:
        """Each partition's answer: its stored state when the change (or no change) holds there."""
        topics = self.store.topics()
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

    async def _write_states(self, states: Mapping[str, Mapping[int, PartitionState]]) -> TopicStates:
        """Write `states` fenced by this controller's epoch; return them as the store now holds them
        (its partition epochs; a state another writer moved is re-read), to tell the brokers."""
        await self.store.write_partition_states(states, self.epoch)
        topics = self.store.topics()
        return {
            name: (
                topics[name].topic_id,
                {i: topics[name].states[i] for i in written if i in topics[name].states},
            )
            for name, written in states.items()
            if name in topics
        }

    async def _rebalance_leaders(self) -> None:
        """Preferred replica elections where a broker's imbalance passes the threshold."""
        assert self._rebalance is not None
        topics = {n: t for n, t in self.store.topics().items() if not t.marked_for_deletion}
        states = {(n, i): s for n, t in topics.items() for i, s in t.states.items()}
        elections = decisions.imbalanced_partitions(
            states, self._eligible(), self._rebalance.imbalance_percentage
        )
        if not elections:
            return
        moved: dict[str, dict[int, PartitionState]] = {}
        for (name, index), election in elections.items():
            moved.setdefault(name, {})[index] = decisions.next_state(
                states[(name, index)], election, self.epoch
            )
        changed = await self._write_states(moved)
        await self._send_leader_and_isr(changed)
        await self._send_update_metadata(changed)
        log.info("Leader rebalance: %d partitions back on their preferred replica", len(elections))

    async def _elect_leaders(self, event: LeaderElectionAsked) -> None:
        topics = self.store.topics()
        asked = event.partitions if event.partitions is not None else _all_partitions(topics)
        results: ElectionResults = {}
        elected: dict[str, dict[int, PartitionState]] = {}
        for name, index in asked:
            decided = self._requested_election(topics.get(name), name, index, event.election_type)
            if isinstance(decided, PartitionState):
                elected.setdefault(name, {})[index] = decided
            else:
                results[(name, index)] = decided
        if elected:
            changed = await self._write_states(elected)
            await self._send_leader_and_isr(changed)
            await self._send_update_metadata(changed)
            for name, (_, states) in changed.items():
                results.update({(name, index): ElectionResult(s.leader) for index, s in states.items()})
            log.info(
                "Leader election (%s) asked by an admin: %d partitions have a new leader",
                event.election_type.name,
                sum(len(states) for _, states in changed.values()),
            )
        gone = ElectionResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=UNKNOWN_PARTITION)
        results.update({tp: gone for tp in asked if tp not in results})  # deleted during the write
        if not event.answer.done():
            event.answer.set_result(results)

    def _requested_election(
        self, topic: StoredTopic | None, name: str, index: int, election_type: decisions.ElectionType
    ) -> PartitionState | ElectionResult:
        """The state an admin's election of one partition writes, or its result when none."""
        state = topic.states.get(index) if topic is not None else None
        if topic is None or state is None:
            return ElectionResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=UNKNOWN_PARTITION)
        if topic.marked_for_deletion:
            return ElectionResult(
                error=ErrorCode.INVALID_TOPIC_EXCEPTION, message="The topic is being deleted"
            )
        decided = decisions.requested_election(state, election_type, self._eligible())
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
        return decisions.next_state(state, decided, self.epoch)

    async def _shut_down_broker(self, event: ControlledShutdownAsked) -> None:
        broker_id, broker_epoch = event.request.broker_id, event.request.broker_epoch
        if broker_id not in self.live_brokers:
            event.answer.set_result(ControlledShutdownResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE))
            return
        if self._stale(broker_id, broker_epoch):
            event.answer.set_result(ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
            return
        self.shutting_down.add(broker_id)
        moved = self._without_shutting_broker(broker_id)
        if moved:
            changed = await self._write_states(moved)
            await self._send_leader_and_isr(changed)
            await self._send_update_metadata(changed)
            await self._stop_following(broker_id, changed)
        remaining = self._still_led_by(broker_id)
        log.info(
            "Controlled shutdown of broker %d: %d partitions changed, %d still led by it",
            broker_id,
            sum(len(states) for states in moved.values()),
            len(remaining),
        )
        event.answer.set_result(ControlledShutdownResponse(remaining_partitions=remaining))

    # -- partition reassignment ------------------------------------------------------------------

    async def _alter_reassignments(self, event: ReassignmentsAsked) -> None:
        responses = []
        for topic in event.request.topics:
            answered = []
            for asked in topic.partitions:
                error = await self._reassign(topic.name, asked.partition_index, asked.replicas)
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
        event.answer.set_result(AlterPartitionReassignmentsResponse(responses=responses))

    async def _reassign(self, name: str, index: int, replicas: list[int] | None) -> KafkaError | None:
        """Start, replace or cancel one partition's reassignment; the error to answer, if any."""
        topic = self.store.topics().get(name)
        if topic is None or topic.marked_for_deletion or index not in topic.states:
            return KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} partition {index} does not exist."
            )
        current = topic.replica_assignment(index)
        try:
            target = reassignment.target_of(current, replicas, self.live_brokers)
        except KafkaError as exc:
            return exc
        if target == current.replicas and not current.being_reassigned:
            return None
        moving = reassignment.reassign_to(current, target)
        if reassignment.is_complete(moving, topic.states[index].isr):
            await self._finish_reassignment(name, index, current.replicas, target)
        else:
            await self._start_reassignment(name, index, current, moving)
        return None

    async def _start_reassignment(
        self, name: str, index: int, current: ReplicaAssignment, moving: ReplicaAssignment
    ) -> None:
        """Kafka's phase A: the full replicas stored, LeaderAndIsr to all of them (new epoch)."""
        await self.store.write_replica_assignments(name, {index: moving}, self.epoch)
        changed = await self._move_partition(name, index, moving.replicas)
        unneeded = [r for r in current.replicas if r not in moving.replicas]
        await self._delete_replicas(name, index, unneeded, changed)
        await self._send_update_metadata(changed)
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
        self, name: str, index: int, hosting: tuple[int, ...], target: tuple[int, ...]
    ) -> None:
        """Kafka's phase B: leader and ISR within `target` (state written first), the final
        assignment stored, StopReplica (delete) to the replicas `hosting` held that leave."""
        changed = await self._move_partition(name, index, target)
        await self.store.write_replica_assignments(name, {index: ReplicaAssignment(target)}, self.epoch)
        await self._delete_replicas(name, index, [r for r in hosting if r not in target], changed)
        await self._send_update_metadata(changed)
        log.info("Reassignment of %s-%d completed: replicas %s", name, index, list(target))

    async def _move_partition(self, name: str, index: int, replicas: tuple[int, ...]) -> TopicStates:
        """Leader and ISR over `replicas` (leader epoch + 1), written, then LeaderAndIsr to them."""
        state = self.store.topics()[name].states[index]
        election = reassignment.election_over(state, replicas, self._eligible())
        moved = decisions.next_state(replace(state, replicas=replicas), election, self.epoch)
        changed = await self._write_states({name: {index: moved}})
        await self._send_leader_and_isr(changed)
        return changed

    async def _delete_replicas(
        self, name: str, index: int, brokers: Iterable[int], changed: TopicStates
    ) -> None:
        """StopReplica (delete) to the live `brokers`, at the partition's new leader epoch."""
        states = changed.get(name, (None, {}))[1]
        epoch = states[index].leader_epoch if index in states else NO_EPOCH
        for broker_id in brokers:
            if broker_id in self.live_brokers:
                request = stop_replica_request(self._identity(), {name: {index: epoch}}, delete=True)
                await self._post(broker_id, "StopReplica", self._channel.stop_replica(broker_id, request))

    async def _complete_finished_reassignments(self) -> None:
        """Finish every reassignment whose target replicas are all in the ISR."""
        for (name, index), assigned in self._reassignments_in_progress().items():
            state = self.store.topics()[name].states.get(index)
            if state is not None and reassignment.is_complete(assigned, state.isr):
                await self._finish_reassignment(name, index, assigned.replicas, assigned.target)

    def _reassignments_in_progress(self) -> dict[tuple[str, int], ReplicaAssignment]:
        return {
            (name, index): topic.replica_assignment(index)
            for name, topic in self.store.topics().items()
            if not topic.marked_for_deletion
            for index in topic.adding_replicas.keys() | topic.removing_replicas.keys()
        }

    async def _stop_following(self, broker_id: int, changed: TopicStates) -> None:
        """StopReplica (logs kept) to the shutting broker for the partitions it now only follows, so
        it stops fetching and no leader keeps asking to put it back in an ISR (Kafka's
        OfflineReplica transition). Leader epoch -1: not checked against what it holds."""
        following = {
            name: {index: NO_EPOCH for index, state in states.items() if state.leader != broker_id}
            for name, (_, states) in changed.items()
        }
        following = {name: partitions for name, partitions in following.items() if partitions}
        if following:
            request = stop_replica_request(self._identity(), following, delete=False)
            await self._post(broker_id, "StopReplica", self._channel.stop_replica(broker_id, request))

    def _without_shutting_broker(self, broker_id: int) -> dict[str, dict[int, PartitionState]]:
        """The new states of the partitions with more than one replica a controlled shutdown changes:
        leadership moved off `broker_id`, or `broker_id` out of a live leader's ISR."""
        changed: dict[str, dict[int, PartitionState]] = {}
        for name, topic in self.store.topics().items():
            if topic.marked_for_deletion:
                continue
            for index, state in topic.states.items():
                if len(state.replicas) < 2:
                    continue
                election = self._shutdown_election(state, broker_id)
                if election is not None:
                    changed.setdefault(name, {})[index] = decisions.next_state(state, election, self.epoch)
        return changed

    def _shutdown_election(self, state: PartitionState, broker_id: int) -> decisions.Election | None:
        if state.leader == broker_id:
            return decisions.controlled_shutdown_election(state, self.live_brokers.keys(), self.shutting_down)
        if broker_id in state.isr and state.leader in self.live_brokers:
            return decisions.Election(state.leader, tuple(r for r in state.isr if r != broker_id))
        return None

    def _still_led_by(self, broker_id: int) -> list[ControlledShutdownResponse.RemainingPartition]:
        return [
            ControlledShutdownResponse.RemainingPartition(topic_name=name, partition_index=index)
            for name, topic in sorted(self.store.topics().items())
            if not topic.marked_for_deletion
            for index, state in sorted(topic.states.items())
            if state.leader == broker_id and len(state.replicas) > 1
        ]

    async def _bring_new_partitions_online(self, name: str) -> None:
        topic = self.store.topics().get(name)
        if topic is None or topic.marked_for_deletion:
            return
        new = {
            index: decisions.new_partition_state(replicas, self._eligible(), self.epoch)
            for index, replicas in topic.assignment.items()
            if index not in topic.states
        }
        if not new:
            return
        await self.store.write_partition_states({name: new}, self.epoch)
        states: TopicStates = {name: (topic.topic_id, new)}
        await self._send_leader_and_isr(states, new_partitions=frozenset((name, p) for p in new))
        await self._send_update_metadata(states)
        created = "created" if len(new) == len(topic.assignment) else "grew"
        log.info(
            "Topic %s %s: %d new partitions online (controller epoch %d)", name, created, len(new), self.epoch
        )

    async def _on_brokers_changed(self, live: tuple[BrokerInfo, ...]) -> None:
        before = set(self.live_brokers)
        self.live_brokers = {b.broker_id: b for b in live}
        self.shutting_down &= set(self.live_brokers)
        joined, left = set(self.live_brokers) - before, before - set(self.live_brokers)
        if not joined and not left:
            return
        log.info(
            "Live brokers are now %s (joined %s, left %s)",
            sorted(self.live_brokers),
            sorted(joined),
            sorted(left),
        )
        elected = self._elect_offline(joined)
        if elected:
            await self.store.write_partition_states(elected, self.epoch)
        topics = {n: t for n, t in self.store.topics().items() if not t.marked_for_deletion}
        changed: TopicStates = {n: (topics[n].topic_id, elected[n]) for n in elected if n in topics}
        await self._send_update_metadata(_states_of(topics.values()))
        everything = _states_of(topics.values())
        for broker_id in sorted(joined):
            mine = _for_replica(everything, broker_id)
            await self._send_leader_and_isr_to(broker_id, mine, full=True)
        await self._send_leader_and_isr(changed)
        if changed:
            log.info(
                "Membership change: %d partitions have a new leader or ISR",
                sum(len(s) for _, s in changed.values()),
            )

    def _elect_offline(self, joined: set[int]) -> dict[str, dict[int, PartitionState]]:
        """The new states of every partition a membership change changes."""
        elected: dict[str, dict[int, PartitionState]] = {}
        for name, topic in self.store.topics().items():
            if topic.marked_for_deletion:
                continue
            for index, state in topic.states.items():
                changed = self._after_membership(topic, index, state, joined)
                if changed is not None:
                    elected.setdefault(name, {})[index] = changed
        return elected

    def _after_membership(
        self, topic: StoredTopic, index: int, state: PartitionState, joined: set[int]
    ) -> PartitionState | None:
        """A partition's state over the current live brokers, None when unchanged: an offline
        election when its leader is not live (for a leaderless one, only when a broker holding a
        replica `joined`); the ISR without its dead members when the leader lives (Kafka's
        OfflineReplica transition; the leader epoch moves). Brokers shutting down are not elected."""
        live = self.live_brokers.keys()
        if state.leader in live:
            election = decisions.Election(state.leader, tuple(r for r in state.isr if r in live))
        elif state.leader == decisions.NO_LEADER and not joined & set(state.replicas):
            return None
        else:
            election = decisions.offline_election(state, self._eligible(), self._unclean(topic))
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
        return decisions.next_state(state, election, self.epoch)

    async def _delete_topic(self, name: str) -> None:
        topic = self.store.topics().get(name)
        if topic is None:
            return
        by_broker: dict[int, dict[int, int]] = {}
        for index, replicas in topic.assignment.items():
            for replica in replicas:
                by_broker.setdefault(replica, {})[index] = EPOCH_DURING_DELETE
        for broker_id, partitions in sorted(by_broker.items()):
            if broker_id in self.live_brokers:
                request = stop_replica_request(self._identity(), {name: partitions}, delete=True)
                await self._post(broker_id, "StopReplica", self._channel.stop_replica(broker_id, request))
        gone = {
            index: PartitionState(LEADER_DURING_DELETE, 0, replicas, (), self.epoch, 0)
            for index, replicas in topic.assignment.items()
        }
        await self._send_update_metadata({name: (topic.topic_id, gone)})
        await self.store.remove_topic(name, self.epoch)
        log.info("Topic %s deleted (%d partitions)", name, len(topic.assignment))

    # -- sending ---------------------------------------------------------------------------------

    def _identity(self) -> ControllerIdentity:
        return ControllerIdentity(self.broker_id, self.epoch)

    async def _send_leader_and_isr(
        self,
        topics: TopicStates,
        new_partitions: frozenset[tuple[str, int]] = frozenset(),
        full: bool = False,
    ) -> None:
        """LeaderAndIsr to every live broker holding a replica of some of `topics`."""
        for broker_id in sorted(self.live_brokers):
            mine = _for_replica(topics, broker_id)
            if not mine and not full:
                continue
            await self._send_leader_and_isr_to(broker_id, mine, new_partitions, full)

    async def _send_leader_and_isr_to(
        self,
        broker_id: int,
        mine: TopicStates,
        new_partitions: frozenset[tuple[str, int]] = frozenset(),
        full: bool = False,
    ) -> None:
        leaders = {s.leader for _, states in mine.values() for s in states.values()}
        live_leaders = [self.live_brokers[b] for b in sorted(leaders) if b in self.live_brokers]
        request = leader_and_isr_request(self._identity(), mine, live_leaders, new_partitions, full)
        await self._post(broker_id, "LeaderAndIsr", self._channel.leader_and_isr(broker_id, request))

    async def _send_update_metadata(self, topics: TopicStates) -> None:
        request = update_metadata_request(self._identity(), topics, self.live_brokers.values())
        for broker_id in sorted(self.live_brokers):
            await self._post(broker_id, "UpdateMetadata", self._channel.update_metadata(broker_id, request))

    async def _post(self, broker_id: int, api: str, answer: asyncio.Future[Any]) -> None:
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


def _answer(event: ControllerEvent, code: ErrorCode) -> None:
    """Refuse a request event not answered yet with `code` (other events need no answer)."""
    if isinstance(event, IsrChangeAsked) and not event.answer.done():
        event.answer.set_result(AlterPartitionResponse(error_code=code))
    elif isinstance(event, ReassignmentsAsked) and not event.answer.done():
        event.answer.set_result(AlterPartitionReassignmentsResponse(error_code=code))
    elif isinstance(event, ControlledShutdownAsked) and not event.answer.done():
        event.answer.set_result(ControlledShutdownResponse(error_code=code))
    elif isinstance(event, LeaderElectionAsked) and not event.answer.done():
        event.answer.set_exception(KafkaError(code))


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


def _states_of(topics: Iterable[StoredTopic]) -> TopicStates:
    return {t.name: (t.topic_id, dict(t.states)) for t in topics}


def _for_replica(topics: TopicStates, broker_id: int) -> TopicStates:
    """The partitions of `topics` that have a replica on `broker_id`."""
    mine: dict[str, tuple[uuid.UUID, Mapping[int, PartitionState]]] = {}
    for name, (topic_id, states) in topics.items():
        held = {index: s for index, s in states.items() if broker_id in s.replicas}
        if held:
            mine[name] = (topic_id, held)
    return mine
