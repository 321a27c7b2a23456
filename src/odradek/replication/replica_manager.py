"""The ReplicaManager: this broker's partitions, and the produce/fetch/list-offsets paths across them.

Owns:
- the map (topic, partition) -> `Partition` of every partition with a replica on this broker, kept
  in step with cluster metadata: it listens to the `MetadataBackend` and leads, follows or stops
  (and deletes) partitions as topics are created, changed and deleted;
- the two purgatories: `produce_purgatory` (acks=-1 appends waiting for the high watermark) and
  `fetch_purgatory` (fetch long polls). An append retries the fetches watching its partition (the
  LEO moved) and, when the high watermark moved, the produces; a replica's fetch that moves the
  high watermark retries both;
- the high watermark checkpoint `replication-offset-checkpoint` at the root of each log dir (Kafka's
  text format, written by temp file and rename): read at `start()`, written every
  replica.high.watermark.checkpoint.interval.ms and at `shutdown()`.

Behaviour (Kafka's): appends with acks 0/1 answer at once; acks=-1 appends answer when every
partition's high watermark reached the end of its append or at timeout_ms (REQUEST_TIMED_OUT).
Fetches answer at once when max_wait_ms <= 0, min_bytes is already there, or a partition errors;
otherwise they wait in purgatory. The response's max_bytes is shared by partitions in request order;
the first batch of the first partition with data is returned even when larger than the limits.
Per-partition failures become error codes, never exceptions.

Invariants: everything runs on the broker's event loop; record bytes are never read into Python
on these paths (reads hand out `FileSlice`s, appends pass the request's memoryview to the log).

Callers: the Produce / Fetch / ListOffsets handlers, the group coordinator (appends to and reads
from __consumer_offsets), the broker (construction, start, shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from odradek.clock import Clock
from odradek.controller.metadata import MetadataBackend, PartitionState, TopicChange, TopicMetadata
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import FileSlice
from odradek.purgatory import DelayedOperationPurgatory
from odradek.replication.delayed import DelayedFetch, DelayedProduce
from odradek.replication.partition import NO_LEADER_EPOCH, UNKNOWN_OFFSET, Partition, TimestampAndOffset
from odradek.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_checkpoint, write_checkpoint
from odradek.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_CHECKPOINT_INTERVAL_MS = 5000  # replica.high.watermark.checkpoint.interval.ms


@dataclass(frozen=True, slots=True)
class PartitionResponse:
    """The outcome of appending to one partition (Produce's PartitionProduceResponse fields)."""

    error_code: int
    base_offset: int = UNKNOWN_OFFSET
    log_append_time: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None


class FetchPartitionRequest(NamedTuple):
    """One partition of a fetch as the ReplicaManager reads it. This and `FetchPartitionResult` are
    NamedTuples, not frozen dataclasses: one of each is built per partition per Fetch, and a
    NamedTuple costs a third as much to build."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_LEADER_EPOCH


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


class ReplicaManager:
    """Partitions hosted by this broker; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        metadata: MetadataBackend,
        clock: Clock,
        *,
        log_dirs: Iterable[str | Path] = (),
        checkpoint_interval_ms: int = DEFAULT_CHECKPOINT_INTERVAL_MS,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.clock = clock
        self.produce_purgatory = DelayedOperationPurgatory("Produce", clock)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", clock)
        self._log_dirs = [Path(directory) for directory in log_dirs]
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._partitions: dict[TopicPartition, Partition] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._checkpointed_hws: dict[TopicPartition, int] = {}
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Read the HW checkpoints, take up every partition in metadata, follow metadata changes and
        (inside a running loop, with log dirs and a positive interval) checkpoint periodically."""
        for directory in self._log_dirs:
            self._checkpointed_hws.update(read_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT))
        for topic in self.metadata.topics().values():
            self._apply_topic(topic)
        self.metadata.add_listener(self.on_topic_change)
        if self._log_dirs and self._checkpoint_interval_ms > 0:
            self._checkpoint_task = asyncio.get_running_loop().create_task(
                self._checkpoint_periodically(), name="high-watermark-checkpoint"
            )

    async def shutdown(self) -> None:
        """Stop the periodic checkpoint (letting a write in progress finish), then write the final one."""
        self._stopping.set()
        if self._checkpoint_task is not None:
            await self._checkpoint_task
            self._checkpoint_task = None
        self.checkpoint_high_watermarks()

    async def _checkpoint_periodically(self) -> None:
        interval_s = self._checkpoint_interval_ms / 1000
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), interval_s)
            except TimeoutError:
                snapshot = self._high_watermarks_by_dir()
                try:
                    await asyncio.to_thread(_write_checkpoints, snapshot)
                except OSError:
                    log.exception("Writing the high watermark checkpoint failed")

    def checkpoint_high_watermarks(self) -> None:
        """Write `replication-offset-checkpoint` in every log dir (partitions whose log lives there)."""
        _write_checkpoints(self._high_watermarks_by_dir())

    def _high_watermarks_by_dir(self) -> dict[Path, dict[TopicPartition, int]]:
        by_dir: dict[Path, dict[TopicPartition, int]] = {directory: {} for directory in self._log_dirs}
        for key, partition in self._partitions.items():
            by_dir.setdefault(partition.log.dir.parent, {})[key] = partition.high_watermark
        return by_dir

    # -- partitions ------------------------------------------------------------------------------

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with `topic_id`, or None if there is no such topic."""
        name = self._topic_names.get(topic_id)
        if name is None:
            topic = self.metadata.topic_by_id(topic_id)
            name = topic.name if topic is not None else None
        return name

    def become_leader(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
    ) -> Partition:
        """Lead topic-partition with `state` (leader must be this broker), creating its log if needed."""
        if state.leader != self.broker_id:
            raise ValueError(f"{topic}-{partition}: leader {state.leader} is not broker {self.broker_id}")
        hosted = self._get_or_create(topic, partition, config, topic_id)
        self._complete_delayed(topic, partition, hw_moved=hosted.make_leader(state))
        return hosted

    def become_follower(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
    ) -> Partition:
        """Host a follower replica with `state`; requests that need the leader get
        NOT_LEADER_OR_FOLLOWER. (No replica fetcher copies the leader's data yet.)"""
        hosted = self._get_or_create(topic, partition, config, topic_id)
        hosted.make_follower(state)
        self._complete_delayed(topic, partition, hw_moved=False)
        return hosted

    def stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Stop hosting topic-partition; with `delete` also remove its log. Waiting requests complete."""
        hosted = self._partitions.pop((topic, partition), None)
        if hosted is not None and not any(p.topic_id == hosted.topic_id for p in self._partitions.values()):
            self._topic_names.pop(hosted.topic_id, None)
        self._checkpointed_hws.pop((topic, partition), None)
        self._complete_delayed(topic, partition, hw_moved=True)
        if delete:
            self.log_manager.delete_log(topic, partition)

    def _get_or_create(
        self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID | None
    ) -> Partition:
        key = (topic, partition)
        hosted = self._partitions.get(key)
        if hosted is None:
            if topic_id is None:
                known = self.metadata.topic(topic)
                topic_id = known.topic_id if known is not None else uuid.UUID(int=0)
            partition_log = self.log_manager.get_or_create_log(topic, partition, config)
            hosted = Partition(
                topic, partition, topic_id, self.broker_id, partition_log, self._checkpointed_hws.get(key, 0)
            )
            self._partitions[key] = hosted
            self._topic_names[topic_id] = topic
        return hosted

    def log_config(self, configs: Mapping[str, str]) -> LogConfig:
        """The LogConfig of a topic: the LogManager's defaults with the topic's log overrides."""
        overrides = {key: value for key, value in configs.items() if key in TOPIC_CONFIG_NAMES}
        return LogConfig.from_topic_configs(overrides, self.log_manager.default_config)

    def on_topic_change(self, change: TopicChange) -> None:
        """Metadata listener: host new and changed partitions, stop deleted or moved-away ones."""
        previous = change.previous.partitions if change.previous is not None else {}
        current = change.current.partitions if change.current is not None else {}
        for index in previous.keys() - current.keys():
            self.stop_replica(change.name, index, delete=True)
        if change.current is not None:
            self._apply_topic(change.current)

    def _apply_topic(self, topic: TopicMetadata) -> None:
        config = self.log_config(topic.configs)
        for index, state in topic.partitions.items():
            if self.broker_id not in state.replicas:
                if (topic.name, index) in self._partitions:
                    self.stop_replica(topic.name, index, delete=True)
            elif state.leader == self.broker_id:
                self.become_leader(topic.name, index, state, config, topic.topic_id)
            else:
                self.become_follower(topic.name, index, state, config, topic.topic_id)

    def _complete_delayed(self, topic: str, partition: int, hw_moved: bool) -> None:
        key = (topic, partition)
        self.fetch_purgatory.check_and_complete(key)
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)

    # -- produce ---------------------------------------------------------------------------------

    async def append_records(
        self, entries: Mapping[TopicPartition, memoryview], acks: int, timeout_ms: int
    ) -> dict[TopicPartition, PartitionResponse]:
        """Append to each partition as leader; with acks=-1 wait for the high watermark (or timeout)."""
        responses: dict[TopicPartition, PartitionResponse] = {}
        required_offsets: dict[TopicPartition, int] = {}
        for key, records in entries.items():
            responses[key], next_offset = self._append_to_partition(key, records, acks)
            if responses[key].error_code == ErrorCode.NONE:
                required_offsets[key] = next_offset
        if acks != -1 or not required_offsets:
            return responses
        operation = DelayedProduce(timeout_ms, self, responses, required_offsets)
        return await self.produce_purgatory.try_complete_else_watch(operation, required_offsets)

    def _append_to_partition(
        self, key: TopicPartition, records: memoryview, acks: int
    ) -> tuple[PartitionResponse, int]:
        """The partition's response and the offset after the append (-1 when it failed)."""
        hosted = self._partitions.get(key)
        if hosted is None:
            message = f"{key[0]}-{key[1]} is not hosted by broker {self.broker_id}"
            return PartitionResponse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=message), -1
        try:
            info, hw_moved = hosted.append_records_to_leader(records, acks)
        except KafkaError as exc:  # storage and batch validation errors are KafkaErrors too
            log.info("Refused an append to %s-%d: %s (error %d)", *key, exc.message, exc.code)
            return PartitionResponse(exc.code, error_message=exc.message), -1
        except Exception as exc:
            log.exception("Appending to %s-%d failed", *key)
            return PartitionResponse(ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(exc)), -1
        self._complete_delayed(*key, hw_moved=hw_moved)
        response = PartitionResponse(
            ErrorCode.NONE, info.first_offset, info.log_append_time, info.log_start_offset
        )
        return response, info.last_offset + 1

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
        results = self.read_from_log(requests, max_bytes, isolation_level, replica_id)
        if replica_id >= 0:
            results = self._update_follower_fetch_state(replica_id, requests, results)
        if (
            max_wait_ms <= 0
            or not requests
            or sum(result.size for result in results) >= min_bytes
            or any(result.error_code != ErrorCode.NONE for result in results)
        ):
            return results
        params = FetchParams(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level)
        operation = DelayedFetch(self, requests, params)
        keys = {(request.topic, request.partition) for request in requests}
        return await self.fetch_purgatory.try_complete_else_watch(operation, keys)

    def read_from_log(
        self, requests: list[FetchPartitionRequest], max_bytes: int, isolation_level: int, replica_id: int
    ) -> list[FetchPartitionResult]:
        """One read per partition, in order, sharing `max_bytes` (see the module docstring)."""
        limit = max_bytes
        min_one_message = True
        results = []
        for request in requests:
            result = self._read_partition(request, limit, isolation_level, replica_id, min_one_message)
            if result.size:
                min_one_message = False
                limit = max(0, limit - result.size)
            results.append(result)
        return results

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
            return FetchPartitionResult(topic, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
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
        )

    def _update_follower_fetch_state(
        self, replica_id: int, requests: list[FetchPartitionRequest], results: list[FetchPartitionResult]
    ) -> list[FetchPartitionResult]:
        """Record each follower's fetch offset as its LEO. A broker that is not a replica of the
        partition gets no records for it (as in Kafka), the other partitions are unaffected."""
        updated = []
        for request, result in zip(requests, results, strict=True):
            hosted = self._partitions.get((request.topic, request.partition))
            if hosted is not None and result.error_code == ErrorCode.NONE:
                try:
                    if hosted.update_follower_fetch_state(replica_id, request.fetch_offset):
                        self._complete_delayed(request.topic, request.partition, hw_moved=True)
                except KafkaError as exc:
                    log.warning("Ignoring the fetch position of broker %d: %s", replica_id, exc.message)
                    result = result._replace(records=(), size=0)
            updated.append(result)
        return updated

    # -- list offsets ----------------------------------------------------------------------------

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
            return ListOffsetsPartitionResult(topic, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
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


def _write_checkpoints(by_dir: Mapping[Path, Mapping[TopicPartition, int]]) -> None:
    for directory, offsets in by_dir.items():
        write_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT, offsets)
