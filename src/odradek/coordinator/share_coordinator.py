"""The share coordinator of one broker (Kafka's ShareCoordinator, KIP-932): the durable state of
share-partitions in `__share_group_state`.

Owns `__share_group_state` (auto-created on first use: share.coordinator.state.topic.num.partitions
partitions, share.coordinator.state.topic.replication.factor capped at the live brokers,
min.insync.replicas share.coordinator.state.topic.min.isr, compacted) and its coordinator runtime
(runtime.py): one context per partition led here, each running a `ShareStateShard` holding the
`ShareState` of every share-partition whose key `group:topicId:partition` (Kafka's
asCoordinatorKey) hashes to it (partitioning.py, Kafka's hash). A context loads its partition when
the broker becomes its leader (share_records.py's replay); leadership lost closes it.

Writes are events of the key's context, appended with acks=-1 before they answer (runtime.py): a
write of a share-partition's state is a ShareUpdate record carrying the batches given, or a
ShareSnapshot of the merged state once `share.coordinator.snapshot.update.records.per.snapshot`
updates followed the last snapshot. Fencing (Kafka's): a write with a state epoch older than the
stored one answers FENCED_STATE_EPOCH, with an older leader epoch FENCED_LEADER_EPOCH.

The API (what the share partition leaders, server/share_partitions.py, and the share group side
call; each answers an ErrorCode, NONE on success):
- `read_state(key) -> (error, ShareState | None)`: None when the share-partition has no state;
- `initialize_state(key, state_epoch, start_offset) -> error`: a fresh snapshot without batches;
- `write_state(key, state_epoch, leader_epoch, start_offset, batches) -> error`;
- `delete_state(key) -> error`: tombstones;
- `has_state(key) -> bool`.
Errors of a key whose partition is not led here: NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS
while it loads). This broker calls it in-process; the inter-broker share coordinator APIs (83-87)
are not served yet.

Callers: server/share_partitions.py (`broker.share_partitions`), the broker's leadership
listener, tests.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from odradek.clock import Clock
from odradek.coordinator.config import ConfigValues
from odradek.coordinator.coordinator import (
    FIND_COORDINATOR_LOAD_WAIT_S,
    ClusterMetadata,
    CoordinatorLocation,
    CoordinatorTopic,
    InternalTopicCreator,
)
from odradek.coordinator.runtime import (
    CoordinatorContext,
    CoordinatorLog,
    CoordinatorRuntime,
    Loaded,
    RuntimeConfig,
    Timers,
)
from odradek.coordinator.share_partition import StateBatch
from odradek.coordinator.share_records import (
    ShareState,
    StateKey,
    merge,
    replay,
    snapshot_record,
    tombstones,
    update_record,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.record import Record

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"
_LOAD_WAIT_S = 10.0


class ShareStateShard:
    """The share-partition states of one `__share_group_state` partition led here."""

    def __init__(self, context: CoordinatorContext[ShareStateShard], clock: Clock, per_snapshot: int) -> None:
        self._context = context
        self._clock = clock
        self._per_snapshot = per_snapshot
        self.states: dict[StateKey, ShareState] = {}
        self._updates: dict[StateKey, int] = {}  # updates written since the key's last snapshot

    def replay(self, header: BatchHeader, records: list[Record]) -> None:
        if not header.is_control:
            for record in records:
                replay(self.states, record.key, record.value)

    def loaded(self, loaded: Loaded) -> None:
        log.debug("Loaded %d share-partition states from %s", len(self.states), self._context.name)

    def unloaded(self) -> None:
        self.states.clear()
        self._updates.clear()

    # -- events of the writer -------------------------------------------------------------------

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> int:
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        now = self._clock.time_ms()
        state = ShareState(
            state_epoch, current.leader_epoch if current else -1, start_offset, (), 0, now, now
        )
        return await self._snapshot(key, state)

    async def write(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> int:
        current = self.states.get(key)
        if current is None:
            now = self._clock.time_ms()
            state = ShareState(state_epoch, leader_epoch, start_offset, (), 0, now, now)
            return await self._snapshot(key, _merged(state, start_offset, batches))
        if state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        merged = _merged(current, start_offset, batches, leader_epoch)
        if self._updates.get(key, 0) >= self._per_snapshot:
            snapshot = ShareState(
                merged.state_epoch,
                merged.leader_epoch,
                merged.start_offset,
                merged.batches,
                current.snapshot_epoch + 1,
                current.create_timestamp,
                self._clock.time_ms(),
            )
            return await self._snapshot(key, snapshot)
        record = update_record(key, current.snapshot_epoch, leader_epoch, start_offset, batches)
        appended = await self._context.write([SimpleRecord(record[1], record[0])])
        if appended.error == ErrorCode.NONE:
            self.states[key] = merged
            self._updates[key] = self._updates.get(key, 0) + 1
        return appended.error

    async def delete(self, key: StateKey) -> int:
        if key not in self.states:
            return ErrorCode.NONE
        appended = await self._context.write([SimpleRecord(v, k) for k, v in tombstones(key)])
        if appended.error == ErrorCode.NONE:
            self.states.pop(key, None)
            self._updates.pop(key, None)
        return appended.error

    async def _snapshot(self, key: StateKey, state: ShareState) -> int:
        record = snapshot_record(key, state)
        appended = await self._context.write([SimpleRecord(record[1], record[0])])
        if appended.error == ErrorCode.NONE:
            self.states[key] = state
            self._updates[key] = 0
        return appended.error


def _merged(
    state: ShareState, start_offset: int, batches: Sequence[StateBatch], leader_epoch: int | None = None
) -> ShareState:
    start = start_offset if start_offset >= 0 else state.start_offset
    return ShareState(
        state.state_epoch,
        state.leader_epoch if leader_epoch is None else max(state.leader_epoch, leader_epoch),
        start,
        merge(state, start, batches),
        state.snapshot_epoch,
        state.create_timestamp,
        state.write_timestamp,
    )


class ShareCoordinator:
    """`__share_group_state` and the share-partition states of the partitions led here."""

    def __init__(
        self,
        config: ConfigValues,
        clock: Clock,
        metadata: ClusterMetadata,
        topic_creator: InternalTopicCreator,
        state_log: CoordinatorLog,
        timers: Timers,
    ) -> None:
        per_snapshot = config["share.coordinator.snapshot.update.records.per.snapshot"]
        runtime_config = RuntimeConfig(
            SHARE_STATE_TOPIC,
            config["share.coordinator.load.buffer.size"],
            config["share.coordinator.write.timeout.ms"],
            {},
            "Share coordinator shard",
        )
        self._runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            state_log,
            runtime_config,
            clock,
            lambda context: ShareStateShard(context, clock, per_snapshot),
            timers,
        )
        self._topic = CoordinatorTopic(metadata, topic_creator, SHARE_STATE_TOPIC)

    async def startup(self) -> None:
        self._runtime.startup()

    async def shutdown(self) -> None:
        await self._runtime.shutdown()

    def on_partition_loaded(self, partition: int, leader_epoch: int) -> None:
        self._runtime.on_partition_loaded(partition, leader_epoch)

    def on_partition_unloaded(self, partition: int) -> None:
        self._runtime.on_partition_unloaded(partition)

    def shards(self) -> dict[int, ShareStateShard]:
        return {partition: context.shard for partition, context in self._runtime.contexts().items()}

    async def find_coordinator(self, key: str) -> CoordinatorLocation:
        """The leader of the key's `__share_group_state` partition (FindCoordinator key type SHARE,
        and the share-partition leaders' routing), once loaded when it is this broker."""
        location, partition = await self._topic.locate(key)
        context = self._runtime.context(partition)
        if location.node is not None and context is not None:
            await context.wait_loaded(FIND_COORDINATOR_LOAD_WAIT_S)
        return location

    async def locate(self, key: str) -> int:
        """The key's `__share_group_state` partition (the topic created if need be; -1 without it)."""
        _, partition = await self._topic.locate(key)
        return partition

    # -- the API --------------------------------------------------------------------------------

    async def read_state(self, key: StateKey) -> tuple[int, ShareState | None]:
        context, error = await self._context_for(key)
        if context is None:
            return error, None
        return ErrorCode.NONE, context.shard.states.get(key)

    async def has_state(self, key: StateKey) -> bool:
        return (await self.read_state(key))[1] is not None

    async def initialize_state(self, key: StateKey, state_epoch: int, start_offset: int) -> int:
        context, error = await self._context_for(key)
        if context is None:
            return error
        shard = context.shard
        return await self._submit(context, lambda _: shard.initialize(key, state_epoch, start_offset))

    async def write_state(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> int:
        context, error = await self._context_for(key)
        if context is None:
            return error
        shard = context.shard
        return await self._submit(
            context, lambda _: shard.write(key, state_epoch, leader_epoch, start_offset, batches)
        )

    async def delete_state(self, key: StateKey) -> int:
        context, error = await self._context_for(key)
        if context is None:
            return error
        shard = context.shard
        return await self._submit(context, lambda _: shard.delete(key))

    def local_states(self, group_id: str) -> dict[StateKey, ShareState]:
        """The states of `group_id` kept by the partitions led here."""
        return {
            key: state
            for shard in self.shards().values()
            for key, state in shard.states.items()
            if key.group_id == group_id
        }

    async def _submit(self, context: CoordinatorContext[ShareStateShard], event: object) -> int:
        result = await context.submit(event, int)  # type: ignore[arg-type]
        assert isinstance(result, int)
        return result

    async def _context_for(self, key: StateKey) -> tuple[CoordinatorContext[ShareStateShard] | None, int]:
        """The active context of the key's partition (waiting for its load), or the error."""
        partition = await self.locate(key.coordinator_key())
        if partition < 0:
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        context = self._runtime.context(partition)
        if context is not None and not context.active:
            await context.wait_loaded(_LOAD_WAIT_S)
        if context is None or not context.active:
            return None, self._runtime.unavailable(partition)
        return context, ErrorCode.NONE
