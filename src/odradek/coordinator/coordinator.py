"""The group coordinator of one broker: the entry point handlers call.

Owns the coordinator runtime of `__consumer_offsets` (runtime.py: one context per partition this
broker leads, each running a `GroupCoordinatorShard`, shard.py), the auto-creation of
`__consumer_offsets` on first FindCoordinator (through an `InternalTopicCreator`, the broker's
auto topic creation: offsets.topic.num.partitions partitions, offsets.topic.replication.factor
capped at the live broker count, cleanup.policy=compact), and the routing of every group request to
the shard of `partition_for(group_id)`.

Leadership: the broker calls `on_partition_loaded(partition, leader_epoch)` /
`on_partition_unloaded(partition)` when the ReplicaManager makes this broker leader of a
`__consumer_offsets` partition or takes that away (Kafka's onLeadershipChange). A request for a
group whose partition is not led here answers NOT_COORDINATOR; while its partition loads,
COORDINATOR_LOAD_IN_PROGRESS. FindCoordinator waits up to a second for a loading partition's load
event.

Dependencies, each a small Protocol the broker's objects satisfy: `ClusterMetadata` (the metadata
cache: topics, partitions, brokers), `InternalTopicCreator` (the broker's auto topic creation) and
the runtime's `CoordinatorLog` (the ReplicaManager, through `ReplicaManagerLog`).

Logging: the shards that start loading together (all of them at startup or on the first
FindCoordinator) are reported by one INFO line when the last of them is loaded, not one per partition.
A failed creation of `__consumer_offsets` (a full disk...) answers COORDINATOR_NOT_AVAILABLE and is
logged once per cause until a creation succeeds, not once per client retry.

KIP-848 consumer-protocol groups (`consumer_group_heartbeat`, `consumer_group_describe`) are routed
the same way and decided by `consumer_group.py` on the shard; the decisions read the topics through
`_MetadataTopics` (the metadata cache by name, regex matches cached per metadata version). A
consumer group's offsets are the classic entry of its id: OffsetCommit / OffsetFetch check the
member epoch against the consumer group first; JoinGroup, SyncGroup, Heartbeat and LeaveGroup on a
consumer group with members are decided by `migration.py` (classic members of a consumer group),
an empty one is deleted before a JoinGroup; a ConsumerGroupHeartbeat joining a classic group with
members upgrades it (`migration.heartbeat_upgrading`); ListGroups lists it as type "consumer";
DescribeGroups answers Dead for it; DeleteGroups deletes an empty one and its offsets.

Every method returns the API's result value (error codes inside) and never raises for Kafka errors.
Callers: the group API handlers (through `broker.group_coordinator`), tests.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.clock import Clock
from odradek.controller.metadata import BrokerInfo, PartitionState, TopicMetadata
from odradek.coordinator import classic, consumer_group, migration, share_group
from odradek.coordinator.classic import (
    CommitArgs,
    GroupDescription,
    HeartbeatArgs,
    JoinArgs,
    JoinResult,
    LeaveResult,
    LeavingMember,
    OffsetDeleteResult,
    SyncArgs,
    SyncResult,
)
from odradek.coordinator.config import ConfigValues, GroupConfig
from odradek.coordinator.consumer_group import ConsumerGroup, TopicInfo
from odradek.coordinator.group import CommittedOffset, Group, Now, TopicPartition
from odradek.coordinator.partitioning import OFFSETS_TOPIC, partition_for
from odradek.coordinator.runtime import (
    CoordinatorContext,
    CoordinatorLog,
    CoordinatorRuntime,
    ShardState,
    Timers,
)
from odradek.coordinator.shard import GroupCoordinatorShard, runtime_config
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.repeated_failures import RepeatedFailures

log = logging.getLogger(__name__)

FIND_COORDINATOR_LOAD_WAIT_S = 1.0


class ClusterMetadata(Protocol):
    """What the coordinators read of the broker's metadata cache."""

    def topic(self, name: str) -> TopicMetadata | None: ...

    def partition(self, name: str, index: int) -> PartitionState | None: ...

    def brokers(self) -> Sequence[BrokerInfo]: ...


class InternalTopicCreator(Protocol):
    """The broker's auto topic creation, which gives the internal topics their own settings."""

    async def auto_create_topic(self, name: str) -> TopicMetadata | None: ...


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class CoordinatorLocation:
    error_code: int
    node: BrokerInfo | None = None


class CoordinatorTopic:
    """The internal topic a coordinator's keys map to (`__consumer_offsets` for groups,
    `__transaction_state` for transactional ids): auto-created on the first FindCoordinator, each
    cause of a failed creation logged once until one succeeds (clients retry every few ms), and the
    partition and leader that coordinate a key."""

    def __init__(self, metadata: ClusterMetadata, creator: InternalTopicCreator, name: str) -> None:
        self._metadata = metadata
        self._creator = creator
        self.name = name
        self._create_failures = RepeatedFailures(log)  # one key: this topic's creation

    def partition_for(self, key: str) -> int | None:
        """The key's partition (None before the topic exists with partitions)."""
        topic = self._metadata.topic(self.name)
        if topic is None or not topic.partitions:
            return None
        return partition_for(key, len(topic.partitions))

    async def locate(self, key: str) -> tuple[CoordinatorLocation, int]:
        """Where `key` is coordinated: its partition's leader (else COORDINATOR_NOT_AVAILABLE) and
        the partition (-1 while the topic is not there)."""
        try:
            topic = self._metadata.topic(self.name) or await self._creator.auto_create_topic(self.name)
        except KafkaError as exc:
            self._create_failures.failed(self.name, "Cannot create %s: %s", self.name, exc)
            return CoordinatorLocation(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1
        self._create_failures.forget(self.name)
        if topic is None:
            return CoordinatorLocation(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1
        partition = partition_for(key, len(topic.partitions))
        state = topic.partitions.get(partition)
        brokers = self._metadata.brokers()
        node = next((b for b in brokers if state is not None and b.broker_id == state.leader), None)
        if node is None:
            return CoordinatorLocation(ErrorCode.COORDINATOR_NOT_AVAILABLE), partition
        return CoordinatorLocation(ErrorCode.NONE, node), partition


FetchResult = tuple[int, dict[TopicPartition, CommittedOffset | None]]


class GroupCoordinator:
    def __init__(
        self,
        config: ConfigValues,
        clock: Clock,
        metadata: ClusterMetadata,
        topic_creator: InternalTopicCreator,
        offsets_log: CoordinatorLog,
        timers: Timers,
    ) -> None:
        self.config = GroupConfig.from_kafka_config(config)
        self._clock = clock
        self._runtime: CoordinatorRuntime[GroupCoordinatorShard] = CoordinatorRuntime(
            offsets_log,
            runtime_config(self.config),
            clock,
            lambda context: GroupCoordinatorShard(context, self.config, clock, self._topics_view),
            timers,
            self._on_shard_loaded,
        )
        self._topic = CoordinatorTopic(metadata, topic_creator, OFFSETS_TOPIC)
        self._metadata = metadata
        self._regex_cache: dict[str, tuple[int, frozenset[str]]] = {}  # regex -> (metadata version, topics)
        self._loading: set[int] = set()  # partitions the next load summary waits for
        self._loaded_partitions = 0
        self._loaded_groups = 0
        self._load_started_ms = 0
        # a group's own configs (GROUP config resources), replaced by the broker with the store's
        self.group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {}

    # -- life cycle and leadership ----------------------------------------------------------------

    async def startup(self) -> None:
        self._runtime.startup()

    async def shutdown(self) -> None:
        await self._runtime.shutdown()

    def on_partition_loaded(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `__consumer_offsets-<partition>` at `leader_epoch`: load it."""
        if self._runtime.on_partition_loaded(partition, leader_epoch) is None:
            return
        if not self._loading:
            self._load_started_ms = self._clock.monotonic_ms()
        self._loading.add(partition)

    def on_partition_unloaded(self, partition: int) -> None:
        """This broker no longer leads the partition: its groups go (their requests NOT_COORDINATOR)."""
        context = self._runtime.on_partition_unloaded(partition)
        if context is not None:
            self._on_shard_loaded(context)

    def _on_shard_loaded(self, context: CoordinatorContext[GroupCoordinatorShard]) -> None:
        """A shard finished loading (or failed, or went): the summary line once no shard is loading."""
        current = self._runtime.context(context.partition)
        if context.partition not in self._loading or current not in (context, None):
            return
        self._loading.discard(context.partition)
        if context.state is ShardState.ACTIVE:
            self._loaded_partitions += 1
            self._loaded_groups += len(context.shard.groups)
        if self._loading or not self._loaded_partitions:
            return
        log.info(
            "Loaded %d groups from %d partitions of %s in %d ms",
            self._loaded_groups,
            self._loaded_partitions,
            OFFSETS_TOPIC,
            self._clock.monotonic_ms() - self._load_started_ms,
        )
        self._loaded_partitions = self._loaded_groups = 0

    def shards(self) -> dict[int, GroupCoordinatorShard]:
        return {partition: context.shard for partition, context in self._runtime.contexts().items()}

    def wake(self) -> None:
        """Make every shard look at the clock now (tests driving a ManualClock)."""
        self._runtime.wake()

    # -- FindCoordinator --------------------------------------------------------------------------

    async def find_coordinator(self, group_id: str) -> CoordinatorLocation:
        """The broker leading the group's partition, creating `__consumer_offsets` if needed."""
        location, partition = await self._topic.locate(group_id)
        context = self._runtime.context(partition)
        if location.node is not None and context is not None:
            await context.wait_loaded(FIND_COORDINATOR_LOAD_WAIT_S)
        return location

    # -- group membership -------------------------------------------------------------------------

    async def join_group(self, args: JoinArgs) -> JoinResult:
        new_member_id = f"{args.group_instance_id or args.client_id}-{uuid.uuid4()}"
        shard = self._shard(args.group_id)
        empty = shard.consumer_groups.get(args.group_id) if shard is not None else None
        if shard is not None and empty is not None and not empty.members:
            # an empty consumer-protocol group gives way to the classic group (its offsets stay)
            await shard.submit_consumer(
                args.group_id, lambda group, _classic, _now: consumer_group.delete(args.group_id, group), int
            )

        if shard is not None and _has_consumer_members(shard, args.group_id):
            # a consumer group with members: the classic member joins it (migration.py)
            def join_consumer(
                group: ConsumerGroup | None, _classic: Group | None, now: Now
            ) -> consumer_group.Decision:
                if group is None or not group.members:
                    return consumer_group.Decision(
                        group, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, args.member_id)
                    )
                return migration.classic_join(
                    group, args, new_member_id, self._topics_view(), now, self.config
                )

            joined = await shard.submit_consumer(
                args.group_id, join_consumer, lambda code: JoinResult(code, args.member_id)
            )
            assert isinstance(joined, JoinResult)
            return joined

        def decide(group: Group | None, ticket: int, now: Now) -> classic.Decision:
            if shard is not None and args.group_id in shard.share_groups:
                # a share group's id: no classic member may join it
                reply = JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, args.member_id)
                return classic.Decision(group, (classic.Reply(ticket, reply),))
            if shard is not None and _has_consumer_members(shard, args.group_id):
                # became a consumer group while this request waited: join again
                reply = JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, args.member_id)
                return classic.Decision(group, (classic.Reply(ticket, reply),))
            return classic.join_group(group, args, ticket, new_member_id, now, self.config)

        result = await self._submit(args.group_id, decide, lambda code: JoinResult(code, args.member_id))
        assert isinstance(result, JoinResult)
        return result

    async def sync_group(self, args: SyncArgs) -> SyncResult:
        shard = self._shard(args.group_id)
        if shard is not None and _has_consumer_members(shard, args.group_id):
            synced = await shard.submit_consumer(
                args.group_id,
                lambda group, _classic, now: _on_consumer_group(
                    group,
                    SyncResult(ErrorCode.UNKNOWN_MEMBER_ID),
                    lambda g: migration.classic_sync(g, args, now),
                ),
                SyncResult,
            )
            assert isinstance(synced, SyncResult)
            return synced
        result = await self._submit(
            args.group_id,
            lambda group, ticket, now: classic.sync_group(group, args, ticket, now, self.config),
            SyncResult,
        )
        assert isinstance(result, SyncResult)
        return result

    async def heartbeat(self, args: HeartbeatArgs) -> int:
        shard = self._shard(args.group_id)
        if shard is not None and _has_consumer_members(shard, args.group_id):
            answered = await shard.submit_consumer(
                args.group_id,
                lambda group, _classic, now: _on_consumer_group(
                    group, ErrorCode.UNKNOWN_MEMBER_ID, lambda g: migration.classic_heartbeat(g, args, now)
                ),
                int,
            )
            assert isinstance(answered, int)
            return answered
        result = await self._submit(
            args.group_id,
            lambda group, ticket, now: classic.heartbeat(group, args, ticket, now, self.config),
            int,
        )
        assert isinstance(result, int)
        return result

    async def leave_group(self, group_id: str, members: tuple[LeavingMember, ...]) -> LeaveResult:
        shard = self._shard(group_id)
        if shard is not None and _has_consumer_members(shard, group_id):
            left = await shard.submit_consumer(
                group_id,
                lambda group, _classic, now: _on_consumer_group(
                    group,
                    LeaveResult(ErrorCode.UNKNOWN_MEMBER_ID),
                    lambda g: migration.classic_leave(g, members, self._topics_view(), now),
                ),
                LeaveResult,
            )
            assert isinstance(left, LeaveResult)
            return left
        result = await self._submit(
            group_id,
            lambda group, ticket, now: classic.leave_group(group, members, ticket, now, self.config),
            LeaveResult,
        )
        assert isinstance(result, LeaveResult)
        return result

    # -- offsets ----------------------------------------------------------------------------------

    async def commit_offsets(
        self, args: CommitArgs, api_version: int | None = None
    ) -> dict[TopicPartition, int]:
        """OffsetCommit (`api_version`: the request's, None for a caller that is not a request)."""
        shard = self._shard(args.group_id)

        def decide(group: Group | None, ticket: int, now: Now) -> classic.Decision:
            consumer = shard.consumer_groups.get(args.group_id) if shard is not None else None
            if consumer is None:
                return classic.commit_offsets(group, args, ticket, now, self.config)
            error = consumer_group.validate_offset_commit(
                consumer, args.member_id, args.generation_id, api_version
            )
            if error != ErrorCode.NONE:
                return classic.Decision(group, (classic.Reply(ticket, dict.fromkeys(args.offsets, error)),))
            # the consumer group's offsets are kept as a group that only commits offsets
            simple = CommitArgs(args.group_id, -1, "", None, args.offsets)
            return classic.commit_offsets(group, simple, ticket, now, self.config)

        result = await self._submit(args.group_id, decide, lambda code: {tp: code for tp in args.offsets})
        assert isinstance(result, dict)
        return result

    async def commit_txn_offsets(
        self, args: CommitArgs, producer_id: int, producer_epoch: int
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: the offsets are stored in the producer's transaction and take effect
        when its COMMIT marker reaches the group's partition (`complete_txn`)."""
        shard = self._shard(args.group_id)
        if shard is None:
            return dict.fromkeys(args.offsets, self._unavailable(args.group_id))
        result = await shard.submit_txn_commit(args, producer_id, producer_epoch)
        assert isinstance(result, dict)
        return result

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker of `producer_id` was written to `__consumer_offsets-<partition>`."""
        context = self._runtime.context(partition)
        if context is not None:
            context.shard.complete_txn(producer_id, commit)

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions with an offset of the group pending in an open transaction."""
        shard = self._shard(group_id)
        if shard is None:
            return set()
        return {tp for groups in shard.pending_txn_offsets.values() for tp in groups.get(group_id, ())}

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: tuple[TopicPartition, ...] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchResult:
        """(error code, committed offset per partition) — the error is the coordinator's state, or
        (OffsetFetch v9, a consumer-protocol group) UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH."""
        shard = self._shard(group_id)

        def view(group: Group | None) -> FetchResult:
            consumer = shard.consumer_groups.get(group_id) if shard is not None else None
            if consumer is not None and member_id is not None:
                error = consumer_group.validate_offset_fetch(consumer, member_id, member_epoch)
                if error != ErrorCode.NONE:
                    return error, {}
            return ErrorCode.NONE, classic.fetch_offsets(group, partitions)

        result = await self._submit(group_id, _read(view), lambda code: (code, {}))
        assert isinstance(result, tuple)
        return result

    async def delete_offsets(
        self, group_id: str, partitions: tuple[TopicPartition, ...]
    ) -> OffsetDeleteResult:
        shard = self._shard(group_id)

        def decide(group: Group | None, ticket: int, now: Now) -> classic.Decision:
            consumer = shard.consumer_groups.get(group_id) if shard is not None else None
            keep = consumer.subscribed_topic_names() if consumer is not None else frozenset()
            return classic.delete_offsets(group, partitions, ticket, now, keep)

        result = await self._submit(group_id, decide, OffsetDeleteResult)
        assert isinstance(result, OffsetDeleteResult)
        return result

    # -- administration ---------------------------------------------------------------------------

    async def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups (v0-v5): a consumer-protocol group is described as Kafka does for a group
        that is not a classic one: Dead, without members."""
        shard = self._shard(group_id)

        def view(group: Group | None) -> GroupDescription:
            if shard is not None and (group_id in shard.consumer_groups or group_id in shard.share_groups):
                return GroupDescription(ErrorCode.NONE, group_id, "Dead")
            return classic.describe_group(group_id, group)

        result = await self._submit(
            group_id,
            _read(view),
            lambda code: GroupDescription(code, group_id, ""),
        )
        assert isinstance(result, GroupDescription)
        return result

    def list_groups(self) -> tuple[int, list[GroupListing]]:
        """Every group of every loaded shard; COORDINATOR_LOAD_IN_PROGRESS while any shard loads."""
        error = ErrorCode.NONE
        listings: list[GroupListing] = []
        for context in self._runtime.contexts().values():
            if context.state is ShardState.LOADING:
                error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            consumer_groups = context.shard.consumer_groups
            listings.extend(
                _listing(group)
                for group in context.shard.groups.values()
                if group.group_id not in consumer_groups
            )
            listings.extend(
                GroupListing(group.group_id, "consumer", group.state.value, "consumer")
                for group in consumer_groups.values()
            )
            listings.extend(
                GroupListing(group.group_id, "share", group.state.value, "share")
                for group in context.shard.share_groups.values()
            )
        return error, listings

    async def delete_group(self, group_id: str) -> int:
        shard = self._shard(group_id)
        if shard is not None and group_id in shard.share_groups:
            deleted = await shard.submit_share(
                group_id, lambda group, _now: share_group.delete(group_id, group), int
            )
            assert isinstance(deleted, int)
            return deleted
        if shard is not None and group_id in shard.consumer_groups:
            deleted = await shard.submit_consumer(
                group_id, lambda group, _classic, _now: consumer_group.delete(group_id, group), int
            )
            assert isinstance(deleted, int)
            if deleted != ErrorCode.NONE:
                return deleted
            offsets = await self._submit(
                group_id, lambda group, ticket, now: classic.delete_group(group, ticket, now), int
            )
            assert isinstance(offsets, int)
            return ErrorCode.NONE if offsets == ErrorCode.GROUP_ID_NOT_FOUND else offsets
        result = await self._submit(
            group_id,
            lambda group, ticket, now: classic.delete_group(group, ticket, now),
            int,
        )
        assert isinstance(result, int)
        return result

    # -- consumer-protocol groups (KIP-848) ---------------------------------------------------------

    async def consumer_group_heartbeat(
        self, args: consumer_group.HeartbeatArgs
    ) -> consumer_group.HeartbeatResult:
        invalid = consumer_group.validate(args, self.config)
        if invalid is not None:
            return invalid
        shard = self._shard(args.group_id)
        if shard is None:
            return consumer_group.HeartbeatResult(self._unavailable(args.group_id))
        if args.group_id in shard.share_groups:  # no group changes kind (Kafka's GroupIdNotFoundException)
            message = f"Group {args.group_id} is not a consumer group."
            return consumer_group.HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, message)
        new_member_id = str(uuid.uuid4())

        def decide(
            group: ConsumerGroup | None, classic_group: Group | None, now: Now
        ) -> consumer_group.Decision:
            # a classic group with members is upgraded if it may be, a consumer group left with
            # classic members only downgraded (migration.py)
            decision = migration.heartbeat_upgrading(
                group, classic_group, args, new_member_id, self._topics_view(), now, self.config
            )
            return migration.maybe_downgrade(group, decision, classic_group, now, self.config)

        result = await shard.submit_consumer(args.group_id, decide, consumer_group.HeartbeatResult)
        assert isinstance(result, consumer_group.HeartbeatResult)
        return result

    async def consumer_group_describe(self, group_id: str) -> consumer_group.GroupDescription:
        shard = self._shard(group_id)
        if shard is None:
            return consumer_group.GroupDescription(self._unavailable(group_id), None, group_id)

        def decide(
            group: ConsumerGroup | None, classic_group: Group | None, now: Now
        ) -> consumer_group.Decision:
            is_classic = classic_group is not None and classic_group.protocol_type is not None
            is_classic = is_classic or group_id in shard.share_groups  # "is not a consumer group."
            return consumer_group.Decision(
                group, consumer_group.describe(group_id, group, is_classic, self.config)
            )

        result = await shard.submit_consumer(
            group_id, decide, lambda code: consumer_group.GroupDescription(code, None, group_id)
        )
        assert isinstance(result, consumer_group.GroupDescription)
        return result

    # -- share groups (KIP-932) ---------------------------------------------------------------------

    async def share_group_heartbeat(self, args: share_group.HeartbeatArgs) -> share_group.HeartbeatResult:
        invalid = share_group.validate(args)
        if invalid is not None:
            return invalid
        shard = self._shard(args.group_id)
        if shard is None:
            return share_group.HeartbeatResult(self._unavailable(args.group_id))

        settings = share_group.with_group_configs(shard.share_settings, self.group_configs(args.group_id))

        def decide(group: share_group.ShareGroup | None, now: Now) -> share_group.Decision:
            other = group is None and shard.other_kind(args.group_id)
            return share_group.heartbeat(group, args, other, self._topics_view(), now, settings)

        result = await shard.submit_share(args.group_id, decide, share_group.HeartbeatResult)
        assert isinstance(result, share_group.HeartbeatResult)
        return result

    async def share_group_describe(self, group_id: str) -> share_group.GroupDescription:
        shard = self._shard(group_id)
        if shard is None:
            return share_group.GroupDescription(self._unavailable(group_id), None, group_id)

        def decide(group: share_group.ShareGroup | None, now: Now) -> share_group.Decision:
            other = group is None and shard.other_kind(group_id)
            return share_group.Decision(group, share_group.describe(group_id, group, other))

        result = await shard.submit_share(
            group_id, decide, lambda code: share_group.GroupDescription(code, None, group_id)
        )
        assert isinstance(result, share_group.GroupDescription)
        return result

    async def share_group_admin(self, group_id: str, empty: bool) -> tuple[int, str | None]:
        """The group-level error of a share group offsets API (`empty`: the group must have no
        members), decided as an event of the group's shard so it sees every earlier heartbeat."""
        shard = self._shard(group_id)
        if shard is None:
            return self._unavailable(group_id), None

        def decide(group: share_group.ShareGroup | None, now: Now) -> share_group.Decision:
            other = group is None and shard.other_kind(group_id)
            return share_group.Decision(group, share_group.admin_check(group_id, group, other, empty))

        result = await shard.submit_share(group_id, decide, lambda code: (code, None))
        assert isinstance(result, tuple)
        return result

    async def share_partitions_changed(
        self,
        group_id: str,
        added: Mapping[uuid.UUID, tuple[str, Sequence[int]]] = {},  # noqa: B006 - read only
        removed: Sequence[uuid.UUID] = (),
    ) -> int:
        """The group's initialized share-partitions after AlterShareGroupOffsets (`added`) or
        DeleteShareGroupOffsets (`removed`): ShareGroupStatePartitionMetadata written."""
        shard = self._shard(group_id)
        if shard is None:
            return self._unavailable(group_id)
        names = {t: name for t, (name, _) in added.items()}
        partitions = [(t, p) for t, (_, ps) in added.items() for p in ps]

        def decide(group: share_group.ShareGroup | None, now: Now) -> share_group.Decision:
            if removed:
                return share_group.forget_topics(group_id, group, removed)
            return share_group.add_initialized(group_id, group, names, partitions)

        result = await shard.submit_share(group_id, decide, int)
        assert isinstance(result, int)
        return result

    def find_share_group(self, group_id: str) -> share_group.ShareGroup | None:
        """The share group as its shard holds it now (None: unknown here or not loaded)."""
        shard = self._shard(group_id)
        return shard.share_groups.get(group_id) if shard is not None else None

    def _topics_view(self) -> _MetadataTopics:
        return _MetadataTopics(self._metadata, self._regex_cache)

    # -- routing ----------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int | None:
        """The group's `__consumer_offsets` partition (None before the topic exists)."""
        return self._topic.partition_for(group_id)

    def _shard(self, group_id: str) -> GroupCoordinatorShard | None:
        context = self._runtime.context(self.partition_for(group_id))
        return context.shard if context is not None else None

    async def _submit(
        self,
        group_id: str,
        decide: Callable[[Group | None, int, Now], classic.Decision],
        error_result: Callable[[int], object],
    ) -> object:
        shard = self._shard(group_id)
        if shard is None:
            return error_result(self._unavailable(group_id))
        return await shard.submit(group_id, decide, error_result)

    def _unavailable(self, group_id: str) -> int:
        return self._runtime.unavailable(self.partition_for(group_id))


def _read(view: Callable[[Group | None], object]) -> Callable[[Group | None, int, Now], classic.Decision]:
    """A decision that changes nothing and answers `view(group)`."""

    def decide(group: Group | None, ticket: int, now: Now) -> classic.Decision:
        return classic.Decision(group, (classic.Reply(ticket, view(group)),))

    return decide


def _listing(group: Group) -> GroupListing:
    return GroupListing(group.group_id, group.protocol_type or "", group.state.value)


def _has_consumer_members(shard: GroupCoordinatorShard, group_id: str) -> bool:
    group = shard.consumer_groups.get(group_id)
    return group is not None and bool(group.members)


def _on_consumer_group(
    group: ConsumerGroup | None,
    missing: object,
    decide: Callable[[ConsumerGroup], consumer_group.Decision],
) -> consumer_group.Decision:
    """A classic request's decision over the consumer group of its id; `missing` when the group
    lost its members before the event ran (the member joins again)."""
    if group is None or not group.members:
        return consumer_group.Decision(group, missing)
    return decide(group)


class _MetadataTopics:
    """The metadata cache as consumer-group decisions read it: subscribed topics by name, and the
    topic names a regex subscription matches (full match, internal topics excluded), cached per
    metadata version (the cache's UpdateMetadata count) so a heartbeat does not scan every topic."""

    def __init__(self, metadata: ClusterMetadata, cache: dict[str, tuple[int, frozenset[str]]]) -> None:
        self._metadata = metadata
        self._cache = cache

    @property
    def version(self) -> int | None:
        version = getattr(self._metadata, "version", None)
        return version if isinstance(version, int) else None

    def topic(self, name: str) -> TopicInfo | None:
        topic = self._metadata.topic(name)
        if topic is None or not topic.partitions:
            return None
        return TopicInfo(name, topic.topic_id, len(topic.partitions))

    def matching(self, regex: str) -> frozenset[str]:
        version = self.version
        cached = self._cache.get(regex)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1]
        if consumer_group.regex_problem(regex) is not None:
            return frozenset()
        pattern = re.compile(regex)  # parsed without warnings by regex_problem, now cached by `re`
        topics = getattr(self._metadata, "topics", None)
        names = topics() if topics is not None else {}
        matched = frozenset(
            name for name, t in names.items() if not t.is_internal and pattern.fullmatch(name) is not None
        )
        if version is not None:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[regex] = (version, matched)
        return matched
