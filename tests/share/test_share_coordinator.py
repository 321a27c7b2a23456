"""The share coordinator's shard (coordinator/share_coordinator.py) on the coordinator runtime over
an in-memory log: ShareSnapshot then ShareUpdate records, a snapshot every
share.coordinator.snapshot.update.records.per.snapshot updates, state and leader epoch fencing,
deletion, a failed append keeping the state, and the state replayed from the log."""

from __future__ import annotations

import asyncio
import uuid

from odradek.clock import ManualClock
from odradek.coordinator.runtime import CoordinatorContext
from odradek.coordinator.share_coordinator import ShareStateShard
from odradek.coordinator.share_partition import RecordState, StateBatch
from odradek.coordinator.share_records import SNAPSHOT, UPDATE, StateKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.record import iter_batch_records
from odradek.scheduler import Scheduler
from tests.coordinator.test_runtime import CONFIG, MemoryLog, settle

KEY = StateKey("readers", uuid.UUID(int=42), 0)
AVAILABLE, ACKED = int(RecordState.AVAILABLE), int(RecordState.ACKNOWLEDGED)


def shard_over(memory: MemoryLog, per_snapshot: int = 2) -> CoordinatorContext[ShareStateShard]:
    clock = ManualClock()
    context: CoordinatorContext[ShareStateShard] = CoordinatorContext(
        0, 5, lambda c: ShareStateShard(c, clock, per_snapshot), memory, CONFIG, clock, Scheduler(clock)
    )
    context.start()
    return context


async def call(context: CoordinatorContext[ShareStateShard], event: object) -> object:
    return await context.submit(event, int)  # type: ignore[arg-type]


def record_types(memory: MemoryLog) -> list[tuple[int, bool]]:
    """(record type, tombstone) of every record written, in order."""
    found = []
    for batch in memory.batches:
        for _, records in iter_batch_records(batch):
            for record in records:
                assert record.key is not None
                found.append((int.from_bytes(record.key[:2], "big"), record.value is None))
    return found


def test_snapshot_updates_fencing_and_replay() -> None:
    async def scenario() -> None:
        memory = MemoryLog()
        context = shard_over(memory)
        await context.wait_loaded(5)
        shard = context.shard
        assert await call(context, lambda _: shard.initialize(KEY, 0, 10)) == ErrorCode.NONE
        for start, acked in ((10, (10, 11)), (12, (12, 12)), (13, (13, 14))):
            batch = StateBatch(acked[0], acked[1], ACKED, 1)
            written = await call(context, lambda _, s=start, b=batch: shard.write(KEY, 0, 3, s, [b]))
            assert written == ErrorCode.NONE
        assert record_types(memory) == [
            (SNAPSHOT, False),
            (UPDATE, False),
            (UPDATE, False),
            (SNAPSHOT, False),
        ]
        state = shard.states[KEY]
        assert (state.start_offset, state.leader_epoch, state.snapshot_epoch) == (13, 3, 1)
        assert state.batches == (StateBatch(13, 14, ACKED, 1),)
        older_leader = await call(context, lambda _: shard.write(KEY, 0, 2, 15, []))
        assert older_leader == ErrorCode.FENCED_LEADER_EPOCH
        older_state = await call(context, lambda _: shard.initialize(KEY, -1, 0))
        assert older_state == ErrorCode.FENCED_STATE_EPOCH
        update = StateBatch(15, 16, AVAILABLE, 2)
        assert await call(context, lambda _: shard.write(KEY, 0, 3, 15, [update])) == ErrorCode.NONE
        written = shard.states[KEY]
        await context.close()

        again = shard_over(memory)
        await again.wait_loaded(5)
        replayed = again.shard.states[KEY]
        assert (replayed.start_offset, replayed.batches) == (15, (update,))
        assert (replayed.state_epoch, replayed.leader_epoch) == (written.state_epoch, written.leader_epoch)
        await again.close()

    asyncio.run(scenario())


def test_a_failed_append_keeps_the_state_and_deletion_survives_replay() -> None:
    async def scenario() -> None:
        memory = MemoryLog()
        context = shard_over(memory)
        await context.wait_loaded(5)
        shard = context.shard
        assert await call(context, lambda _: shard.initialize(KEY, 0, 0)) == ErrorCode.NONE
        memory.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        failed = await call(context, lambda _: shard.write(KEY, 0, 0, 5, []))
        assert failed == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert shard.states[KEY].start_offset == 0
        memory.fail_with = ErrorCode.NONE
        assert await call(context, lambda _: shard.delete(KEY)) == ErrorCode.NONE
        assert KEY not in shard.states
        await settle()
        await context.close()
        again = shard_over(memory)
        await again.wait_loaded(5)
        assert again.shard.states == {}
        await again.close()

    asyncio.run(scenario())
