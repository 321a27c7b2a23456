"""The transaction coordinator's state machine over one `__transaction_state` partition led by this
broker (Kafka's TransactionStateManager for one partition), run by the coordinator runtime
(runtime.py: loading, the single writer, append then apply, timers, closing).

Owns the transactional ids of the partition (`TxnMetadata`, pure transitions in txn_metadata.py).
Loading replays the partition (the last value of an id wins, a tombstone removes it), then resumes
the transactions found prepared. The transaction APIs run as events of the partition's writer: a
change is appended with acks=-1 and kept only once committed, then answered; a request for an id
waits behind the event before it (Kafka instead answers CONCURRENT_TRANSACTIONS while another
write of the id is in flight: with one writer there is never one). A new producer id is drawn from
the `ProducerIdGenerator` inside the event.

Pending transitions: once PrepareCommit/PrepareAbort is in the log, EndTxn is answered and the
markers are written in the background (`MarkerChannel`: to every partition of the transaction,
retried every _RETRY_BACKOFF_S until each partition took its marker or no longer exists); then
CompleteCommit/CompleteAbort is appended (retried the same way). Until then the id is pending:
InitProducerId, AddPartitionsToTxn and EndTxn answer CONCURRENT_TRANSACTIONS (Kafka's pending
state), and the timers leave it alone. The coordinator epoch written into markers is the
partition's leader epoch.

Timers (runtime timers on the injected clock): every
transaction.abort.timed.out.transaction.cleanup.interval.ms, Ongoing transactions older than their
timeout are aborted at a bumped epoch (the producer is fenced, as in Kafka 3.9); every
transaction.remove.expired.transaction.cleanup.interval.ms, ids idle (Empty, CompleteCommit,
CompleteAbort) for transactional.id.expiration.ms are removed with a tombstone.

Logging: INFO for an id initialized, a transaction aborted by its timeout and an id expired; DEBUG
for each load and each completed transaction; WARNING for a change that could not be stored.

Callers: `TransactionCoordinator` only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from odradek.clock import Clock
from odradek.coordinator.partitioning import TXN_TOPIC
from odradek.coordinator.runtime import CoordinatorContext, Loaded, RuntimeConfig
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
from odradek.coordinator.txn_records import decode_key, decode_value, encode_key, encode_value
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.record import Record
from odradek.replication.types import TxnMarker

log = logging.getLogger(__name__)

_LOAD_BUFFER_BYTES = 5 << 20
_WRITE_TIMEOUT_MS = 5000
_MARKER_TIMEOUT_MS = 5000
_RETRY_BACKOFF_S = 0.1
_ABORT_TIMER = "abort-timed-out-transactions"
_EXPIRE_TIMER = "expire-transactional-ids"

# A marker answered with these is done: the partition is gone or the producer moved on past it.
_FINAL_MARKER_ERRORS = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)

RUNTIME_CONFIG = RuntimeConfig(
    TXN_TOPIC, _LOAD_BUFFER_BYTES, _WRITE_TIMEOUT_MS, {}, "Transaction coordinator shard"
)


class MarkerChannel(Protocol):
    """Where the markers of a transaction go (txn_markers.py: local partitions and their leaders)."""

    async def write(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]: ...


class ProducerIdGenerator(Protocol):
    """The broker's producer ids (the ProducerIdManager)."""

    async def generate_producer_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TxnSettings:
    """What every shard of the transaction coordinator shares: its settings and dependencies."""

    clock: Clock
    markers: MarkerChannel
    producer_ids: ProducerIdGenerator
    expiration_ms: int  # transactional.id.expiration.ms
    abort_interval_ms: int  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    expire_interval_ms: int  # transaction.remove.expired.transaction.cleanup.interval.ms


class TxnShard:
    """The transactional ids of one `__transaction_state` partition led here."""

    def __init__(self, context: CoordinatorContext[TxnShard], settings: TxnSettings) -> None:
        self._context = context
        self._settings = settings
        self._clock = settings.clock
        self.partition = context.partition
        self.txns: dict[str, TxnMetadata] = {}
        self.pending: set[str] = set()  # ids whose markers are being written

    # -- loading (the runtime's calls) ------------------------------------------------------------

    def replay(self, header: BatchHeader, records: list[Record]) -> None:
        if not header.is_control:
            for record in records:
                _apply(self.txns, record.key, record.value)

    def loaded(self, loaded: Loaded) -> None:
        log.debug("Loaded %d transactional ids from %s-%d", len(self.txns), TXN_TOPIC, self.partition)
        for meta in list(self.txns.values()):
            if meta.state in PREPARED:
                self._start_completion(meta)
        settings = self._settings
        self._context.every(_ABORT_TIMER, settings.abort_interval_ms, self._abort_timed_out)
        self._context.every(_EXPIRE_TIMER, settings.expire_interval_ms, self._expire_ids)

    def unloaded(self) -> None:
        self.txns.clear()
        self.pending.clear()

    # -- the transaction APIs (events of the writer) ----------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id; `producer_id`
        and `producer_epoch` are -1 or the producer's current ones (KIP-360)."""
        current = self.txns.get(transactional_id)
        expected_epoch = producer_epoch if producer_id != NO_PRODUCER_ID else None
        error = _init_error(current, producer_id, producer_epoch)
        if error == ErrorCode.NONE and transactional_id in self.pending:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return error, -1, -1
        now = self._clock.time_ms()
        if current is not None and current.state is TxnState.ONGOING:
            fenced = replace(prepared(current, False, now, fence=True), timeout_ms=timeout_ms)
            error = await self._prepare(fenced)
            return error or ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        new_producer_id = -1
        if needs_new_producer_id(current, expected_epoch):
            new_producer_id = await self._settings.producer_ids.generate_producer_id()
        meta = initialized(current, transactional_id, new_producer_id, timeout_ms, now, expected_epoch)
        if meta is None:
            log.info(
                "Fencing an InitProducerId of %s at epoch %d: the current epoch is %d",
                transactional_id,
                producer_epoch,
                current.producer_epoch if current is not None else -1,
            )
            return ErrorCode.PRODUCER_FENCED, -1, -1
        error = await self._store(meta)
        if error != ErrorCode.NONE:
            return error, -1, -1
        log.info(
            "Initialized transactional id %s: producer id %d epoch %d",
            transactional_id,
            meta.producer_id,
            meta.producer_epoch,
        )
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> int:
        """AddPartitionsToTxn (AddOffsetsToTxn adds the group's `__consumer_offsets` partition)."""
        current, error = self.producer_txn(transactional_id, producer_id, producer_epoch)
        if current is None:
            return error
        if transactional_id in self.pending or current.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if current.state is not TxnState.ONGOING and current.state not in COMPLETED:
            return ErrorCode.INVALID_TXN_STATE
        if current.state is TxnState.ONGOING and partitions <= current.partitions:
            return ErrorCode.NONE
        return await self._store(with_partitions(current, partitions, self._clock.time_ms()))

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        current, error = self.producer_txn(transactional_id, producer_id, producer_epoch)
        if current is None:
            return error
        if transactional_id in self.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if current.state is not TxnState.ONGOING:
            return _end_txn_state_error(current.state, commit)
        return await self._prepare(prepared(current, commit, self._clock.time_ms()))

    def producer_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TxnMetadata | None, int]:
        """The transaction of a producer's request, or the error that answers it."""
        current = self.txns.get(transactional_id)
        error = _producer_error(current, producer_id, producer_epoch)
        return (current, error) if error == ErrorCode.NONE else (None, error)

    # -- writes and markers -----------------------------------------------------------------------

    async def _store(self, meta: TxnMetadata, tombstone: bool = False) -> int:
        """Append `meta` (or the id's tombstone) and keep it once committed; the client's error."""
        transactional_id = meta.transactional_id
        value = None if tombstone else encode_value(meta.to_value())
        record = SimpleRecord(value=value, key=encode_key(transactional_id), timestamp=self._clock.time_ms())
        appended = await self._context.write([record])
        if appended.code != ErrorCode.NONE:
            log.warning("Could not store transactional id %s: error %d", transactional_id, appended.code)
        if not self._context.active:
            return ErrorCode.NOT_COORDINATOR
        if appended.error == ErrorCode.NONE:
            if tombstone:
                self.txns.pop(transactional_id, None)
            else:
                self.txns[transactional_id] = meta
        return appended.error

    async def _prepare(self, meta: TxnMetadata) -> int:
        """Store PrepareCommit/PrepareAbort, then write the markers and complete in the background."""
        error = await self._store(meta)
        if error == ErrorCode.NONE:
            self._start_completion(meta)
        return error

    def _start_completion(self, meta: TxnMetadata) -> None:
        self.pending.add(meta.transactional_id)
        self._context.spawn(self._complete(meta))

    async def _complete(self, meta: TxnMetadata) -> None:
        """Background: the markers, then CompleteCommit/CompleteAbort through the writer."""
        try:
            await self._write_markers(meta)
            done = completed(meta, self._clock.time_ms())
            while self._context.active:
                if await self._context.submit(lambda _: self._store_completed(done), int) == ErrorCode.NONE:
                    break
                await asyncio.sleep(_RETRY_BACKOFF_S)
            outcome = "committed" if meta.commit else "aborted"
            log.debug(
                "Transaction of %s %s (%d partitions)", meta.transactional_id, outcome, len(meta.partitions)
            )
        finally:
            self.pending.discard(meta.transactional_id)

    async def _store_completed(self, done: TxnMetadata) -> int:
        error = await self._store(done)
        if error == ErrorCode.NONE:
            self.pending.discard(done.transactional_id)
        return error

    async def _write_markers(self, meta: TxnMetadata) -> None:
        coordinator_epoch = self._context.leader_epoch
        marker = TxnMarker(meta.producer_id, meta.producer_epoch, coordinator_epoch, meta.commit)
        remaining = set(meta.partitions)
        while remaining and self._context.active:
            results = await self._settings.markers.write(marker, remaining, _MARKER_TIMEOUT_MS)
            remaining = {key for key, code in results.items() if code not in _FINAL_MARKER_ERRORS}
            if remaining:
                await asyncio.sleep(_RETRY_BACKOFF_S)

    # -- timers -----------------------------------------------------------------------------------

    async def _abort_timed_out(self) -> None:
        for meta in self._idle_candidates():
            now = self._clock.time_ms()
            if _timed_out(meta, now):
                log.info(
                    "Aborting the transaction of %s: open longer than %d ms",
                    meta.transactional_id,
                    meta.timeout_ms,
                )
                await self._prepare(prepared(meta, False, now, fence=True))

    async def _expire_ids(self) -> None:
        expiration_ms = self._settings.expiration_ms
        for meta in self._idle_candidates():
            if meta.state in COMPLETED and meta.last_update_ms + expiration_ms < self._clock.time_ms():
                log.info("Expiring transactional id %s", meta.transactional_id)
                await self._store(meta, tombstone=True)

    def _idle_candidates(self) -> Iterator[TxnMetadata]:
        """Each id with nothing pending, as it is when reached (the caller writes between ids, so
        the state is read again at each step)."""
        for transactional_id in list(self.txns):
            meta = self.txns.get(transactional_id)
            if meta is not None and self._context.active and transactional_id not in self.pending:
                yield meta


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
