"""The controller: the one writer of partition state, reacting to the metadata store.

Owns, while this broker is controller: its life cycle (election, startup, shutdown, resignation),
its event queue and the state its handlers share (`ControllerContext`: the controller epoch, the
live brokers, the brokers in controlled shutdown). It reacts to store events (a topic created,
partitions added, a deletion requested), to membership changes and to brokers' and admins'
requests (AlterPartition, ControlledShutdown, ElectLeaders, AlterPartitionReassignments) one at a
time on its own queue (Kafka's ControllerEventManager). Each kind of event has one owner, which
decides with the pure functions of `decisions` and `reassignment`, writes the new partition states
to the store (fenced by the epoch) and only then tells the brokers (sending.py: LeaderAndIsr to the
partition's replicas, UpdateMetadata to every live broker, StopReplica to the replicas of a deleted
topic or a removed replica):
- membership.py: brokers joining and leaving, offline elections (also those of startup);
- topics.py: topics created, partitions added, topics deleted;
- isr_changes.py: AlterPartition;
- controlled_shutdown.py: ControlledShutdown;
- elections.py: the periodic leader rebalance and ElectLeaders;
- partition_reassignments.py: AlterPartitionReassignments and ListPartitionReassignments.

Behaviour (Kafka's ZooKeeper-mode controller):
- `startup()`: elect (controller epoch + 1), then read the live brokers (Kafka's order: a broker
  that registered before the seat was won is read; one that registers after the read is a membership
  change, which the broker queues once the controller is installed; the channel reaches exactly the
  brokers read before anything is sent). The brokers of the previous run are gone, so every
  partition whose leader was one of them, or that had none, is offline: it gets an offline election
  over the live brokers (unclean only if unclean.leader.election.enable, topic config over broker
  default `unclean_default`, which the broker updates when a dynamic broker config changes it)
  with leader epoch + 1, so a restarted single node never serves under a leader epoch
  clients saw from the previous run; partitions stored without a state (a crash between the topic
  write and the state write) are brought online as new (`membership.startup_states`, which also
  tells what `reelect_live_leaders` changes). Then LeaderAndIsr for every partition to its live
  replicas and UpdateMetadata with everything to every live broker. Deletions requested and
  reassignments complete are then queued as events.
- The entry points (`brokers_changed`, `alter_partition`, `controlled_shutdown`, `elect_leaders`,
  `alter_partition_reassignments`) queue an event and, for a request, wait for its answer; a broker
  that is not controller answers NOT_CONTROLLER at once. After every ISR change the reassignments
  now complete are finished. With `rebalance` set, a periodic job of the broker's scheduler
  ("leader-rebalance", stopped on shutdown and resignation) queues a leader rebalance every
  leader.imbalance.check.interval.seconds.
- `shutdown()`: the event handling stops (one in progress is abandoned at its next await) and every
  request still queued is answered NOT_CONTROLLER.
- Resignation: a store write refused because another controller was elected since
  (`ControllerMovedError`) stops the event handling and calls `on_resign` (the broker then watches
  `/controller` again).

Invariants: state reaches the store before any broker hears of it; events are handled one at a time
in arrival order; a failure handling one event is logged and the next is handled (a request is then
answered UNKNOWN_SERVER_ERROR).

Callers: the broker (construction, startup, shutdown); the store's watches feed the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from odradek.controller import decisions, membership, partition_reassignments, topics
from odradek.controller.channel import ControllerChannel
from odradek.controller.context import ControllerContext
from odradek.controller.controlled_shutdown import ControlledShutdownAsked, shut_down_broker
from odradek.controller.elections import (
    ElectionResults,
    LeaderElectionAsked,
    LeaderRebalance,
    LeaderRebalanceDue,
    elect_leaders,
    rebalance_leaders,
)
from odradek.controller.isr_changes import IsrChangeAsked, change_isr
from odradek.controller.membership import BrokersChanged
from odradek.controller.metadata import BrokerInfo
from odradek.controller.partition_reassignments import ReassignmentsAsked, ReassignmentsResumed
from odradek.controller.sending import send_leader_and_isr, send_update_metadata, states_of
from odradek.controller.store import MetadataStore, StoreEvent, StoreEventKind
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
from odradek.scheduler import Job, Scheduler
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# a request waiting for its answer: refused (`refuse`) when the controller cannot handle it
RequestEvent = IsrChangeAsked | ControlledShutdownAsked | LeaderElectionAsked | ReassignmentsAsked
ControllerEvent = StoreEvent | BrokersChanged | LeaderRebalanceDue | ReassignmentsResumed | RequestEvent


# Reads the live brokers and their broker epochs (registrations' czxids; empty where unknown).
LiveBrokers = Callable[[], Awaitable[tuple[Iterable[BrokerInfo], Mapping[int, int]]]]


def known_brokers(brokers: Iterable[BrokerInfo], epochs: Mapping[int, int] | None = None) -> LiveBrokers:
    """`LiveBrokers` of brokers known already (a single node's own broker)."""

    async def read() -> tuple[Iterable[BrokerInfo], Mapping[int, int]]:
        return tuple(brokers), dict(epochs or {})

    return read


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
        scheduler: Scheduler,
        on_resign: Callable[[], None] | None = None,
        rebalance: LeaderRebalance | None = None,
    ) -> None:
        self._ctx = ControllerContext(broker_id, store, channel, unclean_default)
        self._reelect_live_leaders = reelect_live_leaders
        self._on_resign = on_resign
        self._events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._scheduler = scheduler
        self._rebalance = rebalance
        self._rebalance_job: Job | None = None

    # -- shared state ----------------------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self._ctx.broker_id

    @property
    def store(self) -> MetadataStore:
        return self._ctx.store

    @property
    def epoch(self) -> int:
        return self._ctx.epoch

    @property
    def live_brokers(self) -> dict[int, BrokerInfo]:
        return self._ctx.live_brokers

    @property
    def broker_epochs(self) -> dict[int, int]:
        return self._ctx.broker_epochs

    def unreached_brokers(self) -> set[int]:
        """Live brokers the channel does not deliver to (none, unless the controller is broken:
        /metrics shows the count)."""
        return set(self._ctx.live_brokers) - self._ctx.channel.reached()

    @property
    def shutting_down(self) -> set[int]:
        return self._ctx.shutting_down

    @property
    def unclean_default(self) -> bool:
        return self._ctx.unclean_default

    @unclean_default.setter
    def unclean_default(self, value: bool) -> None:
        self._ctx.unclean_default = value

    # -- life cycle ------------------------------------------------------------------------------

    async def startup(self, live_brokers: LiveBrokers) -> None:
        """Become controller, then read the live brokers (and their broker epochs); see the module
        docstring."""
        ctx = self._ctx
        ctx.epoch = await ctx.store.elect_controller()
        log.info("Broker %d is controller at epoch %d", ctx.broker_id, ctx.epoch)
        await ctx.set_live_brokers(*await live_brokers())
        changed = {
            name: membership.startup_states(ctx, topic, self._reelect_live_leaders)
            for name, topic in ctx.store.topics().items()
        }
        changed = {name: states for name, states in changed.items() if states}
        if changed:
            await ctx.store.write_partition_states(changed, ctx.epoch)
        live_topics = [t for t in ctx.store.topics().values() if not t.marked_for_deletion]
        await send_leader_and_isr(ctx, states_of(live_topics), full=True)
        await send_update_metadata(ctx, states_of(live_topics))
        ctx.store.watch(self._on_store_event)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")
        if self._rebalance is not None:
            interval_ms = round(self._rebalance.interval_s * 1000)
            self._rebalance_job = self._scheduler.every("leader-rebalance", interval_ms, self._rebalance_due)
        for name, topic in ctx.store.topics().items():
            if topic.marked_for_deletion:
                self._events.put_nowait(StoreEvent(StoreEventKind.DELETION_REQUESTED, name))
        self._events.put_nowait(ReassignmentsResumed())

    async def shutdown(self) -> None:
        """Stop handling events (one in progress is abandoned at its next await)."""
        task, self._task = self._task, None
        await self._stop_rebalance()
        await cancel_and_wait(task)
        self._refuse_waiting()

    async def _stop_rebalance(self) -> None:
        job, self._rebalance_job = self._rebalance_job, None
        await self._scheduler.cancel(job)

    def _rebalance_due(self) -> None:
        if self._task is not None:
            self._events.put_nowait(LeaderRebalanceDue())

    def _refuse_waiting(self) -> None:
        """Answer NOT_CONTROLLER to every queued request (this broker stopped being controller)."""
        while not self._events.empty():
            event = self._events.get_nowait()
            self._events.task_done()
            _refuse(event, ErrorCode.NOT_CONTROLLER)

    # -- entry points: each queues an event ------------------------------------------------------

    def _on_store_event(self, event: StoreEvent) -> None:
        if self._task is not None:
            self._events.put_nowait(event)

    def brokers_changed(self, live: Iterable[BrokerInfo], epochs: Mapping[int, int] | None = None) -> None:
        """Queue a membership change (handled in order with the store's events): `live` the brokers
        registered now, `epochs` their broker epochs when known."""
        if self._task is not None:
            self._events.put_nowait(BrokersChanged(tuple(live), dict(epochs or {})))

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """A leader's ISR change, decided in turn with the other events (isr_changes.py)."""
        if self._task is None:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        answer: asyncio.Future[AlterPartitionResponse] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(IsrChangeAsked(request, answer))
        return await answer

    async def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """A broker's controlled shutdown, handled in turn with the other events
        (controlled_shutdown.py)."""
        if self._task is None:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        answer: asyncio.Future[ControlledShutdownResponse] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(ControlledShutdownAsked(request, answer))
        return await answer

    async def elect_leaders(
        self, election_type: decisions.ElectionType, partitions: Iterable[tuple[str, int]] | None
    ) -> ElectionResults:
        """An admin's elections, handled in turn with the other events (elections.py); raises
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
        """Start or cancel reassignments, in turn with the other events (partition_reassignments.py)."""
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
        return partition_reassignments.list_in_progress(self._ctx, request)

    # -- events ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle(event)
            except asyncio.CancelledError:
                _refuse(event, ErrorCode.NOT_CONTROLLER)
                raise
            except ControllerMovedError as exc:
                log.warning("Broker %d resigns as controller (epoch %d): %s", self.broker_id, self.epoch, exc)
                self._task = None
                _refuse(event, ErrorCode.NOT_CONTROLLER)
                self._refuse_waiting()
                await self._stop_rebalance()
                if self._on_resign is not None:
                    self._on_resign()
                return
            except Exception:
                log.exception("The controller failed to handle %s", event)
                _refuse(event, ErrorCode.UNKNOWN_SERVER_ERROR)
            finally:
                self._events.task_done()

    async def idle(self) -> None:
        """Wait until every event received so far is handled."""
        await self._events.join()

    async def _handle(self, event: ControllerEvent) -> None:
        ctx = self._ctx
        if isinstance(event, BrokersChanged):
            await membership.on_brokers_changed(ctx, event)
        elif isinstance(event, IsrChangeAsked):
            await change_isr(ctx, event)
            await partition_reassignments.complete_finished_reassignments(ctx)
        elif isinstance(event, LeaderRebalanceDue):
            assert self._rebalance is not None
            await rebalance_leaders(ctx, self._rebalance)
        elif isinstance(event, ControlledShutdownAsked):
            await shut_down_broker(ctx, event)
        elif isinstance(event, LeaderElectionAsked):
            await elect_leaders(ctx, event)
        elif isinstance(event, ReassignmentsAsked):
            await partition_reassignments.alter_reassignments(ctx, event)
        elif isinstance(event, ReassignmentsResumed):
            await partition_reassignments.complete_finished_reassignments(ctx)
        elif event.kind in (StoreEventKind.TOPIC_CREATED, StoreEventKind.PARTITIONS_ADDED):
            await topics.bring_new_partitions_online(ctx, event.topic)
        elif event.kind is StoreEventKind.DELETION_REQUESTED:
            await topics.delete_topic(ctx, event.topic)


def _refuse(event: ControllerEvent, code: ErrorCode) -> None:
    """Refuse a request event not answered yet with `code` (other events need no answer)."""
    if isinstance(event, RequestEvent):
        event.refuse(code)
