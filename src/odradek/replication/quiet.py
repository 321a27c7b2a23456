"""Quiet partitions of a fetch session: what lets an incremental fetch skip a partition unread.

An incremental fetch (KIP-227) reads every partition of its session, and over many partitions most
have nothing new: a follower's session holds every partition it follows from this leader, and each
fetch is answered as soon as one of them gets data. Kafka reads and updates every one each time; so
did odradek, at about 4 us per partition in Python. A `QuietMark` lets the next fetches skip one.

Owns `QuietMark`: made (`mark`) on the loop turn of a read that found a partition at its fetchable
end with nothing to say (no error, no records, no divergence; for a follower: an ISR member at the
leader's LEO, with no ISR change pending, now resting on the session's `FetchClock`), holding the
partition object, the read request and what the read saw and told: leader and partition epochs,
log end, log start, high watermark and last stable offset. Also `SessionFetch`, an incremental
fetch's results with their marks (`ReplicaManager.fetch_session`).

Contract: while `holds` (the ReplicaManager still hosts the same partition object and none of those
moved, and the fetch asks at the same isolation level), a read of the partition would find nothing
and tell the fetcher nothing new, and a follower's fetch of it would change nothing but its times,
which its resting state gives (`FollowerState`). A request naming the partition, or forgetting it,
ends the mark (`release`: the follower wakes). A fetch that waits still watches the quiet partitions
(the ReplicaManager's dormant reads), so an append to one completes it as before.

Callers: the Fetch handler (server/handlers/fetch.py) through the ReplicaManager; the fetch session
holds the marks (server/fetch_session.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode
from odradek.replication.partition import READ_COMMITTED, FetchClock, Partition
from odradek.replication.types import FetchPartitionRequest, FetchPartitionResult


@dataclass(frozen=True, slots=True)
class QuietMark:
    hosted: Partition
    request: FetchPartitionRequest
    replica_id: int
    isolation_level: int
    leader_epoch: int
    partition_epoch: int
    log_end_offset: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    def holds(self, isolation_level: int) -> bool:
        hosted = self.hosted
        if (
            hosted.leader_epoch != self.leader_epoch
            or hosted.partition_epoch != self.partition_epoch
            or hosted.high_watermark != self.high_watermark
            or isolation_level != self.isolation_level
        ):
            return False
        log = hosted.log
        if log.log_end_offset != self.log_end_offset or log.log_start_offset != self.log_start_offset:
            return False
        if self.replica_id >= 0:
            return hosted.pending_isr is None
        return isolation_level != READ_COMMITTED or hosted.last_stable_offset == self.last_stable_offset

    def release(self) -> None:
        if self.replica_id >= 0:
            self.hosted.wake_follower(self.replica_id)


@dataclass(slots=True)
class SessionFetch:
    """An incremental fetch's outcome (`ReplicaManager.fetch_session`): a result and a quiet mark
    (or None) per partition read, and the results of the quiet partitions a change woke, by their
    index among the quiet ones."""

    results: list[FetchPartitionResult]
    marks: list[QuietMark | None]
    woken: dict[int, FetchPartitionResult]


def mark(
    hosted: Partition,
    request: FetchPartitionRequest,
    result: FetchPartitionResult,
    replica_id: int,
    isolation_level: int,
    clock: FetchClock,
) -> QuietMark | None:
    """The mark of a partition read as `result` just now, on this loop turn, if it is quiet (see
    the module docstring). The offsets are the ones `result` tells the fetcher."""
    if result.error_code != ErrorCode.NONE or result.size or result.diverging_epoch is not None:
        return None
    log = hosted.log
    if replica_id >= 0:
        end = log.log_end_offset
    elif isolation_level == READ_COMMITTED:
        end = result.last_stable_offset
    else:
        end = result.high_watermark
    if request.fetch_offset != end:
        return None  # nothing read for want of room in the response, not for want of data
    if replica_id >= 0 and not hosted.rest_follower(replica_id, clock):
        return None
    return QuietMark(
        hosted,
        request,
        replica_id,
        isolation_level,
        hosted.leader_epoch,
        hosted.partition_epoch,
        log.log_end_offset,
        result.log_start_offset,
        result.high_watermark,
        result.last_stable_offset,
    )
