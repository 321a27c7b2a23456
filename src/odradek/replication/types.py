"""The values the ReplicaManager takes and answers: appends, fetches, list-offsets lookups, markers.

Owns the value types of the replication paths, apart from the ReplicaManager that computes them, so
that the modules beside it (delayed.py, quiet.py), the handlers and the coordinators name them
without importing the ReplicaManager:
- produce: `PartitionResponse` (one partition's append outcome), `TxnMarker` (a WriteTxnMarkers
  marker to write);
- fetch: `FetchPartitionRequest`, `FetchParams`, `FetchPartitionResult` (an incremental fetch's
  outcome, `SessionFetch`, is quiet.py's: it carries the quiet marks);
- list offsets: `ListOffsetsPartitionRequest`, `ListOffsetsPartitionResult`;
- leadership: `LeadershipChange`, told to the ReplicaManager's leadership listeners;
- `TopicPartition` (protocol/topic_partition.py), re-exported as the key of all of these.

The per-partition values of Produce and Fetch are NamedTuples, not frozen dataclasses: one is built
per partition of every request, and a NamedTuple costs a third as much to build.

Callers: the ReplicaManager and its helpers (delayed.py, quiet.py), the Produce / Fetch / ListOffsets
/ WriteTxnMarkers handlers, the broker and the transaction coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from odradek.protocol.primitives import FileSlice
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import NO_LEADER_EPOCH, UNKNOWN_OFFSET
from odradek.storage.leader_epoch import EpochEndOffset
from odradek.storage.txn_index import AbortedTxn

__all__ = [
    "FetchParams",
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "LeadershipChange",
    "ListOffsetsPartitionRequest",
    "ListOffsetsPartitionResult",
    "PartitionResponse",
    "TopicPartition",
    "TxnMarker",
]


class PartitionResponse(NamedTuple):
    """The outcome of appending to one partition (Produce's PartitionProduceResponse fields)."""

    error_code: int
    base_offset: int = UNKNOWN_OFFSET
    log_append_time: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None


class TxnMarker(NamedTuple):
    """A transaction marker to write (WriteTxnMarkers): `commit` False writes an ABORT."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


class FetchPartitionRequest(NamedTuple):
    """One partition of a fetch as the ReplicaManager reads it."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_LEADER_EPOCH
    last_fetched_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int


class FetchPartitionResult(NamedTuple):
    """One partition of a fetch: error code, offsets, and the records (zero or one FileSlice)."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    records: tuple[FileSlice, ...] | list[FileSlice] = ()
    size: int = 0
    error_message: str | None = None
    diverging_epoch: EpochEndOffset | None = None
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionRequest:
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResult:
    topic: str
    partition: int
    error_code: int
    timestamp: int = -1
    offset: int = UNKNOWN_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """A partition became leader (`is_leader`) or follower, or was stopped (not leader, epoch -1)."""

    topic: str
    partition: int
    is_leader: bool
    leader_epoch: int
