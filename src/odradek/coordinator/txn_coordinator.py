"""The transaction coordinator of one broker (Kafka's TransactionCoordinator): the entry point the
transaction API handlers call.

Owns `__transaction_state` (auto-created on the first FindCoordinator with key type TRANSACTION:
transaction.state.log.num.partitions partitions, transaction.state.log.replication.factor capped at
the live brokers, min.insync.replicas transaction.state.log.min.isr, compacted) and its coordinator
runtime (runtime.py): one context per partition this broker leads, each running a `TxnShard`
(txn_shard.py: the transactional ids whose `partition_for(id)` it is, their transitions, markers and
timers). A context loads its partition when the broker becomes leader (requests answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile; FindCoordinator waits up to a second for the load event);
leadership lost closes it (NOT_COORDINATOR).

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn run as events of the id's
partition; AddPartitionsToTxn v4+ verify_only (`verify_partitions`), DescribeTransactions and
ListTransactions read the shards' state.

Dependencies, each a small Protocol the broker's objects satisfy: `ClusterMetadata` (the metadata
cache), `InternalTopicCreator` (the broker's auto topic creation), the runtime's `CoordinatorLog`
(the ReplicaManager), a `MarkerChannel` (txn_markers.py) and a `ProducerIdGenerator` (the
ProducerIdManager). It is itself the `TxnCoordinatorLocator` of the partition leaders' transaction
verification (replication/txn_verification.py).

Logging: a failed creation of `__transaction_state` is logged once per cause until a creation
succeeds; the shards log their own changes.

Error names follow Kafka's: PRODUCER_FENCED for an old epoch (handlers map it to
INVALID_PRODUCER_EPOCH for request versions that predate it), INVALID_PRODUCER_ID_MAPPING for an
unknown id or another producer id, INVALID_TXN_STATE for a request the state does not allow.
Callers: the transaction API handlers (through `broker.txn_coordinator`), the partition leaders'
verification of transactional produces (`verify_partitions`, `coordinator_id`), tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from odradek.clock import Clock
from odradek.coordinator.config import ConfigValues
from odradek.coordinator.coordinator import (
    FIND_COORDINATOR_LOAD_WAIT_S,
    ClusterMetadata,
    CoordinatorLocation,
    CoordinatorTopic,
    InternalTopicCreator,
)
from odradek.coordinator.partitioning import OFFSETS_TOPIC, TXN_TOPIC
from odradek.coordinator.runtime import (
    CoordinatorContext,
    CoordinatorLog,
    CoordinatorRuntime,
    ShardState,
    Timers,
)
from odradek.coordinator.txn_metadata import PREPARED, TopicPartition, TxnMetadata
from odradek.coordinator.txn_shard import (
    RUNTIME_CONFIG,
    MarkerChannel,
    ProducerIdGenerator,
    TxnSettings,
    TxnShard,
)
from odradek.protocol.errors import ErrorCode


class ClosableMarkerChannel(MarkerChannel, Protocol):
    """The marker channel the coordinator owns: closed at its shutdown."""

    async def close(self) -> None: ...


class TransactionCoordinator:
    def __init__(
        self,
        config: ConfigValues,
        clock: Clock,
        metadata: ClusterMetadata,
        topic_creator: InternalTopicCreator,
        txn_log: CoordinatorLog,
        markers: ClosableMarkerChannel,
        producer_ids: ProducerIdGenerator,
        timers: Timers,
    ) -> None:
        settings = TxnSettings(
            clock,
            markers,
            producer_ids,
            expiration_ms=config["transactional.id.expiration.ms"],
            abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )
        self._clock = clock
        self._metadata = metadata
        self._markers = markers
        self._runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            txn_log, RUNTIME_CONFIG, clock, lambda context: TxnShard(context, settings), timers
        )
        self._topic = CoordinatorTopic(metadata, topic_creator, TXN_TOPIC)
        self._offsets_topic = CoordinatorTopic(metadata, topic_creator, OFFSETS_TOPIC)

    # -- life cycle and leadership ----------------------------------------------------------------

    async def startup(self) -> None:
        self._runtime.startup()

    async def shutdown(self) -> None:
        await self._runtime.shutdown()
        await self._markers.close()

    def on_partition_loaded(self, partition: int, leader_epoch: int) -> None:
        self._runtime.on_partition_loaded(partition, leader_epoch)

    def on_partition_unloaded(self, partition: int) -> None:
        self._runtime.on_partition_unloaded(partition)

    def shards(self) -> dict[int, TxnShard]:
        return {partition: context.shard for partition, context in self._runtime.contexts().items()}

    def wake(self) -> None:
        """Make every shard look at the clock now (tests driving a ManualClock)."""
        self._runtime.wake()

    # -- FindCoordinator --------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> CoordinatorLocation:
        location, partition = await self._topic.locate(transactional_id)
        context = self._runtime.context(partition)
        if location.node is not None and context is not None:
            await context.wait_loaded(FIND_COORDINATOR_LOAD_WAIT_S)
        return location

    def coordinator_id(self, transactional_id: str) -> int | None:
        """The broker leading the id's `__transaction_state` partition, as the metadata cache knows
        it (None: no topic, or no leader)."""
        partition = self._topic.partition_for(transactional_id)
        state = self._metadata.partition(TXN_TOPIC, partition) if partition is not None else None
        if state is None or state.leader < 0:
            return None
        return int(state.leader)

    # -- the transaction APIs ---------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id; `producer_id`
        and `producer_epoch` are -1 or the producer's current ones (KIP-360)."""
        context, error = self._context_for(transactional_id)
        if context is None:
            return error, -1, -1
        shard = context.shard
        result = await context.submit(
            lambda _: shard.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch),
            lambda code: (code, -1, -1),
        )
        assert isinstance(result, tuple)
        return result

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> int:
        """AddPartitionsToTxn (AddOffsetsToTxn adds the group's `__consumer_offsets` partition)."""
        context, error = self._context_for(transactional_id)
        if context is None:
            return error
        shard, wanted = context.shard, frozenset(partitions)
        result = await context.submit(
            lambda _: shard.add_partitions(transactional_id, producer_id, producer_epoch, wanted), int
        )
        assert isinstance(result, int)
        return result

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> int:
        _, partition = await self._offsets_topic.locate(group_id)  # created here if need be
        if partition < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await self.add_partitions(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, partition)]
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        context, error = self._context_for(transactional_id)
        if context is None:
            return error
        shard = context.shard
        result = await context.submit(
            lambda _: shard.end_txn(transactional_id, producer_id, producer_epoch, commit), int
        )
        assert isinstance(result, int)
        return result

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ verify_only (Kafka's handleVerifyPartitionsInTransaction): the
        error per partition, adding nothing. TRANSACTION_ABORTABLE for a partition not in the
        transaction; an unknown id or another producer id INVALID_PRODUCER_ID_MAPPING, another
        epoch PRODUCER_FENCED, a transaction being completed CONCURRENT_TRANSACTIONS, for all."""
        keys = list(partitions)
        if not transactional_id:
            return dict.fromkeys(keys, ErrorCode.INVALID_REQUEST)
        context, error = self._context_for(transactional_id)
        if context is None:
            return dict.fromkeys(keys, error)
        current, error = context.shard.producer_txn(transactional_id, producer_id, producer_epoch)
        if current is None:
            return dict.fromkeys(keys, error)
        if current.state in PREPARED:
            return dict.fromkeys(keys, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {
            key: ErrorCode.NONE if key in current.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for key in keys
        }

    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        """DescribeTransactions: (error, the id's state)."""
        context, error = self._context_for(transactional_id)
        if context is None:
            return error, None
        meta = context.shard.txns.get(transactional_id)
        return (ErrorCode.NONE, meta) if meta is not None else (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list_transactions(self) -> tuple[int, list[TxnMetadata]]:
        """ListTransactions: every id of the loaded shards; COORDINATOR_LOAD_IN_PROGRESS while any loads."""
        error = ErrorCode.NONE
        found: list[TxnMetadata] = []
        for context in self._runtime.contexts().values():
            if context.state is ShardState.LOADING:
                error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            found.extend(context.shard.txns.values())
        return error, found

    # -- routing ----------------------------------------------------------------------------------

    def _context_for(self, transactional_id: str) -> tuple[CoordinatorContext[TxnShard] | None, int]:
        """The id's context if it serves, else the error that answers the request."""
        partition = self._topic.partition_for(transactional_id)
        context = self._runtime.context(partition)
        if context is None or not context.active:
            return None, self._runtime.unavailable(partition)
        return context, ErrorCode.NONE
