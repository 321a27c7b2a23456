"""One coordinator shard: the groups of one `__consumer_offsets` partition led by this broker.

Owns the single writer of those groups (DESIGN invariant 8): one asyncio task that first replays
the partition (groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then takes events off one
queue in order. An event is a pure decision over one group (`classic.*`): the task appends the
decision's records to the partition and waits for them to be committed (acks=-1) before the new
group state is kept and the replies are sent; if the append fails, the group stays as it was and the
decision's failure answer is sent instead (Kafka's mapping: KAFKA_STORAGE_ERROR answers
NOT_COORDINATOR). Only a NOT_LEADER_OR_FOLLOWER append closes the shard (leadership moved); after a
failed write (a full disk) it keeps serving and the next write is tried again. Events queue up behind
an append, so no decision ever sees state that is not yet in the log.

Timers run on the injected clock: each group's next deadline (session, rebalance, pending sync) sits
in a heap; an `asyncio` timer handle enqueues a tick for the earliest one and the tick runs
`classic.advance` for every group that is due. Offset expiration runs every
offsets.retention.check.interval.ms. `wake()` enqueues a tick now (tests moving a ManualClock).

Requests wait on futures keyed by ticket; a JoinGroup or SyncGroup parked in a rebalance keeps its
future until a later event answers it. Closing the shard (leadership moved, broker shutdown)
answers everything still waiting with NOT_COORDINATOR.

Logging: a group's changes an operator follows get one INFO line each (created, rebalanced with its
generation and member count, emptied, deleted); the load of the partition is one DEBUG line, and the
coordinator sums the loads up in one INFO line through `on_loaded`.

Callers: `GroupCoordinator` only.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Protocol

from odradek.clock import Clock
from odradek.coordinator import classic
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.group import Group, GroupState, Now
from odradek.coordinator.loader import GroupLoader, PendingTxnOffsets
from odradek.coordinator.records import (
    GroupMetadataValue,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from odradek.protocol.records.record import iter_batch_records

log = logging.getLogger(__name__)

_LOG_WAIT_ATTEMPTS = 50
_LOG_WAIT_INTERVAL_S = 0.02
# Timer keys: (kind, group id); the empty group id is a valid key for offset commits.
_GROUP_TIMER = 0
_EXPIRATION = (1, "")

# What an append error means to a coordinator client (Kafka's mapping).
_APPEND_ERRORS: dict[int, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}

Decide = Callable[[Group | None, int, Now], classic.Decision]
ErrorResult = Callable[[int], object]


class OffsetsLog(Protocol):
    """The shard's access to its partition of `__consumer_offsets`."""

    def log_range(self, partition: int) -> tuple[int, int] | None:
        """(log start offset, log end offset), or None when this broker has no such log."""

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset` (empty at the log end)."""

    async def append(self, partition: int, records: bytes, timeout_ms: int) -> int:
        """Append one batch with acks=-1; the partition's error code."""


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class _Event:
    __slots__ = ("group_id", "decide", "ticket")

    def __init__(self, group_id: str, decide: Decide, ticket: int) -> None:
        self.group_id, self.decide, self.ticket = group_id, decide, ticket


class _TxnCommit:
    """TxnOffsetCommit: offsets pending in the producer's transaction until its marker."""

    __slots__ = ("args", "producer_id", "producer_epoch", "ticket")

    def __init__(self, args: classic.CommitArgs, producer_id: int, producer_epoch: int, ticket: int) -> None:
        self.args, self.producer_id, self.producer_epoch, self.ticket = (
            args,
            producer_id,
            producer_epoch,
            ticket,
        )


class _TxnEnd:
    """A marker was written to the partition: the producer's pending offsets take effect or go."""

    __slots__ = ("producer_id", "commit")

    def __init__(self, producer_id: int, commit: bool) -> None:
        self.producer_id, self.commit = producer_id, commit


_TICK = object()


class CoordinatorShard:
    def __init__(
        self,
        partition: int,
        leader_epoch: int,
        offsets_log: OffsetsLog,
        config: GroupConfig,
        clock: Clock,
        on_loaded: Callable[[CoordinatorShard], None] | None = None,
    ) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.state = ShardState.LOADING
        self.groups: dict[str, Group] = {}
        # TxnOffsetCommit offsets per producer id and group, until the transaction's marker
        self.pending_txn_offsets: PendingTxnOffsets = {}
        self._txn_sequences: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, next sequence)
        self._on_loaded = on_loaded
        self._log = offsets_log
        self._config = config
        self._clock = clock
        self._queue: asyncio.Queue[_Event | _TxnCommit | _TxnEnd | object] = asyncio.Queue()
        self._waiting: dict[int, tuple[asyncio.Future[object], ErrorResult]] = {}
        self._tickets = itertools.count(1)
        self._timers: list[tuple[int, tuple[int, str]]] = []
        self._scheduled: dict[tuple[int, str], int] = {}
        self._wakeup: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    # -- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"group-shard-{self.partition}")

    async def close(self) -> None:
        """Stop the task; everything still waiting is answered NOT_COORDINATOR."""
        if self.state is ShardState.CLOSED:
            return
        self.state = ShardState.CLOSED
        if self._wakeup is not None:
            self._wakeup.cancel()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for future, error_result in self._waiting.values():
            if not future.done():
                future.set_result(error_result(ErrorCode.NOT_COORDINATOR))
        self._waiting.clear()
        self.groups.clear()
        self.pending_txn_offsets.clear()

    async def wait_loaded(self) -> None:
        """Until the partition is replayed (or the shard closed)."""
        while self.state is ShardState.LOADING:
            await asyncio.sleep(0.001)

    def wake(self) -> None:
        """Look at the clock now: fire whatever timers are due."""
        self._queue.put_nowait(_TICK)

    # -- requests ---------------------------------------------------------------------------------

    async def submit(self, group_id: str, decide: Decide, error_result: ErrorResult) -> object:
        """Run `decide` as the next event of the shard; the reply for this request."""
        if self.state is not ShardState.ACTIVE:
            loading = self.state is ShardState.LOADING
            return error_result(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NOT_COORDINATOR
            )
        ticket = next(self._tickets)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = (future, error_result)
        self._queue.put_nowait(_Event(group_id, decide, ticket))
        try:
            return await asyncio.shield(future)
        finally:
            self._waiting.pop(ticket, None)

    async def submit_txn_commit(
        self, args: classic.CommitArgs, producer_id: int, producer_epoch: int
    ) -> object:
        """TxnOffsetCommit: the error per partition once the offsets are stored, pending."""
        if self.state is not ShardState.ACTIVE:
            loading = self.state is ShardState.LOADING
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NOT_COORDINATOR
            return dict.fromkeys(args.offsets, error)
        ticket = next(self._tickets)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = (future, lambda code: dict.fromkeys(args.offsets, code))
        self._queue.put_nowait(_TxnCommit(args, producer_id, producer_epoch, ticket))
        try:
            return await asyncio.shield(future)
        finally:
            self._waiting.pop(ticket, None)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """A marker of `producer_id` is in the partition (Kafka's scheduleHandleTxnCompletion)."""
        self._queue.put_nowait(_TxnEnd(producer_id, commit))

    # -- the writer task --------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._load()
        except Exception:
            log.exception("Loading __consumer_offsets-%d failed", self.partition)
            await self.close()
        if self._on_loaded is not None:
            self._on_loaded(self)
        if self.state is ShardState.CLOSED:
            return
        self._arm(self._clock.monotonic_ms() + self._config.offsets_retention_check_interval_ms, _EXPIRATION)
        while True:
            item = await self._queue.get()
            try:
                if item is _TICK:
                    await self._fire_timers()
                elif isinstance(item, _Event):
                    await self._handle(item)
                elif isinstance(item, _TxnCommit):
                    await self._commit_txn_offsets(item)
                elif isinstance(item, _TxnEnd):
                    self._end_txn(item.producer_id, item.commit)
            except Exception:
                log.exception("Group coordinator shard %d failed on an event", self.partition)
                if isinstance(item, (_Event, _TxnCommit)):
                    self._reply(item.ticket, None, ErrorCode.UNKNOWN_SERVER_ERROR)
            if self.state is ShardState.CLOSED:
                return

    async def _load(self) -> None:
        offset, end = await self._log_range()
        loader = GroupLoader()
        started = self._clock.monotonic_ms()
        while offset < end:
            data = self._log.read(self.partition, offset, self._config.offsets_load_buffer_size)
            if not data:
                break
            for header, records in iter_batch_records(data):
                loader.apply_batch(header, records)
                offset = header.next_offset
            await asyncio.sleep(0)
        now = self._now()
        self.groups = loader.groups(now)
        self.pending_txn_offsets = loader.pending_txn_offsets
        self._txn_sequences = loader.txn_sequences
        for group_id, group in self.groups.items():
            self._schedule(group_id, group)
        self.state = ShardState.ACTIVE
        log.debug(
            "Loaded %d groups from __consumer_offsets-%d up to offset %d in %d ms (%d records skipped)",
            len(self.groups),
            self.partition,
            offset,
            self._clock.monotonic_ms() - started,
            loader.skipped,
        )

    async def _log_range(self) -> tuple[int, int]:
        """The partition's log range; leadership may be announced just before the log is created."""
        for _ in range(_LOG_WAIT_ATTEMPTS):
            span = self._log.log_range(self.partition)
            if span is not None:
                return span
            await asyncio.sleep(_LOG_WAIT_INTERVAL_S)
        raise RuntimeError(f"no log for __consumer_offsets-{self.partition}")

    async def _handle(self, event: _Event) -> None:
        await self._apply(event.group_id, lambda group, now: event.decide(group, event.ticket, now))

    async def _apply(self, group_id: str, decide: Callable[[Group | None, Now], classic.Decision]) -> None:
        now = self._now()
        before = self.groups.get(group_id)
        decision = decide(before, now)
        if decision.records:
            append_error = await self._append(decision.records, now)
            error = (
                _APPEND_ERRORS.get(append_error, ErrorCode.UNKNOWN_SERVER_ERROR)
                if append_error
                else ErrorCode.NONE
            )
            if error != ErrorCode.NONE:
                if decision.on_failure is not None:
                    decision = classic.write_failed(before, decision.on_failure, error, now, self._config)
                else:
                    log.warning("Could not store the state of group %s: %s", group_id, error.name)
            if append_error == ErrorCode.NOT_LEADER_OR_FOLLOWER:  # leadership moved: not a full disk
                self._deliver(decision)
                await self.close()
                return
        if decision.group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = decision.group
            self._schedule(group_id, decision.group)
        _log_transition(group_id, before, decision.group)
        self._deliver(decision)

    def _deliver(self, decision: classic.Decision) -> None:
        for reply in decision.replies:
            self._reply(reply.ticket, reply.value, ErrorCode.NONE)

    def _reply(self, ticket: int, value: object, error: int) -> None:
        waiting = self._waiting.pop(ticket, None)
        if waiting is None:
            return
        future, error_result = waiting
        if not future.done():
            future.set_result(error_result(error) if error != ErrorCode.NONE else value)

    async def _commit_txn_offsets(self, event: _TxnCommit) -> None:
        args = event.args
        error = classic.validate_txn_commit(self.groups.get(args.group_id), args)
        if error is None:
            records = tuple(
                classic.offset_commit_record(args.group_id, tp, o) for tp, o in args.offsets.items()
            )
            producer = self._next_txn_batch(event.producer_id, event.producer_epoch)
            append_error = await self._append(records, self._now(), producer)
            error = _txn_append_error(append_error) if append_error else None
            if error is None:
                self._txn_sequences[event.producer_id] = (producer[1], producer[2] + len(records))
                pending = self.pending_txn_offsets.setdefault(event.producer_id, {})
                pending.setdefault(args.group_id, {}).update(args.offsets)
        self._reply(event.ticket, dict.fromkeys(args.offsets, error or ErrorCode.NONE), ErrorCode.NONE)

    def _next_txn_batch(self, producer_id: int, producer_epoch: int) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) of the shard's next transactional batch for the producer:
        the shard is the partition's only writer, so it continues its own sequence (0 on a new epoch)."""
        epoch, sequence = self._txn_sequences.get(producer_id, (producer_epoch, 0))
        return producer_id, producer_epoch, sequence if epoch == producer_epoch else 0

    def _end_txn(self, producer_id: int, commit: bool) -> None:
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        now = self._now()
        for group_id, offsets in pending.items():
            self.groups[group_id] = classic.with_txn_offsets(
                self.groups.get(group_id), group_id, offsets, now
            )

    async def _append(
        self, records: tuple[classic.Record, ...], now: Now, producer: tuple[int, int, int] | None = None
    ) -> int:
        """Append and wait for the commit; the partition's error code (not yet mapped for clients).
        `producer` (id, epoch, base sequence) makes the batch transactional (TxnOffsetCommit)."""
        producer_id, producer_epoch, base_sequence = producer if producer is not None else (-1, -1, -1)
        batch = build_batch(
            [
                SimpleRecord(value=_encode_value(value), key=encode_key(key), timestamp=now.wall_ms)
                for key, value in records
            ],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=producer is not None,
        )
        try:
            return await self._log.append(self.partition, batch, self._config.offsets_commit_timeout_ms)
        except Exception:
            log.exception("Appending to __consumer_offsets-%d failed", self.partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    # -- timers -----------------------------------------------------------------------------------

    def _schedule(self, group_id: str, group: Group) -> None:
        deadline = group.next_deadline_ms()
        if deadline is not None:
            self._arm(deadline, (_GROUP_TIMER, group_id))

    def _arm(self, deadline: int, key: tuple[int, str]) -> None:
        scheduled = self._scheduled.get(key)
        if scheduled is not None and scheduled <= deadline:
            return
        self._scheduled[key] = deadline
        heapq.heappush(self._timers, (deadline, key))
        if self._timers[0] == (deadline, key):
            self._arm_wakeup(deadline)

    def _arm_wakeup(self, deadline: int) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
        delay_s = max(deadline - self._clock.monotonic_ms(), 0) / 1000
        self._wakeup = asyncio.get_running_loop().call_later(delay_s, self._queue.put_nowait, _TICK)

    async def _fire_timers(self) -> None:
        now_ms = self._clock.monotonic_ms()
        due: list[tuple[int, str]] = []
        while self._timers and self._timers[0][0] <= now_ms:
            deadline, key = heapq.heappop(self._timers)
            if self._scheduled.get(key) == deadline:
                del self._scheduled[key]
                due.append(key)
        for key in due:
            if key == _EXPIRATION:
                await self._expire_offsets()
            elif key[1] in self.groups:
                await self._apply(key[1], self._advance_decision)
            if self.state is ShardState.CLOSED:
                return
        if self._timers:
            self._arm_wakeup(self._timers[0][0])

    async def _expire_offsets(self) -> None:
        expired = 0
        for group_id in list(self.groups):
            before = self.groups[group_id]
            await self._apply(group_id, self._expire_decision)
            if self.state is ShardState.CLOSED:
                return
            after = self.groups.get(group_id)
            expired += len(before.offsets) - (len(after.offsets) if after is not None else 0)
        if expired:
            log.info("Removed %d expired offsets from __consumer_offsets-%d", expired, self.partition)
        self._arm(self._clock.monotonic_ms() + self._config.offsets_retention_check_interval_ms, _EXPIRATION)

    def _advance_decision(self, group: Group | None, now: Now) -> classic.Decision:
        if group is None:
            return classic.Decision(None)
        return classic.advance(group, now, self._config)

    def _expire_decision(self, group: Group | None, now: Now) -> classic.Decision:
        if group is None:
            return classic.Decision(None)
        return classic.expire_offsets(group, now, self._config)

    def _now(self) -> Now:
        return Now(self._clock.time_ms(), self._clock.monotonic_ms())


def _txn_append_error(append_error: int) -> int:
    """A transactional offset commit's append error for the client: a fenced producer hears so."""
    if append_error == ErrorCode.INVALID_PRODUCER_EPOCH:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return _APPEND_ERRORS.get(append_error, ErrorCode.UNKNOWN_SERVER_ERROR)


def _log_transition(group_id: str, before: Group | None, after: Group | None) -> None:
    """One INFO line per change an operator follows; every other state change at DEBUG."""
    if after is None:
        if before is not None:
            log.info("Group %s deleted (generation %d)", group_id, before.generation_id)
        return
    if before is None:
        log.info("Group %s created", group_id)
    if after.state is GroupState.EMPTY:
        if before is not None and before.state is not GroupState.EMPTY:
            log.info("Group %s is now empty (generation %d)", group_id, after.generation_id)
    elif after.generation_id != (before.generation_id if before is not None else 0):
        log.info(
            "Group %s rebalanced: generation %d with %d members, protocol %s, leader %s",
            group_id,
            after.generation_id,
            len(after.members),
            after.protocol_name,
            after.leader_id,
        )
    elif before is not None and before.state is not after.state:
        log.debug("Group %s: %s -> %s", group_id, before.state.value, after.state.value)


def _encode_value(value: OffsetCommitValue | GroupMetadataValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return encode_offset_commit_value(value)
    return encode_group_metadata_value(value)
