"""A blocking transactional producer, and the reading of a group's committed offsets.

Owns:
- `TransactionalProducer`: the `Producer` of one transactional id. `init_transactions` finds the
  transaction coordinator (FindCoordinator, key type TRANSACTION) and asks InitProducerId with the
  id and `transaction_timeout_ms`: the coordinator answers a producer id and a new epoch, which
  fences every earlier producer of the same id and aborts (or, if its commit was already decided,
  completes) the transaction that producer left open. `begin` starts a transaction; `send`/`flush`
  are `Producer`'s, but before the first batch to a partition the partition is added to the
  transaction (AddPartitionsToTxn), and every batch carries the producer id, epoch, per-partition
  sequence numbers and the transactional attribute (so a retried request is deduplicated by the
  partition leader). `send_offsets` adds a group's offsets to the transaction (AddOffsetsToTxn, then
  TxnOffsetCommit to the group coordinator); `commit` flushes and ends the transaction with EndTxn
  (commit), `abort` drops what is buffered and ends it with EndTxn (abort). A transaction may
  also be left open after `flush` and ended elsewhere, from its ids, by `end_transaction`.
- `committed_offsets`: a group's committed offsets (OffsetFetch at its coordinator), by default
  with require_stable, so offsets pending in an open transaction are waited for, not skipped.

Behaviour: coordinator requests are retried with a short backoff until the client's `timeout_s`
while the answer is COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS (the previous
transaction's markers are still being written), UNSTABLE_OFFSET_COMMIT, or NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE / a broken connection (the coordinator is looked up again). A retried
EndTxn whose transaction already completed the same way answers NONE. PRODUCER_FENCED and
INVALID_PRODUCER_EPOCH (a newer producer of the same transactional id exists, or the coordinator
aborted the transaction after its timeout) raise `ProducerFencedError`; the producer is then
unusable. Any other failure inside a transaction leaves it to be aborted (`abort`, or the next
InitProducerId of the same id).

Invariants: at most one transaction open at a time; acks are always all (-1), as Kafka requires of
an idempotent producer. Not thread-safe. Callers: odradek.spark (the exactly-once sink), tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.client import KafkaClient
from odradek.client.connection import BrokerConnection
from odradek.client.producer import Producer
from odradek.client.types import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from odradek.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from odradek.protocol.messages.end_txn import EndTxnRequest
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.protocol.messages.offset_fetch import OffsetFetchRequest
from odradek.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType

GROUP_KEY, TRANSACTION_KEY = 0, 1
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
_BACKOFF_S = 0.05
_MAX_SEQUENCE = 0x7FFFFFFF
_REFIND = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_WAIT = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class ProducerFencedError(KafkaError):
    """A newer producer of the same transactional id exists (or the transaction timed out)."""

    def __init__(self, code: int, transactional_id: str, doing: str) -> None:
        super().__init__(
            code,
            f"transactional id {transactional_id!r} was fenced while {doing}: a newer producer with this"
            " id was initialized, or the coordinator aborted the transaction after its timeout",
        )


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str | None


class _Coordinators:
    """Coordinator lookups (cached per key) and coordinator requests retried as the module says."""

    def __init__(self, client: KafkaClient) -> None:
        self._client = client
        self._known: dict[tuple[int, str], BrokerConnection] = {}

    def call(
        self, key_type: int, key: str, api_key: int, request: Any, error_of: Callable[[Any], int]
    ) -> Any:
        """The coordinator's answer to `request` once `error_of` it is NONE; raises KafkaError."""
        deadline = time.monotonic() + self._client.timeout_s
        while True:
            try:
                response = self._connection(key_type, key).request(api_key, request)
                code = ErrorCode(error_of(response))
                last: Exception = KafkaError(code, f"{ApiKey(api_key).name} for {key!r}")
            except (OSError, _Refind) as exc:
                code, last = ErrorCode.COORDINATOR_NOT_AVAILABLE, exc
            if code == ErrorCode.NONE:
                return response
            if code in _REFIND:
                self._known.pop((key_type, key), None)
            elif code not in _WAIT:
                raise last
            if time.monotonic() + _BACKOFF_S > deadline:
                raise last
            time.sleep(_BACKOFF_S)

    def _connection(self, key_type: int, key: str) -> BrokerConnection:
        known = self._known.get((key_type, key))
        if known is not None and not known.closed:
            return known
        response = self._client.request(
            ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=key, key_type=key_type)
        )
        if response.error_code != ErrorCode.NONE:
            raise _Refind(KafkaError(response.error_code, f"finding the coordinator of {key!r}"))
        connection = self._client.connect_to(response.host, response.port)
        self._known[(key_type, key)] = connection
        return connection


class _Refind(Exception):
    """Internal: the coordinator lookup failed in a way worth retrying."""

    def __init__(self, cause: KafkaError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def committed_offsets(
    client: KafkaClient, group_id: str, *, require_stable: bool = True
) -> dict[TopicPartition, CommittedOffset]:
    """Every committed offset of `group_id` (none: an empty dict)."""
    request = OffsetFetchRequest(group_id=group_id, topics=None, require_stable=require_stable)

    def error_of(response: Any) -> int:
        codes = [response.error_code] + [p.error_code for t in response.topics for p in t.partitions]
        return next((c for c in codes if c), 0)

    response = _Coordinators(client).call(GROUP_KEY, group_id, ApiKey.OFFSET_FETCH, request, error_of)
    return {
        TopicPartition(t.name, p.partition_index): CommittedOffset(p.committed_offset, p.metadata)
        for t in response.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def end_transaction(
    client: KafkaClient, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool
) -> None:
    """EndTxn for a transaction a producer (maybe in another process) left open: the two-phase
    commit's second phase. Retrying one that already ended the same way answers NONE; a producer
    fenced meanwhile (a newer one of the id, or the transaction timed out and was aborted) raises
    ProducerFencedError."""
    request = EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        committed=commit,
    )
    try:
        _Coordinators(client).call(
            TRANSACTION_KEY, transactional_id, ApiKey.END_TXN, request, lambda r: r.error_code
        )
    except KafkaError as exc:
        if exc.code in _FENCED:
            doing = "committing" if commit else "aborting"
            raise ProducerFencedError(exc.code, transactional_id, doing) from exc
        raise


class TransactionalProducer(Producer):
    """A `Producer` whose records are written in transactions of one transactional id."""

    def __init__(
        self,
        client: KafkaClient,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
        compression: CompressionType = CompressionType.NONE,
        batch_bytes: int = 512 << 10,
        buffer_bytes: int = 8 << 20,
        max_request_bytes: int | None = None,
    ) -> None:
        super().__init__(
            client,
            acks=-1,
            compression=compression,
            batch_bytes=batch_bytes,
            buffer_bytes=buffer_bytes,
            max_request_bytes=max_request_bytes,
        )
        self.transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._coordinators = _Coordinators(client)
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}
        self._in_transaction = False
        self._added: set[TopicPartition] = set()
        self._offsets_added = False
        self._fenced: ProducerFencedError | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def init_transactions(self) -> None:
        """Get a producer id and epoch for the transactional id (fencing earlier producers of it)."""
        request = InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self._timeout_ms
        )
        response = self._txn_call(ApiKey.INIT_PRODUCER_ID, request, lambda r: r.error_code, "initializing")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._sequences.clear()

    def begin(self) -> None:
        self._check_usable()
        if self.producer_id < 0:
            raise RuntimeError("init_transactions() must be called before begin()")
        if self._in_transaction:
            raise RuntimeError(f"a transaction of {self.transactional_id!r} is already open")
        self._in_transaction, self._added, self._offsets_added = True, set(), False

    def send_offsets(self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str | None]]) -> None:
        """Commit `offsets` (offset, metadata) of `group_id` with the open transaction."""
        self._check_open()
        add = AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            group_id=group_id,
        )
        self._txn_call(ApiKey.ADD_OFFSETS_TO_TXN, add, lambda r: r.error_code, "adding offsets")
        self._offsets_added = True
        by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, (offset, metadata) in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=offset, committed_metadata=metadata
                )
            )
        commit = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()],
        )

        def error_of(response: Any) -> int:
            return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)

        try:
            self._coordinators.call(GROUP_KEY, group_id, ApiKey.TXN_OFFSET_COMMIT, commit, error_of)
        except KafkaError as exc:
            self._raise_fenced(exc, "committing offsets")
            raise

    def commit(self) -> None:
        """Write everything buffered, then commit the transaction."""
        self._check_open()
        self.flush()
        self._end(True)

    def abort(self) -> None:
        """Drop what is buffered and abort the transaction (nothing to do when none is open)."""
        self._pending.clear()
        self._pending_bytes = 0
        if self._in_transaction and self._fenced is None:
            self._end(False)
        self._in_transaction = False

    def _end(self, commit: bool) -> None:
        """EndTxn, unless the coordinator never heard of this transaction (nothing was added to it)."""
        if self._added or self._offsets_added:
            request = EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )
            self._txn_call(
                ApiKey.END_TXN, request, lambda r: r.error_code, "committing" if commit else "aborting"
            )
        self._in_transaction = False

    # -- produce path ------------------------------------------------------------------------------

    def send(self, *args: Any, **kwargs: Any) -> TopicPartition:
        self._check_open()
        return super().send(*args, **kwargs)

    def _build_batch(self, tp: TopicPartition, records: list[SimpleRecord]) -> bytes:
        sequence = self._sequences.get(tp, 0)
        self._sequences[tp] = (sequence + len(records)) & _MAX_SEQUENCE
        return build_batch(
            records,
            self._compression,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=sequence,
            is_transactional=True,
        )

    def _produce(self, batches: dict[TopicPartition, bytes]) -> dict[TopicPartition, int]:
        self._check_open()
        self._add_partitions([tp for tp in batches if tp not in self._added])
        try:
            return self._client.produce(batches, acks=-1, transactional_id=self.transactional_id)
        except KafkaError as exc:
            self._raise_fenced(exc, "producing")
            raise

    def _add_partitions(self, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(t, ps) for t, ps in by_topic.items()
            ],
        )

        def error_of(response: Any) -> int:
            codes = [
                p.partition_error_code
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
                if p.partition_error_code != ErrorCode.OPERATION_NOT_ATTEMPTED
            ]
            return next((c for c in codes if c), 0)

        self._txn_call(ApiKey.ADD_PARTITIONS_TO_TXN, request, error_of, "adding partitions")
        self._added.update(tps)

    # -- helpers -----------------------------------------------------------------------------------

    def _txn_call(self, api_key: int, request: Any, error_of: Callable[[Any], int], doing: str) -> Any:
        self._check_usable()
        try:
            return self._coordinators.call(TRANSACTION_KEY, self.transactional_id, api_key, request, error_of)
        except KafkaError as exc:
            self._raise_fenced(exc, doing)
            raise

    def _raise_fenced(self, exc: KafkaError, doing: str) -> None:
        if exc.code in _FENCED:
            self._fenced = ProducerFencedError(exc.code, self.transactional_id, doing)
            self._in_transaction = False
            raise self._fenced from exc

    def _check_usable(self) -> None:
        if self._fenced is not None:
            raise self._fenced

    def _check_open(self) -> None:
        self._check_usable()
        if not self._in_transaction:
            raise RuntimeError(f"no transaction of {self.transactional_id!r} is open: call begin() first")
