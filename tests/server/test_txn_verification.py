"""The partition leader's transaction verification (replication/txn_verification.py): the guards
that keep a stale verification out after a marker (Kafka's ABA protection), the batching of
verifications per coordinator broker with Kafka's replacement rules, and the Produce error mapping."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.replication.partition import Partition
from odradek.replication.txn_verification import TxnVerifier, VerificationGuards, produce_error
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.server.test_replica_partition import state

PID = 42


def txn_batch(sequence: int, epoch: int = 0) -> memoryview:
    record = SimpleRecord(b"v", timestamp=1_000)
    return memoryview(
        build_batch(
            [record], producer_id=PID, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
        )
    )


def leader(tmp_path: Path) -> Partition:
    partition = Partition("t", 0, uuid.uuid4(), 0, Log(tmp_path / "t-0", LogConfig(), ManualClock()), 0)
    partition.make_leader(state())
    return partition


def test_a_verified_append_needs_its_guard_until_the_transaction_is_ongoing(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    guard = partition.start_transaction_verification(PID, 0, now_ms=0)
    assert guard is not None
    assert partition.start_transaction_verification(PID, 0, now_ms=1) is guard  # shared while in flight
    partition.append_records_to_leader(txn_batch(0), 1, (PID, guard))
    # The transaction is ongoing here now: no verification, and no guard needed.
    assert partition.start_transaction_verification(PID, 0, now_ms=2) is None
    partition.append_records_to_leader(txn_batch(1), 1, (PID, None))


def test_a_marker_voids_a_verification_in_flight(tmp_path: Path) -> None:
    """The ABA case: verified while the transaction was open, answered after its marker; the
    append is refused instead of starting a transaction the coordinator does not know of."""
    partition = leader(tmp_path)
    guard = partition.start_transaction_verification(PID, 0, now_ms=0)
    partition.append_records_to_leader(txn_batch(0), 1, (PID, guard))
    stale = partition.start_transaction_verification(PID, 0, now_ms=1)
    assert stale is None  # ongoing: nothing to verify
    partition.append_marker(PID, 0, 0, commit=False)
    late = partition.start_transaction_verification(PID, 0, now_ms=2)
    assert late is not None
    partition.append_marker(PID, 0, 0, commit=False)  # the transaction ends again before the answer
    with pytest.raises(KafkaError) as refused:
        partition.append_records_to_leader(txn_batch(1), 1, (PID, late))
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE
    with pytest.raises(KafkaError):
        partition.append_records_to_leader(txn_batch(1), 1, (PID, stale))


def test_guards_expire_and_a_new_leadership_drops_them() -> None:
    guards = VerificationGuards()
    first = guards.start(1, 0, now_ms=0, expiration_ms=100)
    guards.start(2, 0, now_ms=150, expiration_ms=100)  # producer 1's guard is 150 ms old: expired
    assert not guards.verified(1, first) and len(guards) == 1
    guards.clear_all()
    assert len(guards) == 0


@pytest.mark.parametrize(
    ("code", "version", "expected"),
    [
        (ErrorCode.TRANSACTION_ABORTABLE, 10, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.TRANSACTION_ABORTABLE, 11, ErrorCode.TRANSACTION_ABORTABLE),
        (ErrorCode.CONCURRENT_TRANSACTIONS, 11, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.INVALID_PRODUCER_EPOCH, 9, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_produce_errors_follow_kafkas_replica_manager(code: int, version: int, expected: int) -> None:
    assert produce_error(code, version)[0] == expected


class FakeLocator:
    """`__transaction_state` is led by broker 2 (the verifier runs on broker 1)."""

    def coordinator_id(self, transactional_id: str) -> int | None:
        return 2

    def verify_partitions(self, *args: object) -> dict[tuple[str, int], int]:
        raise AssertionError("broker 1 does not coordinate")


def make_verifier(brokers: list[Any]) -> TxnVerifier:
    return TxnVerifier(1, "PLAINTEXT", 30_000, SimpleNamespace(brokers=lambda: brokers), FakeLocator())


def test_verifications_are_batched_per_coordinator_and_replaced_by_kafkas_rules() -> None:
    async def scenario() -> None:
        verifier = make_verifier([])
        sent: list[list[tuple[str, int]]] = []
        release = asyncio.Event()

        async def send(coordinator: int, batch: dict[str, Any]) -> dict[str, dict[tuple[str, int], int]]:
            sent.append([(tid, w.transaction.producer_epoch) for tid, w in batch.items()])
            await release.wait()
            return {tid: {} for tid in batch}

        verifier._send = send  # type: ignore[method-assign]
        first = asyncio.ensure_future(verifier.verify("a", 1, 0, [("t", 0)]))
        await asyncio.sleep(0)
        # While "a" is in flight, three more arrive: they wait for one next request.
        retried = asyncio.ensure_future(verifier.verify("b", 2, 3, [("t", 0)]))
        await asyncio.sleep(0)
        again = asyncio.ensure_future(verifier.verify("b", 2, 3, [("t", 0)]))  # same epoch: a retry
        newer = asyncio.ensure_future(verifier.verify("c", 3, 1, [("t", 1)]))
        await asyncio.sleep(0)
        older = await verifier.verify("c", 3, 0, [("t", 1)])  # older than the waiting one
        assert older == {("t", 1): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert await retried == {("t", 0): ErrorCode.NETWORK_EXCEPTION}
        release.set()
        assert await first == {} and await again == {} and await newer == {}
        assert sent == [[("a", 0)], [("b", 3), ("c", 1)]]
        await verifier.close()

    asyncio.run(scenario())


def test_an_unreachable_coordinator_is_a_network_exception() -> None:
    async def scenario() -> None:
        endpoint = SimpleNamespace(host="127.0.0.1", port=1)
        node = SimpleNamespace(broker_id=2, endpoint=lambda listener: endpoint)
        verifier = make_verifier([node])
        verifier._connection = lambda coordinator: _Refusing()  # type: ignore[method-assign]
        assert await verifier.verify("a", 1, 0, [("t", 0)]) == {("t", 0): ErrorCode.NETWORK_EXCEPTION}
        await verifier.close()

    asyncio.run(scenario())


class _Refusing:
    async def to(self, *args: object) -> Any:
        raise ConnectionRefusedError("refused")

    async def close(self) -> None:
        pass
