"""The coordinator runtime: shards, loading, appends, restarts and failures, over an in-memory
`__consumer_offsets` log and a real MetadataCache fed as the controller feeds it, with a ManualClock."""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.controller.channel import ControllerIdentity, update_metadata_request
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState, TopicMetadata
from odradek.coordinator.classic import (
    CommitArgs,
    HeartbeatArgs,
    JoinArgs,
    JoinResult,
    LeavingMember,
    SyncArgs,
)
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.group import CommittedOffset, Protocol, TopicPartition
from odradek.coordinator.partitioning import OFFSETS_TOPIC
from odradek.coordinator.shard import ShardState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records.batch import iter_batches
from odradek.scheduler import Scheduler
from odradek.server.metadata_cache import MetadataCache

CONFIG = {
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    "group.initial.rebalance.delay.ms": 0,
    "group.max.size": 1000,
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.segment.bytes": 1 << 20,
    "offsets.retention.minutes": 10,
    "offsets.retention.check.interval.ms": 60_000,
    "offsets.commit.timeout.ms": 5000,
    "offsets.load.buffer.size": 1 << 20,
    "offset.metadata.max.bytes": 4096,
}
TP = TopicPartition("orders", 0)


class MemoryOffsetsLog:
    """Batches per partition with dense offsets; `fail_with` makes appends fail with that code."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.fail_with = ErrorCode.NONE
        self.loading: set[int] = set()  # partitions this broker is to lead, their logs still loading

    def _end(self, partition: int) -> int:
        return sum(
            header.next_offset - header.base_offset
            for b in self.batches[partition]
            for _, header in iter_batches(b)
        )

    def log_range(self, partition: int) -> tuple[int, int]:
        return 0, self._end(partition)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        return b"".join(b for b in self.batches[partition] if next(iter_batches(b))[1].next_offset > offset)

    async def append(self, partition: int, records: bytes, timeout_ms: int) -> int:
        if self.fail_with != ErrorCode.NONE:
            return self.fail_with
        batch = bytearray(records)
        struct.pack_into(">q", batch, 0, self._end(partition))
        self.batches[partition].append(bytes(batch))
        return ErrorCode.NONE

    def leader_loading(self, partition: int) -> bool:
        return partition in self.loading


class FakeBroker:
    """The broker as the coordinator sees it: a metadata cache, and auto topic creation after which
    this broker leads every partition (the leadership change loads the coordinator's shards)."""

    def __init__(self) -> None:
        self.broker_id = 0
        self.metadata_cache = MetadataCache(0)
        self.coordinator: GroupCoordinator | None = None

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        states = {
            p: PartitionState(0, 0, (0,), (0,), 1, 0) for p in range(CONFIG["offsets.topic.num.partitions"])
        }
        broker = BrokerInfo(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))
        topics = {name: (uuid.uuid4(), states)}
        self.metadata_cache.update_topic_configs(name, {"cleanup.policy": "compact"})
        self.metadata_cache.update_metadata(
            update_metadata_request(ControllerIdentity(0, 1), topics, [broker])
        )
        assert self.coordinator is not None
        for partition in states:
            self.coordinator.on_partition_loaded(partition, 0)
        return self.metadata_cache.topic(name)


class Harness:
    def __init__(self, tmp_path: Path, offsets_log: MemoryOffsetsLog | None = None) -> None:
        self.clock = ManualClock()
        self.log = offsets_log or MemoryOffsetsLog()
        self.broker = FakeBroker()
        self.coordinator = GroupCoordinator(
            CONFIG, self.clock, self.broker.metadata_cache, self.broker, self.log, Scheduler(self.clock)
        )
        self.broker.coordinator = self.coordinator

    async def start(self) -> None:
        await self.coordinator.startup()
        location = await self.coordinator.find_coordinator("g")
        assert location.error_code == ErrorCode.NONE
        await self.loaded()

    async def loaded(self) -> None:
        for shard in self.coordinator.shards().values():
            await shard.wait_loaded()

    async def join(self, member_id: str = "", instance: str | None = None) -> JoinResult:
        args = JoinArgs(
            "g",
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            6000,
            10_000,
            "consumer",
            (Protocol("range", b"meta"),),
            True,
        )
        return await self.coordinator.join_group(args)

    async def stable_member(self) -> str:
        first = await self.join()
        joined = await self.join(first.member_id)
        assert joined.error_code == ErrorCode.NONE
        sync = await self.coordinator.sync_group(
            SyncArgs(
                "g",
                joined.generation_id,
                joined.member_id,
                None,
                "consumer",
                "range",
                {joined.member_id: b"A"},
            )
        )
        assert sync.error_code == ErrorCode.NONE and sync.assignment == b"A"
        return joined.member_id

    async def commit(
        self, offset: int, generation: int = -1, member_id: str = ""
    ) -> dict[TopicPartition, int]:
        committed = {TP: CommittedOffset(offset, 3, "meta", self.clock.time_ms())}
        return await self.coordinator.commit_offsets(CommitArgs("g", generation, member_id, None, committed))


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def test_find_coordinator_creates_compacted_internal_topic(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.coordinator.startup()
        location = await h.coordinator.find_coordinator("g")
        assert location.error_code == ErrorCode.NONE and location.node == BrokerInfo(
            0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
        )
        topic = h.broker.metadata_cache.topic(OFFSETS_TOPIC)
        assert topic is not None and topic.is_internal and len(topic.partitions) == 4
        assert topic.configs["cleanup.policy"] == "compact"
        assert all(state.replicas == (0,) for state in topic.partitions.values())  # RF 3 capped at 1 broker
        await h.loaded()
        assert set(h.coordinator.shards()) == {0, 1, 2, 3}
        await h.coordinator.shutdown()

    run(scenario)


def test_offsets_and_groups_survive_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        member = await h.stable_member()
        assert await h.commit(42, 1, member) == {TP: ErrorCode.NONE}
        await h.coordinator.shutdown()

        again = Harness(tmp_path, h.log)
        await again.start()  # the broker leads the partitions again: the shards load the log
        error, offsets = await again.coordinator.fetch_offsets("g", (TP, TopicPartition("orders", 1)))
        assert error == ErrorCode.NONE
        assert offsets[TP] is not None and offsets[TP].offset == 42 and offsets[TP].leader_epoch == 3
        assert offsets[TopicPartition("orders", 1)] is None
        description = await again.coordinator.describe_group("g")
        assert description.state == "Stable" and description.protocol == "range"
        assert [m.member_id for m in description.members] == [member]
        assert description.members[0].assignment == b"A"
        heartbeat = await again.coordinator.heartbeat(HeartbeatArgs("g", 1, member, None))
        assert heartbeat == ErrorCode.NONE
        await again.coordinator.shutdown()

    run(scenario)


def test_deleted_group_stays_deleted_after_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        assert await h.commit(5) == {TP: ErrorCode.NONE}
        assert await h.coordinator.delete_group("g") == ErrorCode.NONE
        assert await h.coordinator.delete_group("g") == ErrorCode.GROUP_ID_NOT_FOUND
        await h.coordinator.shutdown()
        again = Harness(tmp_path, h.log)
        await again.start()
        assert (await again.coordinator.fetch_offsets("g", None)) == (ErrorCode.NONE, {})
        assert again.coordinator.list_groups() == (ErrorCode.NONE, [])
        await again.coordinator.shutdown()

    run(scenario)


def test_requests_while_loading_and_after_unload(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        partition = h.coordinator.partition_for("g")
        assert partition is not None
        h.coordinator.on_partition_unloaded(partition)
        assert await h.commit(1) == {TP: ErrorCode.NOT_COORDINATOR}
        assert (await h.coordinator.fetch_offsets("g", None))[0] == ErrorCode.NOT_COORDINATOR
        # led here again, its log loading (a broker starting): no context yet, and no NOT_COORDINATOR
        # (librdkafka's admin client crashes on it in ListConsumerGroupOffsets: a retry, not a lookup)
        h.log.loading.add(partition)
        assert await h.commit(1) == {TP: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        assert (await h.coordinator.fetch_offsets("g", None))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        h.log.loading.clear()
        h.coordinator.on_partition_loaded(partition, 1)
        assert await h.commit(1) == {TP: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        assert h.coordinator.list_groups()[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await h.loaded()
        assert await h.commit(1) == {TP: ErrorCode.NONE}
        await h.coordinator.shutdown()

    run(scenario)


def test_parked_join_is_answered_not_coordinator_on_unload(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        member = await h.stable_member()
        newcomer = await h.join()
        parked = asyncio.ensure_future(h.join(newcomer.member_id))  # waits for `member` to rejoin
        await asyncio.sleep(0)  # the join is queued; the describe behind it sees the rebalance it began
        rebalancing = await h.coordinator.describe_group("g")
        assert rebalancing.state == "PreparingRebalance" and len(rebalancing.members) == 2
        assert not parked.done()
        partition = h.coordinator.partition_for("g")
        assert partition is not None and member
        h.coordinator.on_partition_unloaded(partition)
        result = await parked
        assert result.error_code == ErrorCode.NOT_COORDINATOR
        await h.coordinator.shutdown()

    run(scenario)


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_failed_append_changes_nothing(tmp_path: Path, append_error: ErrorCode, answer: ErrorCode) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        assert await h.commit(1) == {TP: ErrorCode.NONE}
        h.log.fail_with = append_error
        assert await h.commit(2) == {TP: answer}
        h.log.fail_with = ErrorCode.NONE
        partition = h.coordinator.partition_for("g")
        shard = h.coordinator.shards()[partition or 0]
        if answer == ErrorCode.NOT_COORDINATOR:
            assert shard.state is ShardState.CLOSED
            assert await h.commit(3) == {TP: ErrorCode.NOT_COORDINATOR}
        else:
            _, offsets = await h.coordinator.fetch_offsets("g", (TP,))
            assert offsets[TP] is not None and offsets[TP].offset == 1
        await h.coordinator.shutdown()

    run(scenario)


def test_session_timeout_on_the_injected_clock(tmp_path: Path) -> None:
    """wake() queues a timer tick ahead of the next request, so the request sees the tick's effect."""

    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        member = await h.stable_member()  # session.timeout.ms 6000, counted from the SyncGroup
        h.clock.advance(3000)
        assert await h.coordinator.heartbeat(HeartbeatArgs("g", 1, member, None)) == ErrorCode.NONE
        h.clock.advance(5999)  # past the first deadline, 1 ms before the one the heartbeat set
        h.coordinator.wake()
        alive = await h.coordinator.describe_group("g")
        assert alive.state == "Stable" and [m.member_id for m in alive.members] == [member]
        h.clock.advance(1)
        h.coordinator.wake()
        expired = await h.coordinator.describe_group("g")
        assert expired.state == "Empty" and expired.members == ()
        heartbeat = await h.coordinator.heartbeat(HeartbeatArgs("g", 1, member, None))
        assert heartbeat == ErrorCode.UNKNOWN_MEMBER_ID
        await h.coordinator.shutdown()

    run(scenario)


def test_offset_expiration_runs_on_its_interval(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """offsets.retention.minutes = 10, offsets.retention.check.interval.ms = 60 s: an offset past its
    retention stays until the next check, and the check runs again one interval after the last."""

    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        assert await h.commit(9) == {TP: ErrorCode.NONE}

        async def committed() -> list[int]:
            error, offsets = await h.coordinator.fetch_offsets("g", None)
            assert error == ErrorCode.NONE
            return [offset.offset for offset in offsets.values() if offset is not None]

        h.clock.advance(10 * 60_000 - 1)  # a check runs, 1 ms before the retention: it keeps the offset
        h.coordinator.wake()
        assert await committed() == [9]
        h.clock.advance(1)  # retention reached, but the next check is due one interval after the last
        h.coordinator.wake()
        assert await committed() == [9]
        caplog.set_level(logging.INFO, logger="odradek.coordinator")
        h.clock.advance(60_000 - 1)
        h.coordinator.wake()
        assert await committed() == []
        assert h.coordinator.list_groups() == (ErrorCode.NONE, [])
        partition = h.coordinator.partition_for("g")
        assert info_lines(caplog) == [
            "Group g deleted (generation 0)",
            f"Removed 1 expired offsets from __consumer_offsets-{partition}",
        ]
        await h.coordinator.shutdown()

    run(scenario)


def test_list_and_leave(tmp_path: Path) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        member = await h.stable_member()
        error, listings = h.coordinator.list_groups()
        assert error == ErrorCode.NONE
        assert [(g.group_id, g.protocol_type, g.state) for g in listings] == [("g", "consumer", "Stable")]
        result = await h.coordinator.leave_group("g", (LeavingMember(member, None),))
        assert result.members[0][1] == ErrorCode.NONE
        assert [g.state for g in h.coordinator.list_groups()[1]] == ["Empty"]
        await h.coordinator.shutdown()

    run(scenario)


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("odradek.coordinator") and r.levelno == logging.INFO
    ]


def test_loading_every_partition_logs_one_summary_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="odradek.coordinator")

    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        assert await h.commit(7) == {TP: ErrorCode.NONE}
        await h.coordinator.shutdown()
        caplog.clear()
        again = Harness(tmp_path, h.log)
        await again.start()  # the FakeBroker makes it leader of every partition
        assert info_lines(caplog) == ["Loaded 1 groups from 4 partitions of __consumer_offsets in 0 ms"]
        await again.coordinator.shutdown()

    run(scenario)


def test_group_changes_log_one_info_line_each(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.coordinator")

    async def scenario() -> None:
        h = Harness(tmp_path)
        await h.start()
        caplog.clear()
        member = await h.stable_member()
        assert await h.coordinator.heartbeat(HeartbeatArgs("g", 1, member, None)) == ErrorCode.NONE
        assert await h.commit(5, 1, member) == {TP: ErrorCode.NONE}
        assert info_lines(caplog) == [
            "Group g created",
            f"Group g rebalanced: generation 1 with 1 members, protocol range, leader {member}",
        ]
        caplog.clear()
        await h.coordinator.leave_group("g", (LeavingMember(member, None),))
        assert await h.coordinator.delete_group("g") == ErrorCode.NONE
        assert info_lines(caplog) == ["Group g is now empty (generation 2)", "Group g deleted (generation 2)"]
        await h.coordinator.shutdown()

    run(scenario)
