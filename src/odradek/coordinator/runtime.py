"""The coordinator runtime (Kafka's CoordinatorRuntime): what the group and the transaction
coordinators share, each of them a state machine (`CoordinatorShard`) over it.

Owns, for every partition of an internal topic (`__consumer_offsets`, `__transaction_state`) this
broker leads, one `CoordinatorContext`:
- Loading: when the broker becomes leader (`CoordinatorRuntime.on_partition_loaded`, a newer
  leader epoch replacing an older context), the partition's batches are read from its log start to
  its log end and handed to the shard's `replay`, then `loaded`; requests answer
  COORDINATOR_LOAD_IN_PROGRESS meanwhile, as they do before the context exists while this broker is
  to lead the partition and its log is still loading at start-up (`unavailable`; Kafka loads its
  logs before it serves, so its clients never see NOT_COORDINATOR from a coordinator starting
  up). The end of the load (or its failure) sets an `asyncio.Event` that `wait_loaded` awaits:
  nothing polls. The leadership change is announced once
  the ReplicaManager hosts the partition's log, so a partition without a log (stopped in between)
  fails the load and the context closes.
- One writer (DESIGN invariant 8): a single task takes events off one queue in order. A request
  event (`submit`) gets a ticket and waits on a future; the event answers it by returning a value,
  or later through `reply` (a JoinGroup parked in a rebalance). An event that raises is logged and
  answered UNKNOWN_SERVER_ERROR.
- Append then apply: an event stores a decision with `write`, which appends the records as one batch
  with acks=-1 and returns once they are committed or refused, with the client's error written once
  here (Kafka's mapping of a coordinator's append errors, plus each coordinator's own additions);
  the state machine keeps its new state only on success. Events queue up behind an append, so no
  decision ever sees state that is not yet in the log. A NOT_LEADER_OR_FOLLOWER append (leadership
  moved) closes the context once the event is done; any other failure (a full disk) leaves it
  serving and the next write is tried again.
- Timers on the injected clock: `schedule(key, deadline, event)` keeps the earliest deadline of each
  key in a heap; one wake-up at the earliest deadline (through `Timers`: the broker's scheduler) queues a
  tick and the writer runs every due timer's event in deadline order. `every` re-arms an event
  `interval` after each run. `wake()` queues a tick now (tests moving a ManualClock).
- Background work of a shard (`spawn`: the transaction markers) is cancelled when the context closes.
- Closing (leadership moved, broker shutdown, failed load): the writer stops, the wake-up is
  cancelled, background work is cancelled, every request still waiting is answered NOT_COORDINATOR
  and the shard's `unloaded` drops its state.

`Timers` is the runtime's whole view of scheduling: a callback at a deadline on the clock, and its
cancellation; the broker's one `Scheduler` (odradek/scheduler.py) is it.

`ReplicaManagerLog` is the runtime's access to an internal topic's partitions (`CoordinatorLog`),
over what it needs of the ReplicaManager (`LocalReplicas`); tests give an in-memory log instead.

Callers: `GroupCoordinator` (shard.py) and `TransactionCoordinator` (txn_coordinator.py), tests.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.record import Record, iter_batch_records
from odradek.protocol.topic_partition import TopicPartition
from odradek.tasks import cancel_and_wait

if TYPE_CHECKING:
    from odradek.storage.log import Log

log = logging.getLogger(__name__)

# What an append error means to a coordinator's client (Kafka's mapping, shared by both coordinators;
# each adds its own in `RuntimeConfig.append_errors`). Any other code: UNKNOWN_SERVER_ERROR.
APPEND_ERRORS: Mapping[int, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}

Event = Callable[[], Awaitable[None]]
RequestEvent = Callable[[int], Awaitable[object]]  # given its ticket; returns the answer or None
ErrorResult = Callable[[int], object]
ProducerBatch = tuple[int, int, int]  # (producer id, epoch, base sequence) of a transactional batch


# -- what the runtime needs from below --------------------------------------------------------------


class CoordinatorLog(Protocol):
    """The runtime's access to the partitions of one internal topic, by partition index."""

    def log_range(self, partition: int) -> tuple[int, int] | None:
        """(log start offset, log end offset), or None when this broker has no such log."""

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset` (empty at the log end)."""

    async def append(self, partition: int, records: bytes, timeout_ms: int) -> int:
        """Append one batch with acks=-1; the partition's error code."""

    def leader_loading(self, partition: int) -> bool:
        """Whether this broker is to lead the partition and its log is still loading."""


class HostedReplica(Protocol):
    """A partition hosted here, as the runtime reads it: its local log."""

    @property
    def log(self) -> Log: ...


class AppendResponse(Protocol):
    @property
    def error_code(self) -> int: ...


class LocalReplicas(Protocol):
    """What `ReplicaManagerLog` uses of the ReplicaManager."""

    def partition(self, topic: str, partition: int) -> HostedReplica | None: ...

    async def append_records(
        self, entries: Mapping[TopicPartition, memoryview], acks: int, timeout_ms: int
    ) -> Mapping[TopicPartition, AppendResponse]: ...

    def leads_loading(self, topic: str, partition: int) -> bool: ...


class ReplicaManagerLog:
    """`CoordinatorLog` over the ReplicaManager: reads the leader's log up to its end, appends with
    acks=-1 to `topic`."""

    def __init__(self, replicas: LocalReplicas, topic: str) -> None:
        self._replicas = replicas
        self._topic = topic

    def _log(self, partition: int) -> Log | None:
        found = self._replicas.partition(self._topic, partition)
        return found.log if found is not None else None

    def log_range(self, partition: int) -> tuple[int, int] | None:
        partition_log = self._log(partition)
        if partition_log is None:
            return None
        return partition_log.log_start_offset, partition_log.log_end_offset

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        partition_log = self._log(partition)
        if partition_log is None:
            return b""
        info = partition_log.read(offset, max_bytes, None, True)
        return b"".join(os.pread(s.fd, s.length, s.offset) for s in info.records)

    async def append(self, partition: int, records: bytes, timeout_ms: int) -> int:
        key = TopicPartition(self._topic, partition)
        results = await self._replicas.append_records({key: memoryview(records)}, -1, timeout_ms)
        return int(results[key].error_code)

    def leader_loading(self, partition: int) -> bool:
        return self._replicas.leads_loading(self._topic, partition)


# -- timers ---------------------------------------------------------------------------------------


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    """Where the runtime's deadlines wait (the broker's `Scheduler`): `at` calls `fn` on the event
    loop once the clock's monotonic time reaches `deadline_ms`; the handle cancels it."""

    def at(self, name: str, deadline_ms: int, fn: Callable[[], object]) -> TimerHandle: ...


# -- the state machine's side -----------------------------------------------------------------------


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class Loaded(NamedTuple):
    """How a load went: the offset it reached and the milliseconds it took."""

    offset: int
    elapsed_ms: int


class Appended(NamedTuple):
    """A write's outcome: the client's error (NONE once committed) and the partition's own code."""

    error: int
    code: int


class CoordinatorShard(Protocol):
    """A coordinator's state machine over one partition (Kafka's CoordinatorShard)."""

    def replay(self, header: BatchHeader, records: list[Record]) -> None:
        """One batch of the partition, in log order, while it loads."""

    def loaded(self, loaded: Loaded) -> None:
        """The load is done and the context active: build the state, arm the timers."""

    def unloaded(self) -> None:
        """The context closed: drop the state."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """A coordinator's settings for the runtime of each of its partitions."""

    topic: str
    load_buffer_bytes: int
    append_timeout_ms: int
    append_errors: Mapping[int, ErrorCode]  # the coordinator's additions to APPEND_ERRORS
    label: str  # "Group coordinator shard": how log lines name a context

    def client_error(self, code: int) -> int:
        if code == ErrorCode.NONE:
            return ErrorCode.NONE
        return self.append_errors.get(code) or APPEND_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


S = TypeVar("S", bound=CoordinatorShard)
_TICK = object()


class CoordinatorContext(Generic[S]):
    """One partition led here: its shard, its writer, its timers (see the module docstring)."""

    def __init__(
        self,
        partition: int,
        leader_epoch: int,
        new_shard: Callable[[CoordinatorContext[S]], S],
        log_: CoordinatorLog,
        config: RuntimeConfig,
        clock: Clock,
        timers: Timers,
        on_loaded: Callable[[CoordinatorContext[S]], None] | None = None,
    ) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.state = ShardState.LOADING
        self._log = log_
        self._config = config
        self._clock = clock
        self._timers = timers
        self._on_loaded = on_loaded
        self._loaded = asyncio.Event()
        self._queue: asyncio.Queue[Event | object] = asyncio.Queue()
        self._waiting: dict[int, tuple[asyncio.Future[object], ErrorResult]] = {}
        self._tickets = itertools.count(1)
        self._deadlines: list[tuple[int, int, Hashable]] = []  # (deadline, order, key)
        self._scheduled: dict[Hashable, tuple[int, Event]] = {}
        self._order = itertools.count()
        self._wakeup: TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.shard: S = new_shard(self)

    @property
    def name(self) -> str:
        return f"{self._config.topic}-{self.partition}"

    # -- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"coordinator-{self.name}")

    async def close(self) -> None:
        """Stop the writer and the background work; everything waiting is answered NOT_COORDINATOR."""
        self._stop()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await cancel_and_wait(*self._background)
        self._unload()

    def _stop(self) -> None:
        self.state = ShardState.CLOSED
        self._loaded.set()
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None

    def _unload(self) -> None:
        waiting, self._waiting = list(self._waiting.values()), {}
        for future, error_result in waiting:
            if not future.done():
                future.set_result(error_result(ErrorCode.NOT_COORDINATOR))
        self._deadlines.clear()
        self._scheduled.clear()
        self.shard.unloaded()

    async def wait_loaded(self, timeout_s: float | None = None) -> None:
        """Until the partition is replayed (or the context closed), at most `timeout_s`."""
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout_s)
        except TimeoutError:
            pass

    @property
    def active(self) -> bool:
        return self.state is ShardState.ACTIVE

    # -- events -----------------------------------------------------------------------------------

    def unavailable(self) -> int:
        """The error a request gets while the context is not active."""
        loading = self.state is ShardState.LOADING
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NOT_COORDINATOR

    async def submit(self, event: RequestEvent, error_result: ErrorResult) -> object:
        """Run `event` as the next event of the writer; the answer to this request."""
        if self.state is not ShardState.ACTIVE:
            return error_result(self.unavailable())
        ticket = next(self._tickets)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = (future, error_result)
        self._queue.put_nowait(lambda: self._answer(ticket, event))
        try:
            return await asyncio.shield(future)
        finally:
            self._waiting.pop(ticket, None)

    async def _answer(self, ticket: int, event: RequestEvent) -> None:
        try:
            answer = await event(ticket)
        except Exception:
            log.exception("%s %d failed on an event", self._config.label, self.partition)
            self.fail(ticket, ErrorCode.UNKNOWN_SERVER_ERROR)
            return
        if answer is not None:
            self.reply(ticket, answer)

    def enqueue(self, event: Event) -> None:
        """Run `event` on the writer after those already queued (no answer awaited)."""
        self._queue.put_nowait(event)

    def reply(self, ticket: int, value: object) -> None:
        waiting = self._waiting.pop(ticket, None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(value)

    def fail(self, ticket: int, error: int) -> None:
        waiting = self._waiting.pop(ticket, None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(waiting[1](error))

    async def write(self, records: Sequence[SimpleRecord], producer: ProducerBatch | None = None) -> Appended:
        """Append `records` as one batch with acks=-1 (transactional when `producer` is given) and
        wait for the commit. Called from an event; the caller keeps its new state only on success."""
        producer_id, producer_epoch, base_sequence = producer if producer is not None else (-1, -1, -1)
        batch = build_batch(
            list(records),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=producer is not None,
        )
        try:
            code = await self._log.append(self.partition, batch, self._config.append_timeout_ms)
        except Exception:
            log.exception("Appending to %s failed", self.name)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:  # leadership moved: close after this event
            self._stop()
        return Appended(self._config.client_error(code), code)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Background work of the shard, cancelled when the context closes."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- timers -----------------------------------------------------------------------------------

    def schedule(self, key: Hashable, deadline_ms: int, event: Event) -> None:
        """Run `event` on the writer once the clock reaches `deadline_ms`; a key already scheduled
        no later keeps its deadline (the event then decides what is due)."""
        scheduled = self._scheduled.get(key)
        if scheduled is not None and scheduled[0] <= deadline_ms:
            return
        self._scheduled[key] = (deadline_ms, event)
        entry = (deadline_ms, next(self._order), key)
        heapq.heappush(self._deadlines, entry)
        if self._deadlines[0] is entry:
            self._arm_wakeup(deadline_ms)

    def every(self, key: Hashable, interval_ms: int, event: Event) -> None:
        """Run `event` every `interval_ms`, the next run `interval_ms` after the end of the last."""

        async def periodic() -> None:
            try:
                await event()
            finally:
                if self.active:
                    self.every(key, interval_ms, event)

        self.schedule(key, self._clock.monotonic_ms() + interval_ms, periodic)

    def wake(self) -> None:
        """Look at the clock now: run whatever timers are due."""
        self._queue.put_nowait(_TICK)

    def _arm_wakeup(self, deadline_ms: int) -> None:
        if self.state is ShardState.CLOSED:
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup = self._timers.at("coordinator-wakeup", deadline_ms, self.wake)

    async def _fire_timers(self) -> None:
        now_ms = self._clock.monotonic_ms()
        due: list[Event] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            deadline, _, key = heapq.heappop(self._deadlines)
            scheduled = self._scheduled.get(key)
            if scheduled is not None and scheduled[0] == deadline:
                del self._scheduled[key]
                due.append(scheduled[1])
        for event in due:
            await self._run_event(event)
            if self.state is ShardState.CLOSED:
                return
        if self._deadlines:
            self._arm_wakeup(self._deadlines[0][0])

    # -- the writer -------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            loaded = await self._load()
            if self.state is ShardState.LOADING:
                self.state = ShardState.ACTIVE
                self.shard.loaded(loaded)
        except Exception:
            log.exception("Loading %s failed", self.name)
            self._stop()
        self._loaded.set()
        if self._on_loaded is not None:
            self._on_loaded(self)
        while self.state is ShardState.ACTIVE:
            item = await self._queue.get()
            if item is _TICK:
                await self._fire_timers()
            else:
                await self._run_event(item)  # type: ignore[arg-type]
        await cancel_and_wait(*self._background)
        self._unload()

    async def _run_event(self, event: Event) -> None:
        try:
            await event()
        except Exception:
            log.exception("%s %d failed on an event", self._config.label, self.partition)

    async def _load(self) -> Loaded:
        span = self._log.log_range(self.partition)
        if span is None:
            raise RuntimeError(f"no log for {self.name}")
        offset, end = span
        started = self._clock.monotonic_ms()
        while offset < end:
            data = self._log.read(self.partition, offset, self._config.load_buffer_bytes)
            if not data:
                break
            for header, records in iter_batch_records(data):
                self.shard.replay(header, records)
                offset = header.next_offset
            await asyncio.sleep(0)
        return Loaded(offset, self._clock.monotonic_ms() - started)


class CoordinatorRuntime(Generic[S]):
    """The contexts of the partitions of one internal topic led here, following leadership."""

    def __init__(
        self,
        log_: CoordinatorLog,
        config: RuntimeConfig,
        clock: Clock,
        new_shard: Callable[[CoordinatorContext[S]], S],
        timers: Timers,
        on_loaded: Callable[[CoordinatorContext[S]], None] | None = None,
    ) -> None:
        self._log = log_
        self.config = config
        self._clock = clock
        self._new_shard = new_shard
        self._timers = timers
        self._on_loaded = on_loaded
        self._contexts: dict[int, CoordinatorContext[S]] = {}
        self._running = False

    def startup(self) -> None:
        self._running = True

    async def shutdown(self) -> None:
        self._running = False
        contexts, self._contexts = list(self._contexts.values()), {}
        for context in contexts:
            await context.close()

    def on_partition_loaded(self, partition: int, leader_epoch: int) -> CoordinatorContext[S] | None:
        """This broker now leads the partition at `leader_epoch`: the context that loads it (None
        when one at this epoch or later already serves, or the runtime is stopped)."""
        current = self._contexts.get(partition)
        if not self._running:
            return None
        if (
            current is not None
            and current.state is not ShardState.CLOSED
            and current.leader_epoch >= leader_epoch
        ):
            return None
        if current is not None:
            self._close_later(current)
        context = CoordinatorContext(
            partition,
            leader_epoch,
            self._new_shard,
            self._log,
            self.config,
            self._clock,
            self._timers,
            self._on_loaded,
        )
        self._contexts[partition] = context
        context.start()
        return context

    def on_partition_unloaded(self, partition: int) -> CoordinatorContext[S] | None:
        """This broker no longer leads the partition: its context closes (requests NOT_COORDINATOR)."""
        context = self._contexts.pop(partition, None)
        if context is not None:
            self._close_later(context)
        return context

    def _close_later(self, context: CoordinatorContext[S]) -> None:
        asyncio.get_running_loop().create_task(context.close())

    def unavailable(self, partition: int | None) -> int:
        """The error for a request of `partition` while no active context serves it: its context's
        (loading or closed), else COORDINATOR_LOAD_IN_PROGRESS while this broker is to lead it and
        its log still loads, else NOT_COORDINATOR."""
        context = self.context(partition)
        if context is not None:
            return context.unavailable()
        if partition is not None and self._running and self._log.leader_loading(partition):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def context(self, partition: int | None) -> CoordinatorContext[S] | None:
        return self._contexts.get(partition) if partition is not None else None

    def contexts(self) -> dict[int, CoordinatorContext[S]]:
        return dict(self._contexts)

    def wake(self) -> None:
        """Make every context look at the clock now (tests driving a ManualClock)."""
        for context in self._contexts.values():
            context.wake()
