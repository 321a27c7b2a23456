"""The transaction coordinator over the runtime, with small fakes for what it takes (an in-memory
`__transaction_state`, a marker channel, producer ids) and a ManualClock: pending transitions answer
CONCURRENT_TRANSACTIONS, markers then CompleteAbort, and the timeout and expiration timers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

from odradek.clock import ManualClock
from odradek.controller.channel import ControllerIdentity, update_metadata_request
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState, TopicMetadata
from odradek.coordinator.partitioning import TXN_TOPIC
from odradek.coordinator.txn_coordinator import TransactionCoordinator
from odradek.coordinator.txn_metadata import TxnState
from odradek.protocol.errors import ErrorCode
from odradek.replication.replica_manager import TxnMarker
from odradek.scheduler import Scheduler
from odradek.server.metadata_cache import MetadataCache
from tests.coordinator.test_runtime import FakeTimers, MemoryLog

CONFIG = {
    "transactional.id.expiration.ms": 60_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 30_000,
}
TP = ("orders", 0)


class Markers:
    """Takes every marker once `open` is set."""

    def __init__(self) -> None:
        self.written: list[tuple[TxnMarker, set[tuple[str, int]]]] = []
        self.open = asyncio.Event()

    async def write(
        self, marker: TxnMarker, keys: Iterable[tuple[str, int]], timeout_ms: int
    ) -> dict[tuple[str, int], int]:
        await self.open.wait()
        self.written.append((marker, set(keys)))
        return dict.fromkeys(keys, ErrorCode.NONE)

    async def close(self) -> None:
        pass


class ProducerIds:
    def __init__(self) -> None:
        self.next = 1000

    async def generate_producer_id(self) -> int:
        self.next += 1
        return self.next


class NoCreation:
    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        raise AssertionError("the topic exists")


def metadata() -> MetadataCache:
    cache = MetadataCache(0)
    states = {0: PartitionState(0, 3, (0,), (0,), 1, 0)}
    broker = BrokerInfo(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))
    cache.update_metadata(
        update_metadata_request(ControllerIdentity(0, 1), {TXN_TOPIC: (uuid.uuid4(), states)}, [broker])
    )
    return cache


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def test_timeouts_markers_and_expiration_run_on_the_runtime() -> None:
    async def scenario() -> None:
        clock, timers, markers = ManualClock(), FakeTimers(), Markers()
        coordinator = TransactionCoordinator(
            CONFIG, clock, metadata(), NoCreation(), MemoryLog(), markers, ProducerIds(), timers
        )
        await coordinator.startup()
        coordinator.on_partition_loaded(0, 3)
        assert (await coordinator.find_coordinator("t")).error_code == ErrorCode.NONE
        error, pid, epoch = await coordinator.init_producer_id("t", 5000, -1, -1)
        assert (error, pid, epoch) == (ErrorCode.NONE, 1001, 0)
        assert await coordinator.add_partitions("t", pid, epoch, [TP]) == ErrorCode.NONE
        # Past the transaction's timeout, the abort timer fences the producer and aborts.
        clock.advance(10_000)
        timers.fire_due(clock.monotonic_ms())
        await settle()
        assert coordinator.describe("t")[1].state is TxnState.PREPARE_ABORT  # type: ignore[union-attr]
        # Markers in flight: a pending transition.
        assert await coordinator.end_txn("t", pid, epoch + 1, False) == ErrorCode.CONCURRENT_TRANSACTIONS
        assert (
            await coordinator.add_partitions("t", pid, epoch + 1, [TP]) == ErrorCode.CONCURRENT_TRANSACTIONS
        )
        assert (await coordinator.init_producer_id("t", 5000, -1, -1))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        markers.open.set()
        await settle()
        assert markers.written == [(TxnMarker(pid, epoch + 1, 3, False), {TP})]  # coordinator epoch 3
        meta = coordinator.describe("t")[1]
        assert meta is not None and meta.state is TxnState.COMPLETE_ABORT
        assert await coordinator.end_txn("t", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
        # Idle longer than transactional.id.expiration.ms: the expiration timer removes the id.
        clock.advance(60_001)
        coordinator.wake()
        await settle()
        assert coordinator.describe("t") == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_a_reload_resumes_a_prepared_transaction() -> None:
    async def scenario() -> None:
        clock, markers, log = ManualClock(), Markers(), MemoryLog()
        first = TransactionCoordinator(
            CONFIG, clock, metadata(), NoCreation(), log, markers, ProducerIds(), Scheduler(clock)
        )
        await first.startup()
        first.on_partition_loaded(0, 3)
        await first.find_coordinator("t")
        _, pid, epoch = await first.init_producer_id("t", 60_000, -1, -1)
        await first.add_partitions("t", pid, epoch, [TP])
        assert await first.end_txn("t", pid, epoch, True) == ErrorCode.NONE  # PrepareCommit stored
        await first.shutdown()  # before the markers were written
        assert markers.written == []
        again = TransactionCoordinator(
            CONFIG, clock, metadata(), NoCreation(), log, markers, ProducerIds(), Scheduler(clock)
        )
        await again.startup()
        again.on_partition_loaded(0, 4)
        await again.find_coordinator("t")
        markers.open.set()
        await settle()
        assert markers.written == [(TxnMarker(pid, epoch, 4, True), {TP})]
        meta = again.describe("t")[1]
        assert meta is not None and meta.state is TxnState.COMPLETE_COMMIT
        await again.shutdown()

    asyncio.run(scenario())
