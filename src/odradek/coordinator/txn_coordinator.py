"""The transaction coordinator of one broker (Kafka's TransactionCoordinator and TransactionStateManager).

Owns `__transaction_state` (auto-created on the first FindCoordinator with key type TRANSACTION:
transaction.state.log.num.partitions partitions, transaction.state.log.replication.factor capped at
the live brokers, min.insync.replicas transaction.state.log.min.isr, compacted) and one shard per
partition this broker leads: the transactional ids whose `partition_for(id)` it is. A shard replays its
partition when the broker becomes leader (requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile),
then resumes the transactions found prepared; leadership lost drops the shard (NOT_COORDINATOR).
The coordinator epoch written into markers is the partition's leader epoch.

Every change is appended to the shard's partition with acks=-1 before it is kept and answered; while
a change or the markers of a transaction are in flight, other requests for the id answer
CONCURRENT_TRANSACTIONS (Kafka's pending transition). EndTxn answers once PrepareCommit/PrepareAbort
is in the log; the markers are then written to every partition of the transaction
(`TxnMarkerChannel`: local partitions directly, the others through their leaders' WriteTxnMarkers),
retried until each partition took its marker or no longer exists, and
CompleteCommit/CompleteAbort is appended.

Timers: every transaction.abort.timed.out.transaction.cleanup.interval.ms, Ongoing transactions older
than their timeout are aborted at a bumped epoch (the producer is fenced, as in Kafka 3.9); every
transaction.remove.expired.transaction.cleanup.interval.ms, ids idle (Empty, CompleteCommit,
CompleteAbort) for transactional.id.expiration.ms are removed with a tombstone.

Logging: INFO for an id initialized, a transaction aborted by its timeout and an id expired; DEBUG
for each load and each completed transaction. A failed creation of `__transaction_state` is logged
once per cause until a creation succeeds.

Error names follow Kafka's: PRODUCER_FENCED for an old epoch (handlers map it to
INVALID_PRODUCER_EPOCH for request versions that predate it), INVALID_PRODUCER_ID_MAPPING for an
unknown id or another producer id, INVALID_TXN_STATE for a request the state does not allow.
Callers: the transaction API handlers (through `broker.txn_coordinator`; DescribeTransactions and
ListTransactions read the shards' state), the partition leaders' verification of transactional
produces (replication/txn_verification.py, `verify_partitions`), tests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from odradek.coordinator.coordinator import CoordinatorLocation, CoordinatorTopic, ReplicaManagerOffsetsLog
from odradek.coordinator.partitioning import OFFSETS_TOPIC, TXN_TOPIC, partition_for
from odradek.coordinator.shard import ShardState
from odradek.coordinator.txn_markers import TxnMarkerChannel
from odradek.coordinator.txn_metadata import (
    COMPLETED,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TopicPartition,
    TxnMetadata,
    TxnState,
    completed,
    from_value,
    initialized,
    needs_new_producer_id,
    prepared,
    with_partitions,
)
from odradek.coordinator.txn_records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from odradek.protocol.records.record import iter_batch_records
from odradek.replication.replica_manager import TxnMarker
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

_LOAD_BUFFER_BYTES = 5 << 20
_LOG_WAIT_ATTEMPTS = 50
_LOG_WAIT_INTERVAL_S = 0.02
_WRITE_TIMEOUT_MS = 5000
_MARKER_TIMEOUT_MS = 5000
_RETRY_BACKOFF_S = 0.1
_FIND_COORDINATOR_LOAD_WAIT_S = 1.0

# What an append error to __transaction_state means to a client (Kafka's mapping).
_APPEND_ERRORS: dict[int, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
# A marker answered with these is done: the partition is gone or the producer moved on past it.
_FINAL_MARKER_ERRORS = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)


class TxnShard:
    """The transactional ids of one `__transaction_state` partition led here."""

    def __init__(self, partition: int, coordinator_epoch: int) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.state = ShardState.LOADING
        self.txns: dict[str, TxnMetadata] = {}
        self.busy: set[str] = set()  # ids with a write or markers in flight
        self.tasks: set[asyncio.Task[None]] = set()


class TransactionCoordinator:
    def __init__(self, broker: Any, config: Any) -> None:
        self._broker = broker
        self._clock = broker.clock
        self._expiration_ms: int = config["transactional.id.expiration.ms"]
        self._abort_interval_ms: int = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._expire_interval_ms: int = config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        self._log = ReplicaManagerOffsetsLog(broker, TXN_TOPIC)
        self._markers = TxnMarkerChannel(broker)
        self._shards: dict[int, TxnShard] = {}
        self._topic = CoordinatorTopic(broker, TXN_TOPIC)
        self._offsets_topic = CoordinatorTopic(broker, OFFSETS_TOPIC)
        self._timers: list[asyncio.Task[None]] = []

    # -- life cycle and leadership ----------------------------------------------------------------

    async def startup(self) -> None:
        self._timers = [
            asyncio.get_running_loop().create_task(
                self._every(self._abort_interval_ms, self._abort_timed_out)
            ),
            asyncio.get_running_loop().create_task(self._every(self._expire_interval_ms, self._expire_ids)),
        ]

    async def shutdown(self) -> None:
        await cancel_and_wait(*self._timers)
        for partition in list(self._shards):
            await self._close(self._shards.pop(partition))
        await self._markers.close()

    def on_partition_loaded(self, partition: int, leader_epoch: int) -> None:
        current = self._shards.get(partition)
        if (
            current is not None
            and current.state is not ShardState.CLOSED
            and current.coordinator_epoch >= leader_epoch
        ):
            return
        if current is not None:
            self._close_later(current)
        shard = TxnShard(partition, leader_epoch)
        self._shards[partition] = shard
        self._spawn(shard, self._load(shard))

    def on_partition_unloaded(self, partition: int) -> None:
        shard = self._shards.pop(partition, None)
        if shard is not None:
            self._close_later(shard)

    def _close_later(self, shard: TxnShard) -> None:
        asyncio.get_running_loop().create_task(self._close(shard))

    async def _close(self, shard: TxnShard) -> None:
        shard.state = ShardState.CLOSED
        await cancel_and_wait(*shard.tasks)
        shard.txns.clear()

    def _spawn(self, shard: TxnShard, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        shard.tasks.add(task)
        task.add_done_callback(shard.tasks.discard)

    async def _load(self, shard: TxnShard) -> None:
        try:
            shard.txns = await self._replay(shard.partition)
        except Exception:
            log.exception("Loading %s-%d failed", TXN_TOPIC, shard.partition)
            shard.state = ShardState.CLOSED
            return
        shard.state = ShardState.ACTIVE
        log.debug("Loaded %d transactional ids from %s-%d", len(shard.txns), TXN_TOPIC, shard.partition)
        for meta in list(shard.txns.values()):
            if meta.state in PREPARED:
                shard.busy.add(meta.transactional_id)
                self._spawn(shard, self._complete(shard, meta))

    async def _replay(self, partition: int) -> dict[str, TxnMetadata]:
        offset, end = await self._log_range(partition)
        txns: dict[str, TxnMetadata] = {}
        while offset < end:
            data = self._log.read(partition, offset, _LOAD_BUFFER_BYTES)
            if not data:
                break
            for header, records in iter_batch_records(data):
                if not header.is_control:
                    for record in records:
                        _apply(txns, record.key, record.value)
                offset = header.next_offset
            await asyncio.sleep(0)
        return txns

    async def _log_range(self, partition: int) -> tuple[int, int]:
        for _ in range(_LOG_WAIT_ATTEMPTS):
            span = self._log.log_range(partition)
            if span is not None:
                return span
            await asyncio.sleep(_LOG_WAIT_INTERVAL_S)
        raise RuntimeError(f"no log for {TXN_TOPIC}-{partition}")

    # -- FindCoordinator --------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> CoordinatorLocation:
        location, partition = await self._topic.locate(transactional_id)
        if location.node is not None:
            await self._wait_loaded(self._shards.get(partition))
        return location

    async def _wait_loaded(self, shard: TxnShard | None) -> None:
        deadline = self._clock.monotonic_ms() + _FIND_COORDINATOR_LOAD_WAIT_S * 1000
        while shard is not None and shard.state is ShardState.LOADING:
            if self._clock.monotonic_ms() >= deadline:
                return
            await asyncio.sleep(0.005)

    # -- the transaction APIs ---------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id; `producer_id`
        and `producer_epoch` are -1 or the producer's current ones (KIP-360)."""
        shard, error = self._shard_for(transactional_id)
        if shard is None:
            return error, -1, -1
        current = shard.txns.get(transactional_id)
        expected_epoch = producer_epoch if producer_id != NO_PRODUCER_ID else None
        error = _init_error(current, producer_id, producer_epoch)
        if error == ErrorCode.NONE and transactional_id in shard.busy:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return error, -1, -1
        now = self._clock.time_ms()
        if current is not None and current.state is TxnState.ONGOING:
            fenced = replace(prepared(current, False, now, fence=True), timeout_ms=timeout_ms)
            error = await self._prepare(shard, fenced)
            return error or ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        new_producer_id = -1
        if needs_new_producer_id(current, expected_epoch):
            new_producer_id = await self._new_producer_id(shard, transactional_id)
        meta = initialized(current, transactional_id, new_producer_id, timeout_ms, now, expected_epoch)
        if meta is None:
            log.info(
                "Fencing an InitProducerId of %s at epoch %d: the current epoch is %d",
                transactional_id,
                producer_epoch,
                current.producer_epoch if current is not None else -1,
            )
            return ErrorCode.PRODUCER_FENCED, -1, -1
        error = await self._store(shard, meta)
        if error != ErrorCode.NONE:
            return error, -1, -1
        log.info(
            "Initialized transactional id %s: producer id %d epoch %d",
            transactional_id,
            meta.producer_id,
            meta.producer_epoch,
        )
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    async def _new_producer_id(self, shard: TxnShard, transactional_id: str) -> int:
        """A new producer id; the id is busy meanwhile, so a concurrent InitProducerId answers
        CONCURRENT_TRANSACTIONS instead of storing another producer id."""
        shard.busy.add(transactional_id)
        try:
            return await self._broker.producer_id_manager.generate_producer_id()
        finally:
            shard.busy.discard(transactional_id)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> int:
        """AddPartitionsToTxn (AddOffsetsToTxn adds the group's `__consumer_offsets` partition)."""
        shard, current, error = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if shard is None or current is None:
            return error
        if transactional_id in shard.busy or current.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if current.state is not TxnState.ONGOING and current.state not in COMPLETED:
            return ErrorCode.INVALID_TXN_STATE
        wanted = frozenset(partitions)
        if current.state is TxnState.ONGOING and wanted <= current.partitions:
            return ErrorCode.NONE
        return await self._store(shard, with_partitions(current, wanted, self._clock.time_ms()))

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
        shard, current, error = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if shard is None or current is None:
            return error
        if transactional_id in shard.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if current.state is not TxnState.ONGOING:
            return _end_txn_state_error(current.state, commit)
        return await self._prepare(shard, prepared(current, commit, self._clock.time_ms()))

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
        _, current, error = self._producer_txn(transactional_id, producer_id, producer_epoch)
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
        shard, error = self._shard_for(transactional_id)
        if shard is None:
            return error, None
        meta = shard.txns.get(transactional_id)
        return (ErrorCode.NONE, meta) if meta is not None else (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list_transactions(self) -> tuple[int, list[TxnMetadata]]:
        """ListTransactions: every id of the loaded shards; COORDINATOR_LOAD_IN_PROGRESS while any loads."""
        error = ErrorCode.NONE
        found: list[TxnMetadata] = []
        for shard in self._shards.values():
            if shard.state is ShardState.LOADING:
                error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            found.extend(shard.txns.values())
        return error, found

    def shards(self) -> dict[int, TxnShard]:
        return dict(self._shards)

    # -- writes and markers -----------------------------------------------------------------------

    def _producer_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TxnShard | None, TxnMetadata | None, int]:
        """The shard and transaction of a producer's request, or the error that answers it."""
        shard, error = self._shard_for(transactional_id)
        if shard is None:
            return None, None, error
        current = shard.txns.get(transactional_id)
        error = _producer_error(current, producer_id, producer_epoch)
        return (shard, current, error) if error == ErrorCode.NONE else (None, None, error)

    def _shard_for(self, transactional_id: str) -> tuple[TxnShard | None, int]:
        topic = self._broker.metadata_cache.topic(TXN_TOPIC)
        if topic is None:
            return None, ErrorCode.NOT_COORDINATOR
        shard = self._shards.get(partition_for(transactional_id, len(topic.partitions)))
        if shard is None or shard.state is ShardState.CLOSED:
            return None, ErrorCode.NOT_COORDINATOR
        if shard.state is ShardState.LOADING:
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return shard, ErrorCode.NONE

    async def _store(self, shard: TxnShard, meta: TxnMetadata, tombstone: bool = False) -> int:
        """Append `meta` (or the id's tombstone) and keep it once committed; the client's error."""
        transactional_id = meta.transactional_id
        shard.busy.add(transactional_id)
        try:
            error = await self._append(
                shard, transactional_id, None if tombstone else encode_value(meta.to_value())
            )
        finally:
            shard.busy.discard(transactional_id)
        if error == ErrorCode.NONE and shard.state is ShardState.ACTIVE:
            if tombstone:
                shard.txns.pop(transactional_id, None)
            else:
                shard.txns[transactional_id] = meta
        return error if shard.state is ShardState.ACTIVE else ErrorCode.NOT_COORDINATOR

    async def _append(self, shard: TxnShard, transactional_id: str, value: bytes | None) -> int:
        record = SimpleRecord(value=value, key=encode_key(transactional_id), timestamp=self._clock.time_ms())
        try:
            code = await self._log.append(shard.partition, build_batch([record]), _WRITE_TIMEOUT_MS)
        except Exception:
            log.exception("Appending to %s-%d failed", TXN_TOPIC, shard.partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if code != ErrorCode.NONE:
            log.warning("Could not store transactional id %s: error %d", transactional_id, code)
            return _APPEND_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)
        return ErrorCode.NONE

    async def _prepare(self, shard: TxnShard, meta: TxnMetadata) -> int:
        """Store PrepareCommit/PrepareAbort, then write the markers and complete in the background."""
        error = await self._store(shard, meta)
        if error == ErrorCode.NONE:
            shard.busy.add(meta.transactional_id)
            self._spawn(shard, self._complete(shard, meta))
        return error

    async def _complete(self, shard: TxnShard, meta: TxnMetadata) -> None:
        try:
            await self._write_markers(shard, meta)
            done = completed(meta, self._clock.time_ms())
            while shard.state is ShardState.ACTIVE:
                if await self._store(shard, done) == ErrorCode.NONE:
                    break
                await asyncio.sleep(_RETRY_BACKOFF_S)
            outcome = "committed" if meta.commit else "aborted"
            log.debug(
                "Transaction of %s %s (%d partitions)", meta.transactional_id, outcome, len(meta.partitions)
            )
        finally:
            shard.busy.discard(meta.transactional_id)

    async def _write_markers(self, shard: TxnShard, meta: TxnMetadata) -> None:
        marker = TxnMarker(meta.producer_id, meta.producer_epoch, shard.coordinator_epoch, meta.commit)
        remaining = set(meta.partitions)
        while remaining and shard.state is ShardState.ACTIVE:
            results = await self._markers.write(marker, remaining, _MARKER_TIMEOUT_MS)
            remaining = {key for key, code in results.items() if code not in _FINAL_MARKER_ERRORS}
            if remaining:
                await asyncio.sleep(_RETRY_BACKOFF_S)

    # -- timers -----------------------------------------------------------------------------------

    async def _every(self, interval_ms: int, work: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await work()
            except Exception:
                log.exception("Transaction coordinator timer failed")

    async def _abort_timed_out(self) -> None:
        for shard, meta in self._idle_candidates():
            now = self._clock.time_ms()
            if _timed_out(meta, now):
                log.info(
                    "Aborting the transaction of %s: open longer than %d ms",
                    meta.transactional_id,
                    meta.timeout_ms,
                )
                await self._prepare(shard, prepared(meta, False, now, fence=True))

    async def _expire_ids(self) -> None:
        for shard, meta in self._idle_candidates():
            if meta.state in COMPLETED and meta.last_update_ms + self._expiration_ms < self._clock.time_ms():
                log.info("Expiring transactional id %s", meta.transactional_id)
                await self._store(shard, meta, tombstone=True)

    def _idle_candidates(self) -> Iterator[tuple[TxnShard, TxnMetadata]]:
        """Each id of each loaded shard with nothing in flight, as it is when reached (the caller
        awaits between ids, so the state is read again at each step)."""
        for shard in list(self._shards.values()):
            for transactional_id in list(shard.txns):
                meta = shard.txns.get(transactional_id)
                if (
                    meta is not None
                    and shard.state is ShardState.ACTIVE
                    and transactional_id not in shard.busy
                ):
                    yield shard, meta


def _apply(txns: dict[str, TxnMetadata], key: bytes | None, value: bytes | None) -> None:
    if key is None:
        return
    try:
        transactional_id = decode_key(key)
        if value is None:
            txns.pop(transactional_id, None)
        else:
            txns[transactional_id] = from_value(transactional_id, decode_value(value))
    except ValueError as exc:  # a TxnRecordFormatError, or a status no state has
        log.warning("Skipping an undecodable %s record: %s", TXN_TOPIC, exc)


def _init_error(current: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
    """InitProducerId's checks before the epoch's (Kafka's isValidProducerId, KIP-360): a producer
    id given must be the current one, or the one before a new producer id was given for an
    exhausted epoch (a retry of that InitProducerId); a transaction being completed answers
    CONCURRENT_TRANSACTIONS."""
    if current is None:
        return ErrorCode.NONE
    if producer_id != NO_PRODUCER_ID and not (
        producer_id == current.producer_id
        or (producer_id == current.last_producer_id and producer_epoch >= MAX_PRODUCER_EPOCH)
    ):
        return ErrorCode.PRODUCER_FENCED
    if current.state in PREPARED:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.NONE


def _producer_error(current: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
    if current is None or current.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if current.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def _end_txn_state_error(state: TxnState, commit: bool) -> int:
    """EndTxn outside Ongoing: a retry of the decision already made succeeds, anything else fails."""
    if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return ErrorCode.NONE
    if state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.INVALID_TXN_STATE


def _timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    return meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now_ms
