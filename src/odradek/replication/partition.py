"""One topic-partition as this broker sees it: its leader and ISR state, its log, its high watermark.

Owns, per partition: the state the controller assigned (leader, leader epoch, replicas, ISR,
controller epoch, partition epoch), the local `Log`, the high watermark (HW) and, when this broker
leads, the log end offset (LEO) of every follower by replica id.

Invariants:
- HW = min LEO over the maximal ISR (the ISR plus the members of an expansion not yet confirmed by
  the controller, as Kafka's maximalIsr; this broker's own LEO for itself, the LEO each follower
  last proved by fetching for the others; a follower that has not fetched yet counts as -1). The HW
  never moves backwards while this broker leads and never passes the local LEO. A single node is
  the replication-factor-1 case of the same rule: the ISR is {self}, so an append moves the HW to
  the LEO.
- ISR changes are the leader's proposals and the controller's decisions (Kafka's AlterPartition):
  a follower whose LEO reached the HW and the start of the current leader epoch is proposed for
  the ISR (`update_follower_fetch_state` returns the proposal); one that has not caught up to the
  leader's LEO for replica.lag.time.max.ms is proposed for removal (`isr_to_shrink`). A follower
  is caught up at a fetch from the leader's LEO, or from the LEO the leader had at the follower's
  previous fetch (Kafka's lastCaughtUpTimeMs rule); one resting on its fetch session's clock
  (`rest_follower`, for a partition its session skips as quiet: replication/quiet.py) is caught up
  at each fetch of that session until it is woken. One proposal is in flight at a time
  (`pending_isr`); the committed ISR changes only through `apply_isr` (the controller's answer,
  same leader epoch, newer partition epoch) or a LeaderAndIsr.
- A follower appends what its leader sent as it came (offsets and epochs included), sets its HW to
  min(leader's HW, own LEO) and truncates where its log diverges from the leader's
  (`truncate_to`, which pulls the HW down with the LEO).
- The last stable offset (LSO) is min(the log's first unstable offset, HW), never below the log start
  offset: the first offset of the oldest transaction still ongoing, or completed by a marker not yet
  below the HW (`Log.first_unstable_offset`); the HW when there is none. Every HW change is reported
  to the log (`on_high_watermark_updated`), on leaders and followers alike.
- Consumers read below the HW (read_uncommitted) or the LSO (read_committed, with the aborted
  transactions overlapping the range read); replicas read to the LEO.
- `append_marker` writes a transaction marker as leader (the coordinator's WriteTxnMarkers);
  followers replicate markers as ordinary batches.
- Transaction verification (KIP-890 part 1, replication/txn_verification.py): a producer's
  transactional batch verified by the Produce handler is appended only if the producer's
  transaction is ongoing here or its verification guard is still current; the append and any
  marker of the producer spend the guard, and a new leadership drops them all.
- A client that names a leader epoch (>= 0) older than ours is fenced (FENCED_LEADER_EPOCH), newer
  than ours is ahead of this broker (UNKNOWN_LEADER_EPOCH); -1 skips the check.
- A new leader epoch starts at the log end offset in the log's leader epoch cache (as Kafka's
  makeLeader does), so OffsetForLeaderEpoch answers for the new epoch before anything is written in
  it: `prepare_leader_epoch` writes that entry (an fsync) in the ReplicaManager's worker thread
  before the state is applied on the event loop for a partition new here, and in `make_leader`, on
  the event loop, for one hosted already: the entry must come after every batch of the old epoch,
  which such a partition may still append (as leader, or from its fetcher) until the new state is
  applied (written in the worker, a new epoch started below old-epoch batches appended after it,
  and its followers diverged from it for ever: found by the fault runs).
- The log changes only when a move between log dirs completes (`replace_log`: the new log holds the
  same offsets, epochs and producer state).
- State changes only through `make_leader` / `make_follower`, which refuse (STALE_CONTROLLER_EPOCH)
  a state whose leader epoch is older than the current one, or equal with a partition epoch that is
  not newer; the ReplicaManager has already applied Kafka's request-level fencing.
- acks=-1 appends are refused with NOT_ENOUGH_REPLICAS while the ISR is smaller than
  min.insync.replicas, before anything is written.
- An idempotent batch whose sequence gap starts at a batch this leader refused unwritten with a
  retriable error (NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR) gets that error again, not Kafka's
  OUT_OF_ORDER_SEQUENCE_NUMBER (replication/refused_batches.py says why); a new leader epoch or
  following forgets these refusals.

Errors are raised as `KafkaError` (NOT_LEADER_OR_FOLLOWER, epochs, NOT_ENOUGH_REPLICAS) or come from
storage (`OffsetOutOfRangeError`, `RecordsError`, `KafkaStorageError`, each with `error_code`).

Callers: `ReplicaManager` only (it owns the partition map and the purgatories that HW moves wake).
Everything runs on the broker's event loop except `prepare_leader_epoch` (worker threads).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.controller.metadata import PartitionState
from odradek.native import mypyc_attr
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.batch import NO_TIMESTAMP
from odradek.replication.refused_batches import RefusedBatches
from odradek.replication.txn_verification import VerificationGuard, VerificationGuards
from odradek.storage.leader_epoch import UNDEFINED_EPOCH, EpochEndOffset
from odradek.storage.log import Log, LogAppendInfo
from odradek.storage.producer_state import OutOfOrderSequenceError
from odradek.storage.txn_index import AbortedTxn

NO_LEADER_EPOCH = -1
UNKNOWN_OFFSET = -1
DELETE_TO_HIGH_WATERMARK = -1  # DeleteRecords' offset meaning the high watermark
Verified = tuple[int, VerificationGuard | None]  # a producer id and the guard of its verification
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class LogReadResult(NamedTuple):
    """Records read for one partition (at most one FileSlice) and the offsets a Fetch reports.
    A NamedTuple, not a frozen dataclass: one is built per partition of every Fetch."""

    records: list[FileSlice]
    size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(slots=True)
class FetchClock:
    """When a follower's fetch session last fetched (ms, the ReplicaManager's clock): the time of
    every partition of the session that rests on it."""

    ms: int = 0


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica): its LEO as last proved by a fetch,
    when it was last caught up, and the leader's LEO and clock at its previous fetch.

    A follower caught up on a partition with nothing new may rest on its fetch session's `clock`
    (`Partition.rest_follower`): the session's fetches then skip the partition, and each of them
    counts as a fetch of it at the leader's unchanged LEO, so the follower stays caught up as of the
    clock. `wake` writes that back before the partition is looked at again."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    clock: FetchClock | None = None

    @property
    def caught_up_ms(self) -> int:
        clock = self.clock
        return self.last_caught_up_ms if clock is None else max(self.last_caught_up_ms, clock.ms)

    def wake(self) -> None:
        clock = self.clock
        if clock is not None:
            self.last_caught_up_ms = max(self.last_caught_up_ms, clock.ms)
            self.last_fetch_ms = max(self.last_fetch_ms, clock.ms)
            self.clock = None


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR change this leader asks the controller for (AlterPartition)."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A ListOffsets answer: the offset found, its timestamp (-1 when not by timestamp), leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int


def prepare_leader_epoch(log: Log, leader_epoch: int) -> None:
    """Start `leader_epoch` at the log end offset unless the log already knows it (worker thread:
    the leader epoch checkpoint is fsynced). An append in the new epoch that got there first has
    already recorded the same start offset."""
    if leader_epoch >= 0 and log.leader_epoch_cache.latest_epoch < leader_epoch:
        log.maybe_assign_epoch_start_offset(leader_epoch, log.log_end_offset)


@mypyc_attr(native_class=False)  # tests patch its methods on instances
class Partition:
    """Leader/follower state, log and high watermark of one topic-partition on this broker."""

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        local_broker_id: int,
        log: Log,
        high_watermark: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.leader_id = -1
        self.leader_epoch = NO_LEADER_EPOCH
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self._update_high_watermark(min(max(high_watermark, log.log_start_offset), log.log_end_offset))
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self._followers: dict[int, FollowerState] = {}
        self._refused = RefusedBatches()
        self.verification = VerificationGuards()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
            f"isr={self.isr}, hw={self.high_watermark}, leo={self.log_end_offset})"
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.log.producer_state.first_unstable_offset  # read on every fetch: no property
        high_watermark = self.high_watermark
        if first_unstable < 0 or first_unstable >= high_watermark:
            return high_watermark
        return min(max(first_unstable, self.log.log_start_offset), high_watermark)

    def _update_high_watermark(self, high_watermark: int) -> None:
        self.high_watermark = high_watermark
        self.log.on_high_watermark_updated(high_watermark)

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def make_leader(self, state: PartitionState, now_ms: int = 0) -> bool:
        """Lead with `state`. On a new epoch (or a new leadership) followers' LEOs restart unknown,
        ISR members counting as caught up now (Kafka's becomeLeader). True if the HW moved."""
        self._check_newer(state)
        new_term = state.leader_epoch != self.leader_epoch or not self.is_leader
        self._apply(state)
        if new_term:
            prepare_leader_epoch(self.log, state.leader_epoch)  # done already for a new partition
            self.leader_epoch_start_offset = self.log_end_offset
            self._followers = {}
            self._refused.clear()
            self.verification.clear_all()
        self._followers = {
            r: self._followers.get(r) or FollowerState(last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in self._replica_followers()
        }
        return self.maybe_increment_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Follow `state.leader`: keep the log and HW, forget followers (the ReplicaManager's fetcher
        copies the leader's log from the LEO)."""
        self._check_newer(state)
        self._apply(state)
        self._followers = {}
        self._refused.clear()
        self.verification.clear_all()

    def _check_newer(self, state: PartitionState) -> None:
        older = state.leader_epoch < self.leader_epoch
        same = state.leader_epoch == self.leader_epoch and state.partition_epoch <= self.partition_epoch
        if older or same:
            raise KafkaError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"{self.topic}-{self.partition} is at leader epoch {self.leader_epoch} partition epoch "
                f"{self.partition_epoch}; refusing leader epoch {state.leader_epoch} partition epoch "
                f"{state.partition_epoch}",
            )

    def _apply(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None

    def _replica_followers(self) -> list[int]:
        return [r for r in self.replicas if r != self.local_broker_id]

    # -- ISR -----------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR with the members of a pending expansion (a pending shrink counts only once the
        controller confirmed it)."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + tuple(r for r in pending if r not in self.isr)

    def _propose(self, isr: tuple[int, ...]) -> IsrProposal:
        self.pending_isr = isr
        return IsrProposal(self.leader_epoch, self.partition_epoch, isr)

    def _maybe_expand_isr(self, replica_id: int, follower: FollowerState) -> IsrProposal | None:
        """Propose `replica_id` for the ISR once its LEO reached the HW and this leader epoch's start."""
        if replica_id in self.maximal_isr or self.pending_isr is not None:
            return None
        caught_up = follower.log_end_offset >= max(self.high_watermark, self.leader_epoch_start_offset)
        return self._propose(self.isr + (replica_id,)) if caught_up else None

    def isr_to_shrink(self, now_ms: int, lag_time_max_ms: int) -> IsrProposal | None:
        """Propose the ISR without the followers not caught up for `lag_time_max_ms`
        (replica.lag.time.max.ms), unless a proposal is in flight or the ISR would be empty."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.local_broker_id
            and now_ms - self._followers.get(r, FollowerState()).caught_up_ms > lag_time_max_ms
        }
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    def apply_isr(self, leader_epoch: int, partition_epoch: int, isr: tuple[int, ...]) -> bool:
        """The controller accepted an ISR change (AlterPartition). Ignored when a LeaderAndIsr moved
        the partition on meanwhile. True if the HW moved."""
        if leader_epoch != self.leader_epoch or partition_epoch <= self.partition_epoch:
            return False
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self.pending_isr = None
        return self.maybe_increment_high_watermark()

    def clear_pending_isr(self, proposal: IsrProposal) -> bool:
        """The controller refused `proposal` (or could not be reached): another may be made. A
        refused expansion's member no longer holds the HW back: True if the HW moved."""
        if self.pending_isr != proposal.isr:
            return False
        self.pending_isr = None
        return self.maybe_increment_high_watermark()

    # -- high watermark ------------------------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR, if that is higher than the current HW. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.local_broker_id:
                follower = self._followers.get(replica)
                new_hw = min(new_hw, follower.log_end_offset if follower is not None else UNKNOWN_OFFSET)
        if new_hw > self.high_watermark:
            self._update_high_watermark(new_hw)
            return True
        return False

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int = 0
    ) -> tuple[bool, IsrProposal | None]:
        """A follower fetching from `fetch_offset` holds everything below it: (whether the HW
        moved, an ISR expansion to propose)."""
        follower = self._followers.get(replica_id)
        if follower is None:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a follower of {self.topic}-{self.partition}",
            )
        follower.wake()
        leader_leo = self.log.log_end_offset
        previous_leo = follower.log_end_offset
        follower.log_end_offset = min(fetch_offset, leader_leo)
        if fetch_offset >= leader_leo:
            follower.last_caught_up_ms = now_ms
        elif fetch_offset >= follower.last_fetch_leader_leo:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.last_fetch_leader_leo, follower.last_fetch_ms = leader_leo, now_ms
        proposal = self._maybe_expand_isr(replica_id, follower)
        # the HW depends on this follower only through its LEO (as Kafka's updateFollowerFetchState)
        return follower.log_end_offset != previous_leo and self.maybe_increment_high_watermark(), proposal

    def rest_follower(self, replica_id: int, clock: FetchClock) -> bool:
        """Let `replica_id` rest on its fetch session's `clock` (see FollowerState) if it is an ISR
        member at this leader's LEO with no ISR change pending; whether it does."""
        follower = self._followers.get(replica_id)
        if (
            follower is None
            or replica_id not in self.isr
            or self.pending_isr is not None
            or follower.log_end_offset != self.log.log_end_offset
        ):
            return False
        follower.clock = clock
        return True

    def wake_follower(self, replica_id: int) -> None:
        """`replica_id`'s session no longer fetches this partition: its clock stops counting here."""
        follower = self._followers.get(replica_id)
        if follower is not None:
            follower.wake()

    def follower_log_end_offset(self, replica_id: int) -> int:
        follower = self._followers.get(replica_id)
        return follower.log_end_offset if follower is not None else UNKNOWN_OFFSET

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> EpochEndOffset | None:
        """Fetch v12+'s check (the leader answers): where the fetcher's log leaves this one, or None.
        Its last fetched epoch must end in this log at or after `fetch_offset`."""
        if last_fetched_epoch < 0:
            return None
        end = self.log.leader_epoch_cache.end_offset_for(last_fetched_epoch, self.log_end_offset)
        if end.leader_epoch == UNDEFINED_EPOCH:
            return None
        if end.leader_epoch != last_fetched_epoch or end.end_offset < fetch_offset:
            return end
        return None

    # -- follower ------------------------------------------------------------------------------

    def append_records_as_follower(self, records: memoryview, leader_high_watermark: int) -> None:
        """Append what the leader sent (offsets and epochs as they came), then take its HW."""
        if len(records):
            self.log.append_as_follower(records)
        self._update_high_watermark(
            max(self.log_start_offset, min(leader_high_watermark, self.log_end_offset))
        )

    def replace_log(self, log: Log) -> None:
        """Serve from `log` from now on: the future log of a move between log dirs, caught up with the
        current one (AlterReplicaLogDirs; replication/alter_log_dirs.py swaps them on the loop)."""
        self.log = log
        log.on_high_watermark_updated(self.high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Drop the log from `offset` (a follower diverging from its leader); the HW follows."""
        self.log.truncate_to(offset)
        self._update_high_watermark(min(self.high_watermark, self.log_end_offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it at `offset` (the leader's log starts past this whole log)."""
        self.log.truncate_fully_and_start_at(offset)
        self._update_high_watermark(offset)

    # -- checks --------------------------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = NO_LEADER_EPOCH, require_leader: bool = True) -> None:
        """Kafka's epoch fencing, then leadership; raises the matching KafkaError."""
        if current_leader_epoch != NO_LEADER_EPOCH and current_leader_epoch != self.leader_epoch:
            fenced = current_leader_epoch < self.leader_epoch
            raise KafkaError(
                ErrorCode.FENCED_LEADER_EPOCH if fenced else ErrorCode.UNKNOWN_LEADER_EPOCH,
                f"leader epoch {current_leader_epoch} is {'older' if fenced else 'newer'} than "
                f"{self.leader_epoch} of {self.topic}-{self.partition}",
            )
        if require_leader and not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} does not lead {self.topic}-{self.partition}",
            )

    # -- append --------------------------------------------------------------------------------

    def start_transaction_verification(
        self, producer_id: int, producer_epoch: int, now_ms: int
    ) -> VerificationGuard | None:
        """None when the producer's transaction is already ongoing here (no verification needed),
        else the guard its verified append must carry (replication/txn_verification.py)."""
        if self.has_ongoing_transaction(producer_id):
            return None
        expiration_ms = self.log.producer_state.producer_id_expiration_ms
        return self.verification.start(producer_id, producer_epoch, now_ms, expiration_ms)

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.log.producer_state.last_entry(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def append_records_to_leader(
        self, records: memoryview, required_acks: int, verified: Verified | None = None
    ) -> tuple[LogAppendInfo, bool]:
        """Append as leader; returns the append info and whether the HW moved. With `verified`
        (producer id, guard), the transactional batches of that producer need an ongoing
        transaction here or the guard still current (INVALID_TXN_STATE otherwise), and the guard
        is spent by the append."""
        self.check_leader()
        if verified is not None:
            producer_id, guard = verified
            if not self.has_ongoing_transaction(producer_id) and not self.verification.verified(
                producer_id, guard
            ):
                raise KafkaError(ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction")
        try:
            self._check_enough_replicas(required_acks)
            info = self.log.append_as_leader(records, self.leader_epoch)
        except OutOfOrderSequenceError:
            explained = self._refused.gap_error(records)
            if explained is None:
                raise
            raise explained from None
        except KafkaError as exc:
            if exc.code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR):
                self._refused.remember(records, exc)
            raise
        if self._refused:
            self._refused.appended(records)
        if verified is not None:
            self.verification.clear(verified[0])
        return info, self.maybe_increment_high_watermark()

    def append_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> tuple[LogAppendInfo, bool]:
        """Write a transaction marker as leader (see `Log.append_marker` for the epoch checks);
        returns the append info and whether the HW moved."""
        self.check_leader()
        self._check_enough_replicas(-1)
        info = self.log.append_marker(
            producer_id, producer_epoch, coordinator_epoch, commit, self.leader_epoch
        )
        self.verification.clear(producer_id)
        return info, self.maybe_increment_high_watermark()

    def _check_enough_replicas(self, required_acks: int) -> None:
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR {list(self.isr)} of {self.topic}-{self.partition} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}",
            )

    def check_enough_replicas_reached(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For an acks=-1 append ending before `required_offset`: (done, error code)."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # -- read ----------------------------------------------------------------------------------

    def fetchable_end(self, replica_id: int, isolation_level: int) -> int:
        """The offset a fetch may read up to (exclusive): LEO for replicas, else HW or LSO."""
        if replica_id >= 0:
            return self.log_end_offset
        if isolation_level == READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def at_fetchable_end(
        self,
        fetch_offset: int,
        replica_id: int,
        isolation_level: int,
        current_leader_epoch: int,
        last_fetched_epoch: int,
    ) -> bool:
        """Whether a fetch from `fetch_offset` has nothing to read and nothing to report, so that
        the offsets in memory answer it: this broker leads in the fetcher's epoch, the offset is the
        fetchable end, and a fetcher's last fetched epoch (v12+; -1 for consumers) is this log's
        latest, where no log diverges."""
        if self.leader_id != self.local_broker_id or current_leader_epoch not in (
            NO_LEADER_EPOCH,
            self.leader_epoch,
        ):
            return False
        log = self.log
        if last_fetched_epoch >= 0 and last_fetched_epoch != log.leader_epoch_cache.latest_epoch:
            return False
        end = self.fetchable_end(replica_id, isolation_level)
        return fetch_offset == end and fetch_offset >= log.log_start_offset

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        min_one_message: bool,
        replica_id: int = -1,
        current_leader_epoch: int = NO_LEADER_EPOCH,
    ) -> LogReadResult:
        """Whole batches from `fetch_offset` as at most one FileSlice (raises OffsetOutOfRangeError);
        a consumer's read_committed read also collects the aborted transactions overlapping
        [fetch_offset, LSO) (None otherwise)."""
        self.check_leader(current_leader_epoch)
        high_watermark = self.high_watermark
        end = self.fetchable_end(replica_id, isolation_level)
        info = self.log.read(fetch_offset, max_bytes, end, min_one_message)
        aborted = None
        if isolation_level == READ_COMMITTED and replica_id < 0:
            aborted = self.log.collect_aborted_transactions(fetch_offset, end) if info.total_bytes else []
        return LogReadResult(
            info.records,
            info.total_bytes,
            high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
            self.log_end_offset,
            aborted,
        )

    # -- offsets by timestamp ------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation_level: int | None,
        current_leader_epoch: int = NO_LEADER_EPOCH,
        fetch_only_from_leader: bool = True,
    ) -> TimestampAndOffset | None:
        """ListOffsets for one partition; `isolation_level` None is a replica asking (reads to LEO).

        None means no offset qualifies (the answer is offset -1, timestamp -1).
        """
        self.check_leader(current_leader_epoch, fetch_only_from_leader)
        if isolation_level is None:
            last_fetchable = self.log_end_offset
        else:
            last_fetchable = self.fetchable_end(-1, isolation_level)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
        epochs = self.log.leader_epoch_cache
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = self.log_start_offset
            return TimestampAndOffset(NO_TIMESTAMP, start, epochs.epoch_for(start))
        if timestamp == LATEST_TIERED_TIMESTAMP:  # no tiered storage: nothing is remote
            return TimestampAndOffset(NO_TIMESTAMP, UNKNOWN_OFFSET, NO_LEADER_EPOCH)
        if timestamp == MAX_TIMESTAMP:
            found = self.log.max_timestamp_offset()
        else:
            found = self.log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return None
        return TimestampAndOffset(found.timestamp, found.offset, epochs.epoch_for(found.offset))

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords as leader (Kafka's deleteRecordsOnLeader): move the log start offset up to
        `offset` (DELETE_TO_HIGH_WATERMARK: the high watermark) and return the new one. An offset
        past the high watermark or below -1 is OFFSET_OUT_OF_RANGE, a topic whose cleanup.policy
        lacks delete POLICY_VIOLATION."""
        self.check_leader()
        if not self.log.config.delete_enabled:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, f"{self.topic} does not have cleanup.policy delete")
        target = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0 or target > self.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is outside -1..the high watermark"
            )
        return self.log.advance_start_offset(target)

    # -- leader epochs ---------------------------------------------------------------------------

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch for one partition (the leader answers): the newest epoch at or below
        `leader_epoch` in this log and the offset where it ended (see `LeaderEpochFileCache`)."""
        self.check_leader(current_leader_epoch)
        return self.log.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
