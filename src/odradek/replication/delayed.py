"""The two requests the ReplicaManager parks in purgatory: DelayedProduce and DelayedFetch.

DelayedProduce (acks=-1) watches the partitions it appended to and completes once every one of them
has its high watermark at or past the end of its append (NONE), lost leadership
(NOT_LEADER_OR_FOLLOWER), lost its ISR below min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND),
or disappeared (UNKNOWN_TOPIC_OR_PARTITION); partitions still waiting at the deadline answer
REQUEST_TIMED_OUT. `settle_appends` is that check: the ReplicaManager makes it once right after the
append and creates a DelayedProduce only for a request with partitions left waiting (an ISR of the
leader alone moves the high watermark on the append, so such a request is answered at once, with no
operation, future or timer). Kafka creates the DelayedProduce for every acks=-1 request with an
appended partition and lets tryCompleteElseWatch complete it at once; the answer is the same.

DelayedFetch (the fetch long poll) completes when the bytes available below each partition's
fetchable end (HW, LSO, or LEO for replicas), capped per partition at partition_max_bytes, add up to
min_bytes; or when a partition errors (unknown, not leader, fenced epoch, fetch offset outside
[log start offset, log end offset], as after retention or a truncation); or at max_wait_ms,
returning whatever is there. It re-estimates a partition only when its fetchable end moved, and
with min_bytes <= 1 any data at all is enough, so a retry reads no log unless min_bytes is larger.
With min_bytes <= 1 a change to one partition (`try_complete_for`) looks at that partition only:
a tailing fetch over many partitions is not rescanned on every append. Completing re-reads every
partition with the response limits (the partitions with nothing new cost no log read); with
min_bytes <= 1 only the partitions a change was reported for since the first read (whose answers,
no bytes and no error, the others keep: every append, high watermark move and leadership change
reports its partition, and a Produce reports all its partitions before it retries any). The shared
`max_bytes` comes out the same, as the others hold no bytes. A partition
the leader's replication throttle holds back from this follower (KIP-73) counts no bytes, so a
throttled follower's fetch waits max_wait_ms instead of coming back empty at once.

Invariants: both complete exactly once (see odradek.purgatory). Neither copies record bytes.

Callers: `ReplicaManager` only (as `Replicas`: the three methods these operations ask of it).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.purgatory import DelayedOperation
from odradek.replication.partition import Partition
from odradek.replication.types import (
    FetchParams,
    FetchPartitionRequest,
    FetchPartitionResult,
    PartitionResponse,
    TopicPartition,
)


class Replicas(Protocol):
    """What the delayed operations ask of the ReplicaManager."""

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    def leader_throttles(self, hosted: Partition, replica_id: int) -> bool: ...

    def read_from_log(
        self, requests: list[FetchPartitionRequest], max_bytes: int, isolation_level: int, replica_id: int
    ) -> list[FetchPartitionResult]: ...


def settle_appends(
    replicas: Replicas,
    waiting: dict[TopicPartition, int],
    responses: dict[TopicPartition, PartitionResponse],
) -> bool:
    """Drop from `waiting` (partition -> offset its acks=-1 append ends before) every partition whose
    outcome is known, recording a failure in `responses`; True when none is left waiting."""
    for key, required_offset in list(waiting.items()):
        partition = replicas.partition(*key)
        if partition is None:
            done, code = True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            done, code = partition.check_enough_replicas_reached(required_offset)
        if done:
            del waiting[key]
            if code != ErrorCode.NONE:
                responses[key] = responses[key]._replace(error_code=code)
    return not waiting


class DelayedProduce(DelayedOperation):
    """An acks=-1 produce waiting for the high watermark to pass its appended offsets."""

    def __init__(
        self,
        delay_ms: int,
        replica_manager: Replicas,
        responses: dict[TopicPartition, PartitionResponse],
        required_offsets: dict[TopicPartition, int],
    ) -> None:
        """`required_offsets`: the partitions still waiting, owned by the operation from now on."""
        super().__init__(delay_ms)
        self._replica_manager = replica_manager
        self._responses = responses
        self._waiting = required_offsets

    def try_complete(self) -> bool:
        return settle_appends(self._replica_manager, self._waiting, self._responses) and self.force_complete()

    def on_complete(self) -> dict[TopicPartition, PartitionResponse]:
        for key in self._waiting:
            self._responses[key] = self._responses[key]._replace(error_code=ErrorCode.REQUEST_TIMED_OUT)
        return self._responses


class DelayedFetch(DelayedOperation):
    """A fetch waiting for min_bytes of new data below the fetchable end of its partitions."""

    def __init__(
        self,
        replica_manager: Replicas,
        requests: list[FetchPartitionRequest],
        params: FetchParams,
        first_read: list[FetchPartitionResult] | None = None,
    ) -> None:
        """`first_read`: with min_bytes <= 1, the answers of the read that found nothing, kept for
        the partitions no change is reported for."""
        super().__init__(params.max_wait_ms)
        self._replica_manager = replica_manager
        self._requests = requests
        self._params = params
        self._seen_end = [-1] * len(requests)
        self._available_bytes = [0] * len(requests)
        self._indexes: dict[Hashable, list[int]] = {}
        for index, request in enumerate(requests):
            self._indexes.setdefault((request.topic, request.partition), []).append(index)
        self._first_read = first_read
        self._changed: set[int] = set()

    def keys(self) -> list[Hashable]:
        """The partitions to watch."""
        return list(self._indexes)

    def try_complete(self) -> bool:
        accumulated = 0
        for index in range(len(self._requests)):
            available = self._available(index)
            if available is None:
                return self.force_complete()
            accumulated += available
        return accumulated >= self._params.min_bytes and self.force_complete()

    def try_complete_for(self, key: Hashable) -> bool:
        """With min_bytes <= 1 one partition with data (or an error) is enough: an append looks at
        the partition it changed only. A larger min_bytes adds up every partition."""
        if self._params.min_bytes > 1:
            return self.try_complete()
        indexes = self._indexes.get(key, ())
        self._changed.update(indexes)
        for index in indexes:
            available = self._available(index)
            if available is None or available > 0:
                return self.force_complete()
        return False

    def note_change(self, key: Hashable) -> None:
        self._changed.update(self._indexes.get(key, ()))

    def _available(self, index: int) -> int | None:
        """The bytes partition `index` has for this fetch (re-estimated only when its fetchable end
        moved), or None when the fetch must complete now to report an error."""
        request, params = self._requests[index], self._params
        partition = self._replica_manager.partition(request.topic, request.partition)
        if partition is None or not (
            partition.log_start_offset <= request.fetch_offset <= partition.log_end_offset
        ):
            return None  # gone, or the offset left the log: the read will say why
        if self._replica_manager.leader_throttles(partition, params.replica_id):
            return 0  # KIP-73: a throttled partition's bytes do not complete the fetch (Kafka's rule)
        end = partition.fetchable_end(params.replica_id, params.isolation_level)
        try:
            partition.check_leader(request.current_leader_epoch)
            if end != self._seen_end[index]:
                self._available_bytes[index] = self._estimate(partition, request, end)
                self._seen_end[index] = end
        except KafkaError:  # unknown epoch, not leader, offset out of range, storage failure
            return None
        return self._available_bytes[index]

    def _estimate(self, partition: Partition, request: FetchPartitionRequest, end: int) -> int:
        if end <= request.fetch_offset:
            return 0
        if self._params.min_bytes <= 1:
            return 1
        read = partition.read_records(
            request.fetch_offset,
            request.partition_max_bytes,
            self._params.isolation_level,
            True,
            self._params.replica_id,
        )
        return min(read.size, request.partition_max_bytes)

    def on_complete(self) -> list[FetchPartitionResult]:
        params, first_read = self._params, self._first_read
        if first_read is None:
            return self._replica_manager.read_from_log(
                self._requests, params.max_bytes, params.isolation_level, params.replica_id
            )
        changed = sorted(self._changed)
        fresh = self._replica_manager.read_from_log(
            [self._requests[index] for index in changed],
            params.max_bytes,
            params.isolation_level,
            params.replica_id,
        )
        results = list(first_read)
        for index, result in zip(changed, fresh, strict=True):
            results[index] = result
        return results
