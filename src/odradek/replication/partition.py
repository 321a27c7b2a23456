"""One topic-partition as this broker sees it: its leader and ISR state, its log, its high watermark.

Owns, per partition: the state the controller assigned (leader, leader epoch, replicas, ISR,
controller epoch, partition epoch), the local `Log`, the high watermark (HW) and, when this broker
leads, the log end offset (LEO) of every follower by replica id.

Invariants:
- HW = min LEO over the ISR (this broker's own LEO for itself, the LEO each follower last proved by
  fetching for the others; a follower that has not fetched yet counts as -1). The HW never moves
  backwards while this broker leads and never passes the local LEO. A single node is the
  replication-factor-1 case of the same rule: the ISR is {self}, so an append moves the HW to the LEO.
- The last stable offset (LSO) equals the HW: there are no transactions yet.
- Consumers read below the HW (read_uncommitted) or the LSO (read_committed); replicas read to the LEO.
- A client that names a leader epoch (>= 0) older than ours is fenced (FENCED_LEADER_EPOCH), newer
  than ours is ahead of this broker (UNKNOWN_LEADER_EPOCH); -1 skips the check.
- A new leader epoch starts at the log end offset in the log's leader epoch cache (as Kafka's
  makeLeader does), so OffsetForLeaderEpoch answers for the new epoch before anything is written in
  it: `prepare_leader_epoch` writes that entry (an fsync) in the ReplicaManager's worker thread
  before the state is applied on the event loop.
- State changes only through `make_leader` / `make_follower`, which refuse (STALE_CONTROLLER_EPOCH)
  a state whose leader epoch is older than the current one, or equal with a partition epoch that is
  not newer; the ReplicaManager has already applied Kafka's request-level fencing.
- acks=-1 appends are refused with NOT_ENOUGH_REPLICAS while the ISR is smaller than
  min.insync.replicas, before anything is written.

Errors are raised as `KafkaError` (NOT_LEADER_OR_FOLLOWER, epochs, NOT_ENOUGH_REPLICAS) or come from
storage (`OffsetOutOfRangeError`, `RecordsError`, `KafkaStorageError`, each with `error_code`).

Callers: `ReplicaManager` only (it owns the partition map and the purgatories that HW moves wake).
Everything runs on the broker's event loop except `prepare_leader_epoch` (worker threads).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.controller.metadata import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import FileSlice
from odradek.protocol.records.batch import NO_TIMESTAMP
from odradek.storage.leader_epoch import EpochEndOffset
from odradek.storage.log import Log, LogAppendInfo

NO_LEADER_EPOCH = -1
UNKNOWN_OFFSET = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """Records read for one partition (at most one FileSlice) and the offsets a Fetch reports."""

    records: list[FileSlice]
    size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


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
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._follower_leos: dict[int, int] = {}

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
        return self.high_watermark

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def make_leader(self, state: PartitionState) -> bool:
        """Lead with `state`; followers' LEOs restart unknown on a new epoch. True if the HW moved."""
        self._check_newer(state)
        if state.leader_epoch != self.leader_epoch or not self.is_leader:
            self._follower_leos = {}
        self._apply(state)
        self._follower_leos = {r: self._follower_leos.get(r, UNKNOWN_OFFSET) for r in self._followers()}
        return self.maybe_increment_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Follow `state.leader`: keep the log and HW, forget followers. (No fetcher copies data yet.)"""
        self._check_newer(state)
        self._apply(state)
        self._follower_leos = {}

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

    def _followers(self) -> list[int]:
        return [r for r in self.replicas if r != self.local_broker_id]

    # -- high watermark ------------------------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR, if that is higher than the current HW. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log_end_offset
        for replica in self.isr:
            if replica != self.local_broker_id:
                new_hw = min(new_hw, self._follower_leos.get(replica, UNKNOWN_OFFSET))
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetching from `fetch_offset` holds everything below it. True if the HW moved."""
        if replica_id not in self._follower_leos:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a follower of {self.topic}-{self.partition}",
            )
        self._follower_leos[replica_id] = min(fetch_offset, self.log_end_offset)
        return self.maybe_increment_high_watermark()

    def follower_log_end_offset(self, replica_id: int) -> int:
        return self._follower_leos.get(replica_id, UNKNOWN_OFFSET)

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

    def append_records_to_leader(self, records: memoryview, required_acks: int) -> tuple[LogAppendInfo, bool]:
        """Append as leader; returns the append info and whether the HW moved."""
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR {list(self.isr)} of {self.topic}-{self.partition} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}",
            )
        info = self.log.append_as_leader(records, self.leader_epoch)
        return info, self.maybe_increment_high_watermark()

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

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        min_one_message: bool,
        replica_id: int = -1,
        current_leader_epoch: int = NO_LEADER_EPOCH,
    ) -> LogReadResult:
        """Whole batches from `fetch_offset` as at most one FileSlice (raises OffsetOutOfRangeError)."""
        self.check_leader(current_leader_epoch)
        high_watermark = self.high_watermark
        info = self.log.read(
            fetch_offset, max_bytes, self.fetchable_end(replica_id, isolation_level), min_one_message
        )
        return LogReadResult(
            info.records,
            info.total_bytes,
            high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
            self.log_end_offset,
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

    # -- leader epochs ---------------------------------------------------------------------------

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch for one partition (the leader answers): the newest epoch at or below
        `leader_epoch` in this log and the offset where it ended (see `LeaderEpochFileCache`)."""
        self.check_leader(current_leader_epoch)
        return self.log.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
