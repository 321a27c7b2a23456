"""The ReplicaManager: this broker's partitions, the controller requests that change them, and the
produce/fetch/list-offsets paths across them.

Owns:
- the map (topic, partition) -> `Partition` of every partition with a replica on this broker. It
  changes only through the controller's requests, in single-node mode too: LeaderAndIsr
  (`become_leader_or_follower`) makes partitions lead or follow, StopReplica (`stop_replicas`) stops
  them and optionally deletes their logs. The broker's control plane (server/control_plane.py)
  fences each whole request by controller and broker epoch before handing it here (one controller
  epoch for all three controller requests, as Kafka keeps); here each partition is fenced by its
  leader epoch (see `fencing`);
- the partition loader: an accepted partition state waits in `pending` while one loader task per
  thread of the scheduler's log-load lane opens or creates its log there and, when this
  broker is to lead, writes the new leader epoch's start offset (an fsync); back on the event loop
  the state is applied (`Partition.make_leader` / `make_follower`, which check epochs again) and the
  partition serves. Partitions already hosted and those of internal topics (`__consumer_offsets`:
  the group coordinator waits for them) go first, the others in request order; StopReplica
  deletions run in the same lane, and the jobs of one partition run in the order they were taken
  (a deletion and a later re-creation never overlap). A request to a
  partition not ready yet answers NOT_LEADER_OR_FOLLOWER when the metadata cache knows the partition
  (Kafka's answer for a partition the broker does not host), UNKNOWN_TOPIC_OR_PARTITION otherwise;
- leadership listeners (Kafka's onLeadershipChange): told `LeadershipChange(topic, partition,
  is_leader, leader_epoch)` after a partition became leader, follower, or was stopped; `ready_changed`
  wakes waiters whenever partitions became ready or went;
- the two purgatories: `produce_purgatory` (acks=-1 appends waiting for the high watermark) and
  `fetch_purgatory` (fetch long polls). An append retries the fetches watching its partition (the
  LEO moved) and, when the high watermark moved, the produces; a replica's fetch that moves the
  high watermark retries both. A Produce retries them once all its partitions are appended (as
  Kafka's action queue does), so a woken fetch answers with the whole request's data, not with its
  first partition;
- replication: the `ReplicaFetcherManager` (replication/fetcher.py) fetches the partitions this
  broker follows from their leaders, at the endpoints LeaderAndIsr names (live_leaders); a
  partition that becomes leader or stops leaves it. As leader, a follower's fetch moves its LEO
  (and maybe the HW); the ISR changes a partition proposes (a follower caught up; every
  replica.lag.time.max.ms / 2 the followers not caught up for replica.lag.time.max.ms) go to the
  controller as AlterPartition through `alter_partition` (the broker's channel to the controller),
  all proposals pending at once in one request, and the controller's answers are applied
  (`Partition.apply_isr`); a refused or unanswered proposal is dropped and proposed again later;
- moves between log dirs (KIP-113, `alter_replica_log_dirs`: Kafka's alterReplicaLogDirs): the
  `ReplicaAlterLogDirsManager` (replication/alter_log_dirs.py) copies each moving partition's log
  into its future log and swaps them; a partition whose future log is found at start resumes its
  move once it serves, a stopped one stops moving; a partition not hosted yet is created in the dir
  asked (REPLICA_NOT_AVAILABLE, Kafka's answer); the future logs are created and deleted in the
  loader pool, in turn with the partition's other jobs;
- the replication throttles (KIP-73, replication/quotas.py): `leader_quota` holds back throttled
  partitions from followers outside the ISR in their fetches while exceeded, `follower_quota` is
  the fetchers' (the broker sets rates and throttled replicas from its configs);
- the counters of the broker's metrics (replication/stats.py): `topic_stats`, counted where an
  append's info or a read's size is at hand, and `isr_changes` of partitions that stay led here,
  counted as the controller's AlterPartition answers and LeaderAndIsr states are applied;
- the high watermark checkpoint `replication-offset-checkpoint` at the root of each log dir (Kafka's
  text format, written by temp file and rename): read at `start()`, written every
  replica.high.watermark.checkpoint.interval.ms (the scheduler's periodic job
  "high-watermark-checkpoint", writing in the log-io lane; "isr-expiration" is the other job) and at
  `shutdown()`, after the periodic write in progress, if any, finished.

Behaviour (Kafka's): a Produce's append (`append_client_records`, Kafka's appendRecords for a
client) first walks the records of its compressed batches led here (bounded work, invariant 9: the
request's compressed partitions share ON_LOOP_DECOMPRESSION_BUDGET of decompressed records on the
event loop, the rest is checked in one worker thread); a partition whose records fail answers their
error (logged at INFO) unappended. A transactional Produce first takes each partition's KIP-890
verification guard (`start_transaction_verification`). Appends with acks 0/1 answer at once; acks=-1
appends answer when every partition's high watermark reached the end of its append or at timeout_ms
(REQUEST_TIMED_OUT).
`write_txn_markers` (WriteTxnMarkers, the transaction coordinator's write) appends a COMMIT/ABORT
marker to each partition it leads (`Partition.append_marker`) and answers as an acks=-1 append; a
marker moves the last stable offset, so it wakes the fetches watching its partition like any append.
Read_committed fetches read below the LSO and carry the aborted transactions of the range read.
Fetches answer at once when max_wait_ms <= 0, min_bytes is already there, or a partition errors;
otherwise they wait in purgatory. An incremental fetch (`fetch_session`) reads only its partitions
that are not quiet (replication/quiet.py) and, while waiting, watches the quiet ones too. The
response's max_bytes is shared by partitions in request order;
the first batch of the first partition with data is returned even when larger than the limits.
Per-partition failures become error codes, never exceptions. DeleteRecords (`delete_records`),
DescribeProducers (`active_producers`) and ListOffsets (`offset_lookups`) are answered per partition
from the partitions led here.
A failed write (KafkaStorageError: a full disk...) answers KAFKA_STORAGE_ERROR, and a refused one
(NOT_ENOUGH_REPLICAS, a batch that fails validation) its error; either is logged once per partition
and error (WARNING) until an append to it succeeds again (INFO), not once per request; a high
watermark checkpoint that cannot be written keeps the previous file and is logged the same way, and
never stops a shutdown.

Shutdown stops the loader between partitions: it waits only for the partitions in progress (at
most one per worker), so a broker stops within seconds in the middle of creating or loading
thousands of partitions.

Invariants: the partition map, purgatories and listeners live on the broker's event loop; worker
threads only open, create, prepare and delete logs (LogManager.get_or_create_log / delete_log and
the log's own locking), check a Produce's compressed records (`Log.check_records`), and run
ListOffsets lookups that read record timestamps (over a copy of the map taken on the loop). Record
bytes are never read into Python on the data paths (reads hand out `FileSlice`s, appends pass the
request's memoryview to the log).

Callers: the broker's control plane (LeaderAndIsr / StopReplica from the controller), the Produce /
Fetch / ListOffsets / DeleteRecords / DescribeProducers handlers, the group coordinator (appends to
and reads from __consumer_offsets, through the broker's leadership wiring), the broker
(construction, start, shutdown).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from odradek.clock import Clock
from odradek.controller.metadata import INTERNAL_TOPICS, PartitionState, TopicMetadata
from odradek.controller.waiters import Waiters
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.records.batch import COMPRESSION_MASK
from odradek.protocol.records.validation import DecompressionBudgetExceeded, has_batch_with
from odradek.purgatory import DelayedOperationPurgatory
from odradek.repeated_failures import RepeatedFailures
from odradek.replication import fencing
from odradek.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from odradek.replication.delayed import DelayedFetch, DelayedProduce, settle_appends
from odradek.replication.fetcher import FetcherSettings, LeaderEndpoint, ReplicaFetcherManager
from odradek.replication.partition import (
    NO_LEADER_EPOCH,
    UNKNOWN_OFFSET,
    FetchClock,
    IsrProposal,
    Partition,
    TimestampAndOffset,
    Verified,
    prepare_leader_epoch,
)
from odradek.replication.quiet import QuietMark, SessionFetch
from odradek.replication.quiet import mark as quiet_mark
from odradek.replication.quotas import ReplicationQuota
from odradek.replication.stats import IsrChanges, TopicStats
from odradek.replication.types import (
    FetchParams,
    FetchPartitionRequest,
    FetchPartitionResult,
    LeadershipChange,
    ListOffsetsPartitionRequest,
    ListOffsetsPartitionResult,
    PartitionResponse,
    TopicPartition,
    TxnMarker,
)
from odradek.scheduler import Job, Lane, Scheduler
from odradek.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_checkpoint, write_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from odradek.storage.log import Log, future_dir_name
from odradek.storage.manager import LogManager
from odradek.storage.producer_state import ProducerStateEntry
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

_T = TypeVar("_T")
DEFAULT_CHECKPOINT_INTERVAL_MS = 5000  # replica.high.watermark.checkpoint.interval.ms
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms
ALTER_PARTITION_TIMEOUT_S = 30.0
ON_LOOP_DECOMPRESSION_BUDGET = 1 << 20  # decompressed bytes a Produce's check may take on the loop
CHECKPOINT = "high watermark checkpoint"  # the key of its failures beside the partitions'
_Checked = tuple[TopicPartition, Log, memoryview]  # a partition's compressed records and its log
AlterPartitionSender = Callable[[AlterPartitionRequest, float], Awaitable[AlterPartitionResponse]]


class PartitionDirectory(Protocol):
    """What the ReplicaManager asks the broker's metadata cache."""

    def contains_partition(self, name: str, index: int) -> bool: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...


LeadershipListener = Callable[[LeadershipChange], None]


@dataclass(frozen=True, slots=True)
class _PendingState:
    """An accepted partition state waiting for its log."""

    state: PartitionState
    topic_id: uuid.UUID


# Builds a FetchPartitionResult from all its fields without the NamedTuple's `__new__` frame: the
# idle partitions of a Fetch each take one.
_new_result = tuple.__new__

# A quiet partition's place in a parked session fetch's results while no change woke it.
RESTING = FetchPartitionResult("", -1, ErrorCode.NONE)


class ReplicaManager:
    """Partitions hosted by this broker; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        metadata_cache: PartitionDirectory,
        clock: Clock,
        *,
        scheduler: Scheduler,
        topic_config: Callable[[str], LogConfig] | None = None,
        log_dirs: Iterable[str | Path] = (),
        checkpoint_interval_ms: int = DEFAULT_CHECKPOINT_INTERVAL_MS,
        fetcher_settings: FetcherSettings | None = None,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        alter_partition: AlterPartitionSender | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        self._topic_config = topic_config or log_manager.config_for
        self.produce_purgatory = DelayedOperationPurgatory("Produce", clock)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", clock)
        self.ready_changed = Waiters()
        self.topic_stats = TopicStats()
        self.isr_changes = IsrChanges()
        self._leadership_listeners: list[LeadershipListener] = []
        self._log_dirs = [Path(directory) for directory in log_dirs]
        self._checkpoint_interval_ms = checkpoint_interval_ms
        # keyed by TopicPartition or an equal plain tuple: the read paths look up with plain tuples,
        # cheaper to build
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._hosted_per_topic: collections.Counter[str] = collections.Counter()
        self._checkpointed_hws: dict[TopicPartition, int] = {}
        self._failures = RepeatedFailures(log)  # appends per partition, the HW checkpoint
        self._scheduler = scheduler
        self._checkpoint_job: Job | None = None
        self._stopping = asyncio.Event()
        # the partition loader: one task per thread of the log-load lane
        self._load_threads = scheduler.lanes.threads(Lane.LOG_LOAD)
        self._pending: dict[TopicPartition, _PendingState] = {}
        self._load_queue: collections.deque[TopicPartition] = collections.deque()
        self._queued: set[TopicPartition] = set()
        self._deletions: collections.deque[TopicPartition] = collections.deque()
        self._in_flight: dict[TopicPartition, asyncio.Future[None]] = {}
        self._loaders: set[asyncio.Task[None]] = set()
        # replication
        self.leader_quota = ReplicationQuota(broker_id)
        self.follower_quota = ReplicationQuota(broker_id)
        settings = fetcher_settings or FetcherSettings(broker_id)
        self.fetchers = ReplicaFetcherManager(settings, self.partition, self.follower_quota)
        self.alter_log_dirs = ReplicaAlterLogDirsManager(
            log_manager, self.partition, settings.partition_max_bytes, scheduler
        )
        self._leader_endpoints: dict[int, LeaderEndpoint] = {}
        self._replica_lag_time_max_ms = replica_lag_time_max_ms
        self._alter_partition = alter_partition
        self._broker_epoch = broker_epoch
        self._isr_proposals: dict[tuple[str, int], IsrProposal] = {}
        self._isr_sender: asyncio.Task[None] | None = None
        self._isr_expiration: Job | None = None

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Read the HW checkpoints and (inside a running loop, with log dirs and a positive interval)
        checkpoint periodically. Partitions arrive through LeaderAndIsr."""
        for directory in self._log_dirs:
            self._checkpointed_hws.update(read_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT))
        if self._log_dirs and self._checkpoint_interval_ms > 0:
            self._checkpoint_job = self._scheduler.every(
                "high-watermark-checkpoint", self._checkpoint_interval_ms, self._checkpoint_periodically
            )
        if self._alter_partition is not None:
            self._isr_expiration = self._scheduler.every(
                "isr-expiration", self._replica_lag_time_max_ms // 2, self._expire_lagging_followers
            )

    async def shutdown(self) -> None:
        """Stop the loader (waiting only for the partitions in progress) and the periodic checkpoint
        (letting a write in progress finish), then write the final checkpoint."""
        self._stopping.set()
        await self.fetchers.shutdown()
        await self.alter_log_dirs.shutdown()
        await self._scheduler.cancel(self._isr_expiration)
        await cancel_and_wait(self._isr_sender)
        if self._loaders:
            await asyncio.gather(*self._loaders, return_exceptions=True)
        await self._scheduler.stop(self._checkpoint_job)
        self._checkpoint_job = None
        self.checkpoint_high_watermarks()

    async def _checkpoint_periodically(self) -> None:
        snapshot = self._high_watermarks_by_dir()
        self._note_checkpoint(await self._scheduler.run(Lane.LOG_IO, _write_checkpoints, snapshot))

    def checkpoint_high_watermarks(self) -> None:
        """Write `replication-offset-checkpoint` in every log dir (partitions whose log lives there)."""
        self._note_checkpoint(_write_checkpoints(self._high_watermarks_by_dir()))

    def _note_checkpoint(self, error: OSError | None) -> None:
        if error is not None:
            self._failures.failed(
                CHECKPOINT, "Cannot write the high watermark checkpoint, the previous one stays: %s", error
            )
        else:
            self._failures.succeeded(CHECKPOINT, "The high watermark checkpoint is written again")

    def _high_watermarks_by_dir(self) -> dict[Path, dict[tuple[str, int], int]]:
        by_dir: dict[Path, dict[tuple[str, int], int]] = {directory: {} for directory in self._log_dirs}
        for key, partition in self._partitions.items():
            by_dir.setdefault(partition.log.dir.parent, {})[key] = partition.high_watermark
        return by_dir

    # -- partitions ------------------------------------------------------------------------------

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def pending_count(self) -> int:
        """Partitions accepted but not serving yet (their logs are loading)."""
        return len(self._pending)

    def leads_loading(self, topic: str, partition: int) -> bool:
        """Whether the partition waits to load here with this broker as its leader."""
        pending = self._pending.get((topic, partition))
        return pending is not None and pending.state.leader == self.broker_id

    def serves_as_leader(self, topic: str, partition: int) -> bool:
        """Whether the partition is hosted and led here, with no newer state waiting."""
        hosted = self._partitions.get((topic, partition))
        return hosted is not None and hosted.is_leader and (topic, partition) not in self._pending

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with `topic_id`, or None if there is no such topic."""
        name = self._topic_names.get(topic_id)
        if name is None:
            topic = self.metadata_cache.topic_by_id(topic_id)
            name = topic.name if topic is not None else None
        return name

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._leadership_listeners.append(listener)

    def _not_hosted(self, key: tuple[str, int]) -> tuple[ErrorCode, str]:
        if self.metadata_cache.contains_partition(*key):
            return (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{key[0]}-{key[1]} is not served by broker {self.broker_id}",
            )
        return (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"{key[0]}-{key[1]} is not hosted by broker {self.broker_id}",
        )

    # -- LeaderAndIsr ----------------------------------------------------------------------------

    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Accept partition states, each fenced by its leader epoch; their logs load in the
        background (module docstring). The whole request was fenced by controller and broker epoch
        before it got here (server/control_plane.py)."""
        for leader in request.live_leaders:
            self._leader_endpoints[leader.broker_id] = LeaderEndpoint(
                leader.broker_id, leader.host_name, leader.port
            )
        codes: dict[tuple[str, int], ErrorCode] = {}
        for topic in request.topic_states:
            for state in topic.partition_states:
                key = TopicPartition(topic.topic_name, state.partition_index)
                codes[key] = self._accept(key, topic.topic_id, state)
        self._start_loaders()
        return leader_and_isr_response(request, lambda name, index: codes[(name, index)])

    def _accept(
        self, key: TopicPartition, topic_id: uuid.UUID, state: LeaderAndIsrRequest.LeaderAndIsrPartitionState
    ) -> ErrorCode:
        code = fencing.leader_and_isr_error(
            self._current_leader_epoch(key),
            state.leader_epoch,
            state.replicas,
            self.broker_id,
            topic_id,
            self._topic_ids.get(key[0]),
        )
        if code != ErrorCode.NONE:
            log.info(
                "Ignoring the LeaderAndIsr state of %s-%d (leader epoch %d, current %d): error %d",
                *key,
                state.leader_epoch,
                self._current_leader_epoch(key),
                code,
            )
            return code
        self._pending[key] = _PendingState(_partition_state(state), topic_id)
        # No fetched append may land between the new leader epoch's start offset (written by the
        # loader) and the state taking effect: the fetcher stops now and, for a follower, starts
        # again from the LEO once the state is applied (Kafka removes fetchers before makeLeader).
        self.fetchers.remove_partitions([key])
        if key not in self._queued:
            self._queued.add(key)
            if key in self._partitions or key[0] in INTERNAL_TOPICS:
                self._load_queue.appendleft(key)
            else:
                self._load_queue.append(key)
        return ErrorCode.NONE

    def _current_leader_epoch(self, key: TopicPartition) -> int:
        pending = self._pending.get(key)
        if pending is not None:
            return pending.state.leader_epoch
        hosted = self._partitions.get(key)
        return hosted.leader_epoch if hosted is not None else NO_LEADER_EPOCH

    # -- StopReplica -----------------------------------------------------------------------------

    def stop_replicas(self, request: StopReplicaRequest) -> StopReplicaResponse:
        """Stop (and optionally delete) replicas, each fenced by its leader epoch (the whole request
        was fenced by controller and broker epoch in server/control_plane.py)."""
        partitions = [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]
        errors = []
        for name, p in partitions:
            key = TopicPartition(name, p.partition_index)
            hosted = key in self._partitions or key in self._pending
            current = self._current_leader_epoch(key) if hosted else None
            code = fencing.stop_replica_error(current, p.leader_epoch)
            if code == ErrorCode.NONE:
                self._stop(key, p.delete_partition)
            else:
                log.info(
                    "Ignoring StopReplica of %s-%d (leader epoch %d, current %s)",
                    *key,
                    p.leader_epoch,
                    current,
                )
            errors.append(stop_error(name, p, code))
        self._start_loaders()
        self.ready_changed.notify()
        return StopReplicaResponse(partition_errors=errors)

    def _stop(self, key: TopicPartition, delete: bool) -> None:
        self.fetchers.remove_partitions([key])
        self.alter_log_dirs.remove(key)
        self._isr_proposals.pop(key, None)
        self._pending.pop(key, None)
        hosted = self._partitions.pop(key, None)
        if hosted is not None:
            self._forget_hosted(hosted)
            self._notify_leadership(LeadershipChange(*key, False, NO_LEADER_EPOCH))
        self._checkpointed_hws.pop(key, None)
        self._complete_delayed(*key, hw_moved=True)
        if delete:
            self._deletions.append(key)

    def _forget_hosted(self, hosted: Partition) -> None:
        self._hosted_per_topic[hosted.topic] -= 1
        if self._hosted_per_topic[hosted.topic] <= 0:
            del self._hosted_per_topic[hosted.topic]
            self._topic_names.pop(hosted.topic_id, None)
            self._topic_ids.pop(hosted.topic, None)

    # -- the loader ------------------------------------------------------------------------------

    def _start_loaders(self) -> None:
        loop = asyncio.get_running_loop()
        while len(self._loaders) < self._load_threads and (self._load_queue or self._deletions):
            self._loaders.add(loop.create_task(self._load_loop(), name="partition-loader"))

    async def _load_loop(self) -> None:
        """Take deletions, then loads, one at a time, until none is left or the broker stops. The
        task leaves `_loaders` in the same step in which it finds no work (not in a done callback,
        a turn later), so work queued in between starts a loader of its own."""
        try:
            while not self._stopping.is_set():
                if self._deletions:
                    await self._delete(self._deletions.popleft())
                elif self._load_queue:
                    key = self._load_queue.popleft()
                    self._queued.discard(key)
                    await self._load(key)
                else:
                    return
        finally:
            self._loaders.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _load(self, key: TopicPartition) -> None:
        pending = self._pending.get(key)
        if pending is None:
            return
        # A partition hosted already starts its new epoch in make_leader, on the loop: until then it
        # may still append (as leader or from its fetcher) in the old epoch at the log end.
        leads = pending.state.leader == self.broker_id and key not in self._partitions
        leader_epoch = pending.state.leader_epoch if leads else None
        try:
            prepared = await self._in_order(
                key, self._prepare_log, key, self._topic_config(key[0]), leader_epoch
            )
        except Exception:
            log.exception("Loading %s-%d failed", *key)
            if self._pending.get(key) is pending:
                del self._pending[key]
            return
        if self._pending.get(key) is pending and not self._stopping.is_set():
            del self._pending[key]
            self._apply(key, pending, prepared)

    def _prepare_log(self, key: TopicPartition, config: LogConfig, leader_epoch: int | None) -> Log:
        """Worker thread: open or create the log (and load its future log, if a move between log dirs
        was in progress); as leader, start the new epoch at its end."""
        partition_log = self.log_manager.get_or_create_log(key[0], key[1], config)
        self.log_manager.get_future_log(*key)
        if leader_epoch is not None:
            prepare_leader_epoch(partition_log, leader_epoch)
        return partition_log

    async def _delete(self, key: TopicPartition) -> None:
        try:
            await self._in_order(key, self.log_manager.delete_log, *key)
        except Exception:
            log.exception("Deleting the log of %s-%d failed", *key)

    async def _in_order(self, key: TopicPartition, job: Callable[..., _T], *args: Any) -> _T:
        """Run `job(*args)` in the log-load lane after every job taken earlier for the same partition, so a
        deletion and a later re-creation of one partition never overlap or swap."""
        loop = asyncio.get_running_loop()
        previous = self._in_flight.get(key)
        done: asyncio.Future[None] = loop.create_future()
        self._in_flight[key] = done
        try:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            return await self._scheduler.run(Lane.LOG_LOAD, job, *args)
        finally:
            done.set_result(None)
            if self._in_flight.get(key) is done:
                del self._in_flight[key]

    def _apply(self, key: TopicPartition, pending: _PendingState, partition_log: Log) -> None:
        """Event loop: host the partition (if new) and apply its state through the checked path."""
        hosted = self._partitions.get(key)
        if hosted is None:
            hosted = Partition(
                key[0],
                key[1],
                pending.topic_id,
                self.broker_id,
                partition_log,
                self._checkpointed_hws.get(key, 0),
            )
            self._partitions[key] = hosted
            self._hosted_per_topic[key[0]] += 1
            self._topic_names[pending.topic_id] = key[0]
            self._topic_ids[key[0]] = pending.topic_id
        state = pending.state
        led_isr = hosted.isr if hosted.is_leader else None
        try:
            if state.leader == self.broker_id:
                self.fetchers.remove_partitions([key])
                hw_moved = hosted.make_leader(state, self.clock.time_ms())
            else:
                self._follow(key, hosted, state)
                hw_moved = True  # parked acks=-1 produces answer NOT_LEADER_OR_FOLLOWER
        except KafkaError as exc:
            log.warning("Not applying %s to %s-%d: %s", state, *key, exc.message)
            return
        self._isr_proposals.pop(key, None)
        if led_isr is not None and hosted.is_leader:
            self.isr_changes.record(led_isr, hosted.isr)
        self._complete_delayed(*key, hw_moved=hw_moved)
        self._notify_leadership(LeadershipChange(*key, hosted.is_leader, state.leader_epoch))
        self.ready_changed.notify()
        future = self.log_manager.future_log(*key)
        if future is not None:
            self.alter_log_dirs.add(key, future)

    def _follow(self, key: TopicPartition, hosted: Partition, state: PartitionState) -> None:
        """Make the partition a follower and fetch it from its leader, if it has a live one."""
        hosted.make_follower(state)
        leader = self._leader_endpoints.get(state.leader)
        if leader is None:
            self.fetchers.remove_partitions([key])
            if state.leader >= 0:
                log.warning("%s-%d: no endpoint known for its leader %d; not fetching", *key, state.leader)
        else:
            self.fetchers.add_partitions({key: (leader, state.leader_epoch)})

    def _notify_leadership(self, change: LeadershipChange) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(change)
            except Exception:
                log.exception("A leadership listener failed on %s", change)

    def _complete_delayed(self, topic: str, partition: int, hw_moved: bool) -> None:
        key = (topic, partition)
        self.fetch_purgatory.check_and_complete(key)
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)

    # -- AlterReplicaLogDirs ---------------------------------------------------------------------

    async def alter_replica_log_dirs(
        self, destinations: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, ErrorCode]:
        """Move each partition's replica to the log dir at its absolute path (KIP-113, Kafka's
        alterReplicaLogDirs): the copy runs in the background (replication/alter_log_dirs.py)."""
        return {key: await self._alter_replica_log_dir(key, path) for key, path in destinations.items()}

    async def _alter_replica_log_dir(self, key: TopicPartition, path: str) -> ErrorCode:
        directory = self.log_manager.log_dir(path)
        if directory is None:
            log.warning("Cannot move %s-%d to %s: not a log dir of this broker", *key, path)
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not self.log_manager.is_log_dir_online(directory):
            log.warning("Cannot move %s-%d to %s: the log dir is offline", *key, path)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if len(future_dir_name(*key)) > 255:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        hosted = self._partitions.get(key)
        if hosted is None:
            # Created in `directory` when it comes; Kafka's answer for a replica it does not host yet.
            self.log_manager.set_preferred_dir(*key, directory)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        moving = self.alter_log_dirs.destination(key)
        if moving is not None and moving.dir.parent != directory:
            self.alter_log_dirs.remove(key)
        try:
            if hosted.log.dir.parent == directory:
                await self._in_order(key, self.log_manager.delete_future_log, *key)
                return ErrorCode.NONE
            future = await self._in_order(key, self.log_manager.create_future_log, *key, directory)
        except (KafkaStorageError, OSError) as exc:
            log.warning("Cannot move %s-%d to %s: %s", *key, path, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self._partitions.get(key) is hosted:
            self.alter_log_dirs.add(key, future)
        return ErrorCode.NONE

    # -- produce ---------------------------------------------------------------------------------

    async def append_records(
        self,
        entries: Mapping[TopicPartition, memoryview],
        acks: int,
        timeout_ms: int,
        verified: Mapping[TopicPartition, Verified] | None = None,
    ) -> dict[TopicPartition, PartitionResponse]:
        """Append to each partition as leader; with acks=-1 wait for the high watermark (or timeout).
        `verified`: the partitions whose transactional batches were verified, with the producer
        id and guard (`Partition.append_records_to_leader`)."""
        appended = {
            key: self._append_to_partition(
                key, records, acks, verified=verified.get(key) if verified else None
            )
            for key, records in entries.items()
        }
        return await self._await_appends(appended, acks, timeout_ms)

    async def append_client_records(
        self,
        entries: Mapping[TopicPartition, memoryview],
        acks: int,
        timeout_ms: int,
        verified: Mapping[TopicPartition, Verified] | None = None,
    ) -> dict[TopicPartition, PartitionResponse]:
        """A Produce's append (Kafka's appendRecords for a client): the records of the compressed
        batches led here are walked first (`_check_compressed`), and a partition whose records fail
        answers their error unappended; the others are appended as by `append_records`."""
        compressed = self._compressed_led_here(entries)
        if compressed:
            refused = await self._check_compressed(compressed)
            if refused:
                entries = {key: records for key, records in entries.items() if key not in refused}
                refused.update(await self.append_records(entries, acks, timeout_ms, verified))
                return refused
        return await self.append_records(entries, acks, timeout_ms, verified)

    def _compressed_led_here(self, entries: Mapping[TopicPartition, memoryview]) -> list[_Checked]:
        partitions = self._partitions
        compressed: list[_Checked] = []
        for key, records in entries.items():
            hosted = partitions.get(key)
            if hosted is not None and hosted.is_leader and has_batch_with(records, COMPRESSION_MASK):
                compressed.append((key, hosted.log, records))
        return compressed

    async def _check_compressed(self, compressed: list[_Checked]) -> dict[TopicPartition, PartitionResponse]:
        """Bounded work (invariant 9): the request's compressed partitions share
        ON_LOOP_DECOMPRESSION_BUDGET of decompressed records on the event loop; those that need more
        are checked in one worker thread (`Log.check_records`). The answers of the refused ones."""
        errors, deferred = _check_all(compressed, ON_LOOP_DECOMPRESSION_BUDGET // len(compressed))
        if deferred:
            errors.update((await self._scheduler.run(Lane.REQUEST, _check_all, deferred, None))[0])
        refused: dict[TopicPartition, PartitionResponse] = {}
        for key, error in errors.items():
            log.info("Refused an append to %s-%d: %s (error %d)", *key, error.message, error.code)
            refused[key] = PartitionResponse(error.code, error_message=error.message)
        return refused

    def start_transaction_verification(
        self, keys: Iterable[TopicPartition], producer_id: int, producer_epoch: int
    ) -> dict[TopicPartition, Verified]:
        """KIP-890: for each partition of `keys` led here, the producer id and the guard its append
        must carry (`Partition.start_transaction_verification`; guard None: the producer's
        transaction is ongoing there, nothing to verify). Partitions not led here are left out: their
        append answers why."""
        now_ms = self.clock.time_ms()
        verified: dict[TopicPartition, Verified] = {}
        for key in keys:
            hosted = self._partitions.get(key)
            if hosted is not None and hosted.is_leader:
                verified[key] = (
                    producer_id,
                    hosted.start_transaction_verification(producer_id, producer_epoch, now_ms),
                )
        return verified

    async def write_txn_markers(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, PartitionResponse]:
        """Append `marker` to each partition as leader (the coordinator's WriteTxnMarkers) and wait
        for the high watermark to pass it, as an acks=-1 append (or timeout)."""
        appended = {key: self._append_to_partition(key, None, -1, marker) for key in keys}
        return await self._await_appends(appended, -1, timeout_ms)

    async def _await_appends(
        self, appended: dict[TopicPartition, tuple[PartitionResponse, int, bool]], acks: int, timeout_ms: int
    ) -> dict[TopicPartition, PartitionResponse]:
        """Wake the operations watching the appended partitions; with acks=-1 wait for the HW."""
        responses: dict[TopicPartition, PartitionResponse] = {}
        required_offsets: dict[TopicPartition, int] = {}
        for key, (response, next_offset, _) in appended.items():
            responses[key] = response
            if response.error_code == ErrorCode.NONE:
                required_offsets[key] = next_offset
        self.fetch_purgatory.note_changes(required_offsets)
        for key in required_offsets:  # after the whole request: a fetch woken sees all its partitions
            self._complete_delayed(*key, hw_moved=appended[key][2])
        if acks != -1 or settle_appends(self, required_offsets, responses):
            return responses
        operation = DelayedProduce(timeout_ms, self, responses, required_offsets)
        return await self.produce_purgatory.watch(operation, required_offsets)

    def _append_to_partition(
        self,
        key: TopicPartition,
        records: memoryview | None,
        acks: int,
        marker: TxnMarker | None = None,
        verified: Verified | None = None,
    ) -> tuple[PartitionResponse, int, bool]:
        """The partition's response to appending `records` (or `marker`), the offset after the
        append (-1 when it failed) and whether the HW moved."""
        hosted = self._partitions.get(key)
        if hosted is None:
            code, message = self._not_hosted(key)
            return PartitionResponse(code, error_message=message), -1, False
        try:
            if marker is None:
                assert records is not None
                info, hw_moved = hosted.append_records_to_leader(records, acks, verified)
            else:
                info, hw_moved = hosted.append_marker(*marker)
        except KafkaStorageError as exc:
            self._failures.failed(
                key,
                "Appends to %s-%d fail: %s (error %d); logged again when an append succeeds",
                *key,
                exc.message,
                exc.code,
            )
            return PartitionResponse(exc.code, error_message=exc.message), -1, False
        except KafkaError as exc:  # batch validation errors are KafkaErrors too
            self._failures.failed(
                key, "Refused an append to %s-%d: %s (error %d)", *key, exc.message, exc.code
            )
            return PartitionResponse(exc.code, error_message=exc.message), -1, False
        except Exception as exc:
            log.exception("Appending to %s-%d failed", *key)
            return PartitionResponse(ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(exc)), -1, False
        if self._failures:
            self._failures.succeeded(key, "Appends to %s-%d succeed again", *key)
        counters = self.topic_stats[key[0]]
        counters.messages_in += info.record_count
        counters.bytes_in += info.valid_bytes
        response = PartitionResponse(
            ErrorCode.NONE, info.first_offset, info.log_append_time, info.log_start_offset
        )
        return response, info.last_offset + 1, hw_moved

    # -- fetch -----------------------------------------------------------------------------------

    async def fetch_messages(
        self,
        requests: list[FetchPartitionRequest],
        min_bytes: int,
        max_bytes: int,
        max_wait_ms: int,
        isolation_level: int,
        replica_id: int = -1,
    ) -> list[FetchPartitionResult]:
        """Read every partition; if less than min_bytes is there, wait up to max_wait_ms for more."""
        params = FetchParams(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level)
        results = self._first_read(requests, params)
        if max_wait_ms <= 0 or not requests or _answers_now(results, min_bytes):
            return results
        return await self._wait(requests, results, params)

    def _first_read(
        self, requests: list[FetchPartitionRequest], params: FetchParams
    ) -> list[FetchPartitionResult]:
        """Read every partition; a follower's fetch offsets become its LEOs."""
        replica_id = params.replica_id
        results = self.read_from_log(requests, params.max_bytes, params.isolation_level, replica_id)
        if replica_id >= 0:
            results = self._update_follower_fetch_state(replica_id, requests, results)
        return results

    async def _wait(
        self,
        requests: list[FetchPartitionRequest],
        first_read: list[FetchPartitionResult],
        params: FetchParams,
    ) -> list[FetchPartitionResult]:
        """Park the fetch of `requests` in the purgatory until min_bytes or max_wait_ms. With
        min_bytes <= 1 the first read found no byte and no error: that was the first try, and its
        results stand for the partitions no change is reported for."""
        if params.min_bytes <= 1:
            operation = DelayedFetch(self, requests, params, first_read)
            return await self.fetch_purgatory.watch(operation, operation.keys())
        operation = DelayedFetch(self, requests, params)
        return await self.fetch_purgatory.try_complete_else_watch(operation, operation.keys())

    async def fetch_session(
        self,
        requests: list[FetchPartitionRequest],
        quiet: list[QuietMark],
        params: FetchParams,
        clock: FetchClock,
    ) -> SessionFetch:
        """An incremental fetch (replication/quiet.py): read `requests` as `fetch_messages` does,
        mark the quiet ones on the same loop turn (a follower's rest on the session's `clock`, which
        then moves to now), and while waiting watch the `quiet` partitions too, reading those a
        change wakes. A partition of `requests` read again after the wait loses its mark."""
        results = self._first_read(requests, params)
        marks = self._quiet_marks(requests, results, params.replica_id, params.isolation_level, clock)
        clock.ms = self.clock.time_ms()
        if params.max_wait_ms <= 0 or not (requests or quiet) or _answers_now(results, params.min_bytes):
            return SessionFetch(results, marks, {})
        completed = await self._wait(
            requests + [mark.request for mark in quiet], results + [RESTING] * len(quiet), params
        )
        count = len(requests)
        for index, result in enumerate(completed[:count]):
            mark = marks[index]
            if mark is not None and result is not results[index]:
                mark.release()
                marks[index] = None
        woken = {index: result for index, result in enumerate(completed[count:]) if result is not RESTING}
        for index in woken:
            quiet[index].release()
        return SessionFetch(completed[:count], marks, woken)

    def _quiet_marks(
        self,
        requests: list[FetchPartitionRequest],
        results: list[FetchPartitionResult],
        replica_id: int,
        isolation_level: int,
        clock: FetchClock,
    ) -> list[QuietMark | None]:
        partitions = self._partitions
        marks: list[QuietMark | None] = []
        for request, result in zip(requests, results, strict=True):
            hosted = partitions.get((request.topic, request.partition))
            mark = (
                None
                if hosted is None
                else quiet_mark(hosted, request, result, replica_id, isolation_level, clock)
            )
            marks.append(mark)
        return marks

    def still_quiet(self, mark: QuietMark, isolation_level: int) -> bool:
        """Whether an incremental fetch may skip `mark`'s partition (replication/quiet.py)."""
        request = mark.request
        return self._partitions.get((request.topic, request.partition)) is mark.hosted and mark.holds(
            isolation_level
        )

    def read_from_log(
        self, requests: list[FetchPartitionRequest], max_bytes: int, isolation_level: int, replica_id: int
    ) -> list[FetchPartitionResult]:
        """One read per partition, in order, sharing `max_bytes` (see the module docstring)."""
        limit = max_bytes
        min_one_message = True
        results = []
        partitions = self._partitions
        for request in requests:
            topic, index, fetch_offset, _, epoch, last_fetched_epoch = request
            hosted = partitions.get((topic, index))
            if hosted is not None and (
                hosted.at_fetchable_end(fetch_offset, replica_id, isolation_level, epoch, last_fetched_epoch)
                or self.leader_throttles(hosted, replica_id)
            ):  # nothing new (most partitions of a tailing fetch) or throttled: answered from memory
                results.append(
                    _new_result(
                        FetchPartitionResult,
                        (
                            topic,
                            index,
                            ErrorCode.NONE,
                            hosted.high_watermark,
                            hosted.last_stable_offset,
                            hosted.log.log_start_offset,
                            (),
                            0,
                            None,
                            None,
                            None,
                        ),
                    )
                )
                continue
            result = self._read_partition(request, limit, isolation_level, replica_id, min_one_message)
            if result.size:
                min_one_message = False
                limit = max(0, limit - result.size)
                self._count_bytes_out(result, replica_id)
            results.append(result)
        return results

    def leader_throttles(self, hosted: Partition, replica_id: int) -> bool:
        """KIP-73: hold back a throttled partition from a follower outside the ISR while this
        leader's replication quota is exceeded."""
        quota = self.leader_quota
        return (
            replica_id >= 0
            and replica_id not in hosted.isr
            and quota.is_throttled(hosted.topic, hosted.partition)
            and quota.exceeded()
        )

    def _count_bytes_out(self, result: FetchPartitionResult, replica_id: int) -> None:
        counters = self.topic_stats[result.topic]
        if replica_id >= 0:
            counters.replication_bytes_out += result.size
            if self.leader_quota.is_throttled(result.topic, result.partition):
                self.leader_quota.record(result.size)
        else:
            counters.bytes_out += result.size

    def _read_partition(
        self,
        request: FetchPartitionRequest,
        limit: int,
        isolation_level: int,
        replica_id: int,
        min_one_message: bool,
    ) -> FetchPartitionResult:
        topic, index = request.topic, request.partition
        hosted = self._partitions.get((topic, index))
        if hosted is None:
            return FetchPartitionResult(topic, index, self._not_hosted((topic, index))[0])
        if request.last_fetched_epoch >= 0:
            diverging = self._diverging(hosted, request)
            if diverging is not None:
                return diverging
        try:
            read = hosted.read_records(
                request.fetch_offset,
                min(request.partition_max_bytes, limit),
                isolation_level,
                min_one_message,
                replica_id,
                request.current_leader_epoch,
            )
        except OffsetOutOfRangeError as exc:
            return FetchPartitionResult(
                topic,
                index,
                exc.code,
                hosted.high_watermark,
                hosted.last_stable_offset,
                hosted.log_start_offset,
                error_message=exc.message,
            )
        except KafkaError as exc:
            return FetchPartitionResult(topic, index, exc.code, error_message=exc.message)
        return FetchPartitionResult(
            topic,
            index,
            ErrorCode.NONE,
            read.high_watermark,
            read.last_stable_offset,
            read.log_start_offset,
            read.records,
            read.size,
            aborted_transactions=read.aborted_transactions,
        )

    def _diverging(self, hosted: Partition, request: FetchPartitionRequest) -> FetchPartitionResult | None:
        """Fetch v12+: the answer to a fetcher whose log diverges from this leader's, else None."""
        try:
            hosted.check_leader(request.current_leader_epoch)
        except KafkaError as exc:
            return FetchPartitionResult(hosted.topic, hosted.partition, exc.code, error_message=exc.message)
        end = hosted.diverging_epoch(request.last_fetched_epoch, request.fetch_offset)
        if end is None:
            return None
        return FetchPartitionResult(
            hosted.topic,
            hosted.partition,
            ErrorCode.NONE,
            hosted.high_watermark,
            hosted.last_stable_offset,
            hosted.log_start_offset,
            diverging_epoch=end,
        )

    def _update_follower_fetch_state(
        self, replica_id: int, requests: list[FetchPartitionRequest], results: list[FetchPartitionResult]
    ) -> list[FetchPartitionResult]:
        """Record each follower's fetch offset as its LEO (maybe moving the HW and proposing it for
        the ISR). A broker that is not a replica of the partition gets no records for it (as in
        Kafka), the other partitions are unaffected."""
        updated = []
        now_ms = self.clock.time_ms()
        for request, result in zip(requests, results, strict=True):
            key = (request.topic, request.partition)
            hosted = self._partitions.get(key)
            if hosted is not None and result.error_code == ErrorCode.NONE and result.diverging_epoch is None:
                try:
                    hw_moved, proposal = hosted.update_follower_fetch_state(
                        replica_id, request.fetch_offset, now_ms
                    )
                except KafkaError as exc:
                    log.warning("Ignoring the fetch position of broker %d: %s", replica_id, exc.message)
                    result = result._replace(records=(), size=0)
                else:
                    if hw_moved:
                        self._complete_delayed(*key, hw_moved=True)
                    if proposal is not None:
                        self._propose_isr(key, proposal)
            updated.append(result)
        return updated

    # -- ISR changes -----------------------------------------------------------------------------

    def _expire_lagging_followers(self) -> None:
        """Every replica.lag.time.max.ms / 2, propose shrinking the ISR of partitions led here."""
        now_ms = self.clock.time_ms()
        for key, hosted in list(self._partitions.items()):
            proposal = hosted.isr_to_shrink(now_ms, self._replica_lag_time_max_ms)
            if proposal is not None:
                log.info(
                    "Shrinking the ISR of %s-%d from %s to %s: followers not caught up for %d ms",
                    *key,
                    list(hosted.isr),
                    list(proposal.isr),
                    self._replica_lag_time_max_ms,
                )
                self._propose_isr(key, proposal)

    def _propose_isr(self, key: tuple[str, int], proposal: IsrProposal) -> None:
        """Queue an ISR change for the controller; one sender takes every proposal pending."""
        if self._alter_partition is None:
            if self._partitions[key].clear_pending_isr(proposal):
                self._complete_delayed(*key, hw_moved=True)
            return
        self._isr_proposals[key] = proposal
        if self._isr_sender is None or self._isr_sender.done():
            self._isr_sender = asyncio.get_running_loop().create_task(
                self._send_isr_changes(), name="alter-partition"
            )

    async def _send_isr_changes(self) -> None:
        assert self._alter_partition is not None  # only started when there is a controller to ask
        while self._isr_proposals and not self._stopping.is_set():
            proposals, self._isr_proposals = self._isr_proposals, {}
            try:
                response = await self._alter_partition(
                    self._isr_request(proposals), ALTER_PARTITION_TIMEOUT_S
                )
            except Exception as exc:
                log.warning("AlterPartition for %d partitions failed: %s", len(proposals), exc)
                response = AlterPartitionResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
            self._apply_isr_response(proposals, response)

    def _isr_request(self, proposals: Mapping[tuple[str, int], IsrProposal]) -> AlterPartitionRequest:
        topics: dict[str, AlterPartitionRequest.TopicData] = {}
        for (name, index), proposal in proposals.items():
            topics.setdefault(name, AlterPartitionRequest.TopicData(topic_name=name)).partitions.append(
                AlterPartitionRequest.PartitionData(
                    partition_index=index,
                    leader_epoch=proposal.leader_epoch,
                    new_isr=list(proposal.isr),
                    partition_epoch=proposal.partition_epoch,
                )
            )
        return AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(), topics=list(topics.values())
        )

    def _apply_isr_response(
        self, proposals: Mapping[tuple[str, int], IsrProposal], response: AlterPartitionResponse
    ) -> None:
        answers = {
            (topic.topic_name, p.partition_index): p for topic in response.topics for p in topic.partitions
        }
        for key, proposal in proposals.items():
            hosted = self._partitions.get(key)
            if hosted is None:
                continue
            answer = answers.get(key)
            code = response.error_code or (
                answer.error_code if answer is not None else ErrorCode.UNKNOWN_SERVER_ERROR
            )
            if code != ErrorCode.NONE or answer is None:
                # INELIGIBLE_REPLICA repeats at every fetch of a follower the controller will not
                # take (one shutting down): DEBUG; the other refusals are rare and worth INFO.
                level = logging.DEBUG if code == ErrorCode.INELIGIBLE_REPLICA else logging.INFO
                log.log(
                    level,
                    "The controller did not change the ISR of %s-%d to %s: error %d",
                    *key,
                    list(proposal.isr),
                    code,
                )
                if hosted.clear_pending_isr(proposal):
                    self._complete_delayed(*key, hw_moved=True)
                continue
            before = hosted.isr
            if hosted.apply_isr(answer.leader_epoch, answer.partition_epoch, tuple(answer.isr)):
                self._complete_delayed(*key, hw_moved=True)
            elif hosted.clear_pending_isr(proposal):
                self._complete_delayed(*key, hw_moved=True)
            self.isr_changes.record(before, hosted.isr)

    # -- list offsets ----------------------------------------------------------------------------

    def offset_lookups(self, in_worker: bool = False) -> OffsetLookups:
        """ListOffsets lookups (Kafka's fetchOffsetForTimestamp) over the hosted partitions: the live
        map, on the event loop; for a worker thread (`in_worker`: lookups that read record
        timestamps from the logs) a copy of it taken here, on the loop, where the map lives."""
        return OffsetLookups(dict(self._partitions) if in_worker else self._partitions, self._not_hosted)

    # -- delete records, producers ---------------------------------------------------------------

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords on one partition led here (Kafka's deleteRecords): the error code and the
        new log start offset (`Partition.delete_records_on_leader`; -1 when it failed)."""
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            return self._not_hosted((topic, partition))[0], UNKNOWN_OFFSET
        try:
            return ErrorCode.NONE, hosted.delete_records_on_leader(offset)
        except KafkaError as exc:
            return exc.code, UNKNOWN_OFFSET

    def active_producers(self, topic: str, partition: int) -> tuple[int, list[ProducerStateEntry]]:
        """DescribeProducers on one partition (Kafka's activeProducerState): NONE and the leader's
        producers by producer id, or the error of a partition not led here."""
        hosted = self._partitions.get((topic, partition))
        if hosted is None or not hosted.is_leader:
            return self._not_hosted((topic, partition))[0], []
        producers = hosted.log.producer_state.producers
        return ErrorCode.NONE, sorted(producers.values(), key=lambda entry: entry.producer_id)


class OffsetLookups:
    """ListOffsets lookups over a map of hosted partitions (`ReplicaManager.offset_lookups`)."""

    def __init__(
        self,
        partitions: Mapping[tuple[str, int], Partition],
        not_hosted: Callable[[tuple[str, int]], tuple[ErrorCode, str]],
    ) -> None:
        self._partitions = partitions
        self._not_hosted = not_hosted

    def offsets_for_timestamp(
        self,
        requests: Iterable[ListOffsetsPartitionRequest],
        isolation_level: int | None,
        fetch_only_from_leader: bool = True,
    ) -> list[ListOffsetsPartitionResult]:
        """ListOffsets lookups; `isolation_level` None means a replica asking (answers up to the LEO)."""
        return [self._offset_for_timestamp(r, isolation_level, fetch_only_from_leader) for r in requests]

    def _offset_for_timestamp(
        self, request: ListOffsetsPartitionRequest, isolation_level: int | None, fetch_only_from_leader: bool
    ) -> ListOffsetsPartitionResult:
        topic, index = request.topic, request.partition
        hosted = self._partitions.get((topic, index))
        if hosted is None:
            return ListOffsetsPartitionResult(topic, index, self._not_hosted((topic, index))[0])
        try:
            found: TimestampAndOffset | None = hosted.fetch_offset_for_timestamp(
                request.timestamp, isolation_level, request.current_leader_epoch, fetch_only_from_leader
            )
        except KafkaError as exc:
            return ListOffsetsPartitionResult(topic, index, exc.code)
        if found is None:
            return ListOffsetsPartitionResult(topic, index, ErrorCode.NONE)
        return ListOffsetsPartitionResult(
            topic, index, ErrorCode.NONE, found.timestamp, found.offset, found.leader_epoch
        )


def _answers_now(results: list[FetchPartitionResult], min_bytes: int) -> bool:
    """Whether a fetch is answered without waiting: a partition failed, or min_bytes are there."""
    total = 0
    for result in results:
        if result.error_code != ErrorCode.NONE:
            return True
        total += result.size
    return total >= min_bytes


def _check_all(
    compressed: list[_Checked], budget: int | None
) -> tuple[dict[TopicPartition, KafkaError], list[_Checked]]:
    """Check each partition's records within `budget` decompressed bytes each (None: within the
    limit only): the errors by partition, and the partitions that need more than the budget."""
    errors: dict[TopicPartition, KafkaError] = {}
    over_budget: list[_Checked] = []
    for entry in compressed:
        key, partition_log, records = entry
        try:
            partition_log.check_records(records, budget)
        except DecompressionBudgetExceeded:
            over_budget.append(entry)
        except KafkaError as exc:
            errors[key] = exc
    return errors, over_budget


def _write_checkpoints(by_dir: Mapping[Path, Mapping[tuple[str, int], int]]) -> OSError | None:
    """Write each dir's checkpoint; the first failure (ENOSPC...) is returned, the other dirs tried."""
    failure = None
    for directory, offsets in by_dir.items():
        try:
            write_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT, offsets)
        except OSError as exc:
            failure = failure or exc
    return failure


def _partition_state(state: LeaderAndIsrRequest.LeaderAndIsrPartitionState) -> PartitionState:
    return PartitionState(
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        replicas=tuple(state.replicas),
        isr=tuple(state.isr),
        controller_epoch=state.controller_epoch,
        partition_epoch=state.partition_epoch,
    )


def leader_and_isr_response(
    request: LeaderAndIsrRequest, code_of: Callable[[str, int], int], error: int = ErrorCode.NONE
) -> LeaderAndIsrResponse:
    """The topic-grouped answer to `request`: `code_of(topic, partition)` per partition, `error` at
    the top."""
    Error = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    return LeaderAndIsrResponse(
        error_code=error,
        topics=[
            LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=topic.topic_id,
                partition_errors=[
                    Error(
                        topic_name=topic.topic_name,
                        partition_index=p.partition_index,
                        error_code=code_of(topic.topic_name, p.partition_index),
                    )
                    for p in topic.partition_states
                ],
            )
            for topic in request.topic_states
        ],
    )


def stop_error(
    name: str, partition: StopReplicaRequest.StopReplicaPartitionState, code: int
) -> StopReplicaResponse.StopReplicaPartitionError:
    """One partition's line in a StopReplica answer."""
    return StopReplicaResponse.StopReplicaPartitionError(
        topic_name=name, partition_index=partition.partition_index, error_code=code
    )
