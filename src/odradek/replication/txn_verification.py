"""Transaction verification on the partition leader (KIP-890 part 1; Kafka 3.9's
AddPartitionsToTxnManager and the VerificationGuard of its logs).

Owns:
- `VerificationGuards`, one per partition: per producer id, the guard of a verification in flight
  (a unique object, with its producer epoch and creation time). A transactional batch of a producer
  with no ongoing transaction in the partition may be appended only with the guard that is still
  the producer's current one; any transactional append or marker of the producer removes it. So a
  verification answered after a marker ended the transaction it was about (and a new transaction
  began without this partition) cannot let a stale batch in: Kafka's ABA protection. Guards older
  than producer.id.expiration.ms are dropped when a new one is made, as Kafka's producer state
  expires them.
- `TxnVerifier`, one per broker: asks the transactional id's coordinator (the leader of its
  `__transaction_state` partition, as the `TxnCoordinatorLocator` says: this broker's transaction
  coordinator, reading the metadata cache) whether partitions are in the id's ongoing transaction,
  with AddPartitionsToTxn v4 verify_only on the inter-broker listener.
  Requests are batched per coordinator broker: one in flight per broker, the transactions that
  arrive meanwhile go in the next one. A second verification of the same transactional id waiting
  for the same broker replaces the first by Kafka's rules: a newer epoch answers the waiting one
  INVALID_PRODUCER_EPOCH, the same epoch answers it NETWORK_EXCEPTION (a retry), an older one is
  answered INVALID_PRODUCER_EPOCH at once. When the coordinator is this broker, the locator (its
  transaction coordinator) answers directly (no request). Coordinator endpoints come from a
  `BrokerDirectory` (the metadata cache).
  Answers (Kafka's): PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; a request that could not be
  sent or answered NETWORK_EXCEPTION; no leader for the id's partition COORDINATOR_NOT_AVAILABLE; a
  top-level error applies to every partition (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE);
  a broker that does not serve v4 (UNSUPPORTED_VERSION) skips verification.
- `produce_error`: what a Produce answers for a failed verification (Kafka's ReplicaManager):
  TRANSACTION_ABORTABLE stays for Produce v11+ and is INVALID_TXN_STATE before ("Partition was not
  added to the transaction"); CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR become
  NOT_ENOUGH_REPLICAS, which every client retries without refreshing metadata.

Callers: the Produce handler (verification before the append), Partition (guards), the broker
(construction with its transaction coordinator and metadata cache, life cycle).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.controller.metadata import BrokerInfo, Endpoint
from odradek.network_client import ClientSecurity, ReusedConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from odradek.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
FIRST_PRODUCE_VERSION_WITH_ABORTABLE = 11

# What a Produce answers instead of a retriable coordinator error (clients retry it in place).
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class TxnCoordinatorLocator(Protocol):
    """Which broker coordinates a transactional id, and that coordinator's answer when it is this
    broker (the transaction coordinator)."""

    def coordinator_id(self, transactional_id: str) -> int | None: ...

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]: ...


class BrokerDirectory(Protocol):
    """The live brokers and their endpoints (the metadata cache)."""

    def brokers(self) -> Sequence[BrokerInfo]: ...


class VerificationGuard:
    """One verification of one producer on one partition; compared by identity."""

    __slots__ = ("created_ms", "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int, created_ms: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.created_ms = created_ms


class VerificationGuards:
    """The verification guards of one partition, by producer id (see the module docstring)."""

    def __init__(self) -> None:
        self._guards: dict[int, VerificationGuard] = {}

    def __len__(self) -> int:
        return len(self._guards)

    def start(
        self, producer_id: int, producer_epoch: int, now_ms: int, expiration_ms: int
    ) -> VerificationGuard:
        """The producer's current guard (a new one if it has none); its epoch follows the newest
        verification started, as Kafka's entry does."""
        guard = self._guards.get(producer_id)
        if guard is None:
            self._expire(now_ms, expiration_ms)
            guard = self._guards[producer_id] = VerificationGuard(producer_id, producer_epoch, now_ms)
        elif producer_epoch > guard.producer_epoch:
            guard.producer_epoch = producer_epoch
        return guard

    def verified(self, producer_id: int, guard: VerificationGuard | None) -> bool:
        return guard is not None and self._guards.get(producer_id) is guard

    def clear(self, producer_id: int) -> None:
        self._guards.pop(producer_id, None)

    def clear_all(self) -> None:
        self._guards.clear()

    def _expire(self, now_ms: int, expiration_ms: int) -> None:
        expired = [pid for pid, guard in self._guards.items() if now_ms - guard.created_ms >= expiration_ms]
        for producer_id in expired:
            del self._guards[producer_id]


def produce_error(code: int, produce_version: int) -> tuple[int, str | None]:
    """A Produce partition's error and message for a verification answer other than NONE."""
    if code == ErrorCode.TRANSACTION_ABORTABLE and produce_version < FIRST_PRODUCE_VERSION_WITH_ABORTABLE:
        code = ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        name = ErrorCode(code).name
        message = (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {name}"
        )
        return ErrorCode.NOT_ENOUGH_REPLICAS, message
    return code, None


@dataclass(slots=True)
class _Waiting:
    """A verification waiting for its coordinator's request."""

    transaction: AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    keys: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def settle(self, errors: dict[TopicPartition, int]) -> None:
        if not self.answer.done():
            self.answer.set_result(errors)


class TxnVerifier:
    """Asks transaction coordinators whether partitions are in a transaction (see the module
    docstring)."""

    def __init__(
        self,
        broker_id: int,
        listener: str,
        request_timeout_ms: int,
        brokers: BrokerDirectory,
        locator: TxnCoordinatorLocator,
        security: ClientSecurity | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._listener = listener  # inter.broker.listener.name
        self._security = security  # its TLS, if any
        self._request_timeout_ms = request_timeout_ms
        self._brokers = brokers
        self._locator = locator
        self._waiting: dict[int, dict[str, _Waiting]] = {}  # coordinator broker -> id -> verification
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._connections: dict[int, ReusedConnection] = {}
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        for task in list(self._senders.values()):
            task.cancel()
        for task in list(self._senders.values()):
            try:
                await task
            except asyncio.CancelledError:
                pass
        for waiting in self._waiting.values():
            for verification in waiting.values():
                verification.settle(dict.fromkeys(verification.keys, ErrorCode.NETWORK_EXCEPTION))
        self._waiting.clear()
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, keys: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The partitions of `keys` that failed verification, with their error (Kafka's answers,
        before `produce_error`); an empty dict when all are in the transaction."""
        keys = list(keys)
        coordinator = self._locator.coordinator_id(transactional_id)
        if coordinator is None or self._closed:
            return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator == self._broker_id:
            answered = self._locator.verify_partitions(transactional_id, producer_id, producer_epoch, keys)
            return _failed(answered)
        transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            verify_only=True,
            topics=_topics(keys),
        )
        verification = _Waiting(transaction, keys)
        waiting = self._waiting.setdefault(coordinator, {})
        earlier = waiting.get(transactional_id)
        if earlier is not None:
            if earlier.transaction.producer_epoch > producer_epoch:
                return dict.fromkeys(keys, ErrorCode.INVALID_PRODUCER_EPOCH)
            newer = earlier.transaction.producer_epoch < producer_epoch
            error = ErrorCode.INVALID_PRODUCER_EPOCH if newer else ErrorCode.NETWORK_EXCEPTION
            earlier.settle(dict.fromkeys(earlier.keys, error))
        waiting[transactional_id] = verification
        if coordinator not in self._senders:
            task = asyncio.get_running_loop().create_task(self._send_all(coordinator))
            self._senders[coordinator] = task
        return await verification.answer

    async def _send_all(self, coordinator: int) -> None:
        """Send what waits for `coordinator`, one request at a time, until nothing waits."""
        try:
            while self._waiting.get(coordinator):
                batch = self._waiting.pop(coordinator)
                try:
                    answered = await self._send(coordinator, batch)
                except Exception:
                    log.exception("Verifying transactions with broker %d failed", coordinator)
                    answered = {
                        tid: dict.fromkeys(v.keys, ErrorCode.UNKNOWN_SERVER_ERROR) for tid, v in batch.items()
                    }
                for transactional_id, verification in batch.items():
                    verification.settle(answered[transactional_id])
        finally:
            self._senders.pop(coordinator, None)

    async def _send(
        self, coordinator: int, batch: dict[str, _Waiting]
    ) -> dict[str, dict[TopicPartition, int]]:
        def everyone(code: int) -> dict[str, dict[TopicPartition, int]]:
            return {tid: dict.fromkeys(v.keys, code) for tid, v in batch.items()}

        endpoint = self._endpoint(coordinator)
        if endpoint is None:
            return everyone(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        request = AddPartitionsToTxnRequest(transactions=[v.transaction for v in batch.values()])
        try:
            connection = await self._connection(coordinator).to(coordinator, endpoint.host, endpoint.port)
            response: AddPartitionsToTxnResponse = await connection.send(
                ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request
            )
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.warning("AddPartitionsToTxn to broker %d failed: %s", coordinator, exc)
            return everyone(ErrorCode.NETWORK_EXCEPTION)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            log.warning("Broker %d does not verify transactions; producing without verification", coordinator)
            return everyone(ErrorCode.NONE)
        if response.error_code != ErrorCode.NONE:
            log.error("AddPartitionsToTxn to broker %d answered error %d", coordinator, response.error_code)
            code = response.error_code
            return everyone(
                ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code
            )
        by_id = {result.transactional_id: result for result in response.results_by_transaction}
        answered: dict[str, dict[TopicPartition, int]] = {}
        for transactional_id, verification in batch.items():
            result = by_id.get(transactional_id)
            if result is None:
                answered[transactional_id] = dict.fromkeys(verification.keys, ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            answered[transactional_id] = _failed(
                {
                    TopicPartition(topic.name, p.partition_index): p.partition_error_code
                    for topic in result.topic_results
                    for p in topic.results_by_partition
                }
            )
        return answered

    def _endpoint(self, broker_id: int) -> Endpoint | None:
        node = next((b for b in self._brokers.brokers() if b.broker_id == broker_id), None)
        return node.endpoint(self._listener) if node is not None else None

    def _connection(self, coordinator: int) -> ReusedConnection:
        connection = self._connections.get(coordinator)
        if connection is None:
            client_id = f"broker-{self._broker_id}-txn-verification"
            connection = ReusedConnection(client_id, self._request_timeout_ms, security=self._security)
            self._connections[coordinator] = connection
        return connection


def _failed(answered: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The partitions not verified; PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (producers expect it)."""
    return {
        key: ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code
        for key, code in answered.items()
        if code != ErrorCode.NONE
    }


def _topics(keys: list[TopicPartition]) -> list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(partition)
    return [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(t, ps) for t, ps in by_topic.items()]
