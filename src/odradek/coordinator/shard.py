"""The group coordinator's state machine over one `__consumer_offsets` partition led by this broker
(Kafka's GroupCoordinatorShard), run by the coordinator runtime (runtime.py: loading, the single
writer, append then apply, timers, closing).

Owns the groups of the partition: classic groups (`groups`, which also hold the committed offsets of
every group) and consumer-protocol groups (`consumer_groups`, KIP-848: `consumer_group.*` decisions,
their records encoded by consumer_records.py; a write failure answers the heartbeat with the mapped
append error and keeps the group as it was). Share groups (`share_groups`, KIP-932: `share_group.*`
decisions, their records encoded by share_group_records.py) are kept the same way, each member's
session deadline a timer. Loading replays the partition through `GroupLoader`.
An event is a pure decision over one group (`classic.*`): its records are written through the runtime
(appended with acks=-1 and committed) before the new group state is kept and the replies are sent; if the
append fails, the group stays as it was and the decision's failure answer is sent instead (Kafka's
mapping, with the group coordinator's additions: a record too large answers
INVALID_COMMIT_OFFSET_SIZE, a fenced transactional producer INVALID_PRODUCER_EPOCH). A decision
without a failure answer (a timer's) keeps its state in memory and logs the failed write. After a
NOT_LEADER_OR_FOLLOWER append the decision's replies are sent, nothing is kept and the runtime closes
the partition. TxnOffsetCommit offsets are appended in a transactional batch (the shard is the
partition's only writer, so it continues its own sequence per producer) and stay pending until the
producer's marker reaches the partition (`complete_txn`).

Timers (runtime timers on the injected clock): each group's next deadline (session, rebalance,
pending sync) runs `classic.advance` for the group, and each consumer group's next member
deadline (session, revocation) `consumer_group.advance`; offset expiration runs every
offsets.retention.check.interval.ms.

Requests wait on the runtime's tickets; a JoinGroup or SyncGroup parked in a rebalance keeps its
ticket until a later event answers it. Closing (leadership moved, broker shutdown) answers
everything still waiting with NOT_COORDINATOR.

Logging: a group's changes an operator follows get one INFO line each (created, rebalanced with its
generation and member count, emptied, deleted); the load of the partition is one DEBUG line, and the
coordinator sums the loads up in one INFO line.

Callers: `GroupCoordinator` only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.clock import Clock
from odradek.coordinator import (
    classic,
    consumer_group,
    consumer_records,
    migration,
    share_group,
    share_group_records,
)
from odradek.coordinator.config import GroupConfig
from odradek.coordinator.consumer_group import ConsumerGroup, TopicsView
from odradek.coordinator.group import Group, GroupState, Now, TopicPartition
from odradek.coordinator.loader import GroupLoader, PendingTxnOffsets
from odradek.coordinator.partitioning import OFFSETS_TOPIC
from odradek.coordinator.records import (
    GroupMetadataValue,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.coordinator.runtime import CoordinatorContext, Loaded, RuntimeConfig, ShardState
from odradek.coordinator.share_group import ShareGroup
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord
from odradek.protocol.records.batch import BatchHeader
from odradek.protocol.records.record import Record

log = logging.getLogger(__name__)

# Timer keys: (kind, group id); the empty group id is a valid key for offset commits.
_GROUP_TIMER = 0
_EXPIRATION = (1, "")
_CONSUMER_GROUP_TIMER = 2
_SHARE_GROUP_TIMER = 3

# The group coordinator's additions to the runtime's append error map (Kafka's).
_APPEND_ERRORS: dict[int, ErrorCode] = {
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,  # a fenced TxnOffsetCommit
}

Decide = Callable[[Group | None, int, Now], classic.Decision]
ErrorResult = Callable[[int], object]
# A consumer-protocol group's decision, given the classic group of the same id (its offsets)
ConsumerDecide = Callable[[ConsumerGroup | None, Group | None, Now], consumer_group.Decision]
# A share group's decision (share_group.py)
ShareDecide = Callable[[ShareGroup | None, Now], share_group.Decision]


class _NoTopics:
    """The topics view of a shard built without one (tests of the classic path): no topics."""

    version = None

    def topic(self, name: str) -> None:
        return None

    def matching(self, regex: str) -> frozenset[str]:
        return frozenset()


def runtime_config(config: GroupConfig) -> RuntimeConfig:
    """The runtime's settings for `__consumer_offsets`: offsets.load.buffer.size and
    offsets.commit.timeout.ms."""
    return RuntimeConfig(
        OFFSETS_TOPIC,
        config.offsets_load_buffer_size,
        config.offsets_commit_timeout_ms,
        _APPEND_ERRORS,
        "Group coordinator shard",
    )


class GroupCoordinatorShard:
    def __init__(
        self,
        context: CoordinatorContext[GroupCoordinatorShard],
        config: GroupConfig,
        clock: Clock,
        topics: Callable[[], TopicsView] | None = None,
    ) -> None:
        self._context = context
        self.partition = context.partition
        self.groups: dict[str, Group] = {}
        # consumer-protocol groups (KIP-848); their offsets are in `groups` under the same id
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # share groups (KIP-932): membership only; their share-partitions' state is the share coordinator's
        self.share_groups: dict[str, ShareGroup] = {}
        self._topics = topics or _NoTopics
        # TxnOffsetCommit offsets per producer id and group, until the transaction's marker
        self.pending_txn_offsets: PendingTxnOffsets = {}
        self._txn_sequences: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, next sequence)
        self._loader: GroupLoader | None = GroupLoader()
        self._config = config
        self._clock = clock

    @property
    def state(self) -> ShardState:
        return self._context.state

    async def wait_loaded(self) -> None:
        """Until the partition is replayed (or the shard closed)."""
        await self._context.wait_loaded()

    # -- loading (the runtime's calls) ------------------------------------------------------------

    def replay(self, header: BatchHeader, records: list[Record]) -> None:
        assert self._loader is not None
        self._loader.apply_batch(header, records)

    def loaded(self, loaded: Loaded) -> None:
        loader, self._loader = self._loader, None
        assert loader is not None
        self.groups = loader.groups(self._now())
        self.pending_txn_offsets = loader.pending_txn_offsets
        self._txn_sequences = loader.txn_sequences
        for group_id, group in self.groups.items():
            self._schedule(group_id, group)
        now = self._now()
        for group_id, loaded_group in loader.consumer_groups.groups().items():
            fresh = consumer_group.with_fresh_sessions(loaded_group, now, self._config)
            self.consumer_groups[group_id] = fresh
            self._schedule_consumer(group_id, fresh)
        for group_id, loaded_share in loader.share_groups.groups().items():
            fresh_share = share_group.with_fresh_sessions(loaded_share, now, self.share_settings)
            self.share_groups[group_id] = fresh_share
            self._schedule_share(group_id, fresh_share)
        self._context.every(
            _EXPIRATION, self._config.offsets_retention_check_interval_ms, self._expire_offsets
        )
        log.debug(
            "Loaded %d groups and %d consumer groups from __consumer_offsets-%d up to offset %d in %d ms "
            "(%d records skipped)",
            len(self.groups),
            len(self.consumer_groups),
            self.partition,
            loaded.offset,
            loaded.elapsed_ms,
            loader.skipped,
        )

    def unloaded(self) -> None:
        self.groups.clear()
        self.consumer_groups.clear()
        self.share_groups.clear()
        self.pending_txn_offsets.clear()

    # -- requests ---------------------------------------------------------------------------------

    async def submit(self, group_id: str, decide: Decide, error_result: ErrorResult) -> object:
        """Run `decide` as the next event of the partition; the reply for this request."""

        async def event(ticket: int) -> None:
            await self._apply(group_id, lambda group, now: decide(group, ticket, now))

        return await self._context.submit(event, error_result)

    async def submit_consumer(
        self, group_id: str, decide: ConsumerDecide, error_result: ErrorResult
    ) -> object:
        """Run a consumer-protocol group's decision as the next event of the partition."""

        async def event(ticket: int) -> None:
            await self._apply_consumer(group_id, decide, ticket, error_result)

        return await self._context.submit(event, error_result)

    async def submit_share(self, group_id: str, decide: ShareDecide, error_result: ErrorResult) -> object:
        """Run a share group's decision as the next event of the partition."""

        async def event(ticket: int) -> None:
            await self._apply_share(group_id, decide, ticket, error_result)

        return await self._context.submit(event, error_result)

    @property
    def share_settings(self) -> share_group.ShareSettings:
        return share_group.ShareSettings(
            self._config.share_session_timeout_ms,
            self._config.share_heartbeat_interval_ms,
            self._config.share_max_size,
        )

    def other_kind(self, group_id: str) -> bool:
        """Whether a classic group with a protocol or members, or a consumer group, holds the id."""
        classic_group = self.groups.get(group_id)
        if group_id in self.consumer_groups:
            return True
        return classic_group is not None and (
            classic_group.protocol_type is not None or bool(classic_group.members)
        )

    async def submit_txn_commit(
        self, args: classic.CommitArgs, producer_id: int, producer_epoch: int
    ) -> object:
        """TxnOffsetCommit: the error per partition once the offsets are stored, pending."""

        async def event(ticket: int) -> object:
            return await self._commit_txn_offsets(args, producer_id, producer_epoch)

        return await self._context.submit(event, lambda code: dict.fromkeys(args.offsets, code))

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """A marker of `producer_id` is in the partition (Kafka's scheduleHandleTxnCompletion)."""

        async def event() -> None:
            self._end_txn(producer_id, commit)

        self._context.enqueue(event)

    # -- events -----------------------------------------------------------------------------------

    async def _apply(self, group_id: str, decide: Callable[[Group | None, Now], classic.Decision]) -> None:
        now = self._now()
        before = self.groups.get(group_id)
        decision = decide(before, now)
        if decision.records:
            appended = await self._context.write(_records(decision.records, now))
            if appended.error != ErrorCode.NONE:
                if decision.on_failure is not None:
                    decision = classic.write_failed(
                        before, decision.on_failure, appended.error, now, self._config
                    )
                else:
                    log.warning(
                        "Could not store the state of group %s: %s", group_id, ErrorCode(appended.error).name
                    )
            if not self._context.active:  # leadership moved: answer, keep nothing
                self._deliver(decision)
                return
        if decision.group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = decision.group
            self._schedule(group_id, decision.group)
        if group_id not in self.consumer_groups:  # a consumer group's offsets: its own lines
            _log_transition(group_id, before, decision.group)
        self._deliver(decision)

    async def _apply_consumer(
        self,
        group_id: str,
        decide: ConsumerDecide,
        ticket: int | None,
        error_result: ErrorResult | None = None,
    ) -> None:
        now = self._now()
        before = self.consumer_groups.get(group_id)
        decision = decide(before, self.groups.get(group_id), now)
        reply = decision.reply
        if decision.records:
            appended = await self._context.write(_consumer_records(decision.records, now))
            if appended.error != ErrorCode.NONE:
                if ticket is not None and error_result is not None:
                    self._context.reply(ticket, error_result(appended.error))
                else:
                    log.warning(
                        "Could not store the state of consumer group %s: %s",
                        group_id,
                        ErrorCode(appended.error).name,
                    )
                return
            if not self._context.active:  # leadership moved: answer, keep nothing
                if ticket is not None:
                    self._context.reply(ticket, reply)
                return
        if decision.group is None:
            self.consumer_groups.pop(group_id, None)
        else:
            self.consumer_groups[group_id] = decision.group
            self._schedule_consumer(group_id, decision.group)
        if decision.classic is not None:  # a migration: the classic group of the id changed
            self._change_classic(group_id, decision.classic, upgraded=decision.group is not None)
        _log_consumer_transition(group_id, before, decision.group)
        if ticket is not None:
            self._context.reply(ticket, reply)

    def _change_classic(self, group_id: str, change: consumer_group.ClassicChange, upgraded: bool) -> None:
        if change.group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = change.group
            self._schedule(group_id, change.group)
        for parked, value in change.replies:
            self._context.reply(parked, value)
        if upgraded:
            log.info("Group %s upgraded: a classic group converted to a consumer group", group_id)
        else:
            log.info("Group %s downgraded: a consumer group converted to a classic group", group_id)

    def _schedule_consumer(self, group_id: str, group: ConsumerGroup) -> None:
        deadline = group.next_deadline_ms()
        if deadline is not None:
            self._context.schedule(
                (_CONSUMER_GROUP_TIMER, group_id), deadline, lambda: self._advance_consumer(group_id)
            )

    async def _advance_consumer(self, group_id: str) -> None:
        if group_id not in self.consumer_groups:
            return

        def decide(
            group: ConsumerGroup | None, classic_group: Group | None, now: Now
        ) -> consumer_group.Decision:
            if group is None:
                return consumer_group.Decision(None)
            decision, fenced = consumer_group.advance(group, self._topics(), now)
            for line in fenced:
                log.info("%s", line)
            return migration.maybe_downgrade(group, decision, classic_group, now, self._config)

        await self._apply_consumer(group_id, decide, None)

    async def _apply_share(
        self, group_id: str, decide: ShareDecide, ticket: int | None, error_result: ErrorResult | None = None
    ) -> None:
        now = self._now()
        before = self.share_groups.get(group_id)
        decision = decide(before, now)
        if decision.records:
            encoded = (share_group_records.encode(record) for record in decision.records)
            records = [SimpleRecord(value=value, key=key, timestamp=now.wall_ms) for key, value in encoded]
            appended = await self._context.write(records)
            if appended.error != ErrorCode.NONE:
                if ticket is not None and error_result is not None:
                    self._context.reply(ticket, error_result(appended.error))
                else:
                    log.warning(
                        "Could not store the state of share group %s: %s",
                        group_id,
                        ErrorCode(appended.error).name,
                    )
                return
            if not self._context.active:
                if ticket is not None:
                    self._context.reply(ticket, decision.reply)
                return
        if decision.group is None:
            self.share_groups.pop(group_id, None)
        else:
            self.share_groups[group_id] = decision.group
            self._schedule_share(group_id, decision.group)
        _log_share_transition(group_id, before, decision)
        if ticket is not None:
            self._context.reply(ticket, decision.reply)

    def _schedule_share(self, group_id: str, group: ShareGroup) -> None:
        deadline = group.next_deadline_ms()
        if deadline is not None:
            self._context.schedule(
                (_SHARE_GROUP_TIMER, group_id), deadline, lambda: self._advance_share(group_id)
            )

    async def _advance_share(self, group_id: str) -> None:
        if group_id not in self.share_groups:
            return

        def decide(group: ShareGroup | None, now: Now) -> share_group.Decision:
            if group is None:
                return share_group.Decision(None)
            return share_group.advance(group, self._topics(), now)

        await self._apply_share(group_id, decide, None)

    def _deliver(self, decision: classic.Decision) -> None:
        for reply in decision.replies:
            self._context.reply(reply.ticket, reply.value)

    async def _commit_txn_offsets(
        self, args: classic.CommitArgs, producer_id: int, producer_epoch: int
    ) -> dict[TopicPartition, int]:
        error = classic.validate_txn_commit(self.groups.get(args.group_id), args)
        if error is None:
            records = tuple(
                classic.offset_commit_record(args.group_id, tp, o) for tp, o in args.offsets.items()
            )
            producer = self._next_txn_batch(producer_id, producer_epoch)
            appended = await self._context.write(_records(records, self._now()), producer)
            if appended.error != ErrorCode.NONE:
                error = appended.error
            else:
                self._txn_sequences[producer_id] = (producer[1], producer[2] + len(records))
                pending = self.pending_txn_offsets.setdefault(producer_id, {})
                pending.setdefault(args.group_id, {}).update(args.offsets)
        return dict.fromkeys(args.offsets, error or ErrorCode.NONE)

    def _next_txn_batch(self, producer_id: int, producer_epoch: int) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) of the shard's next transactional batch for the producer:
        the shard is the partition's only writer, so it continues its own sequence (0 on a new epoch)."""
        epoch, sequence = self._txn_sequences.get(producer_id, (producer_epoch, 0))
        return producer_id, producer_epoch, sequence if epoch == producer_epoch else 0

    def _end_txn(self, producer_id: int, commit: bool) -> None:
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        now = self._now()
        for group_id, offsets in pending.items():
            self.groups[group_id] = classic.with_txn_offsets(
                self.groups.get(group_id), group_id, offsets, now
            )

    # -- timers -----------------------------------------------------------------------------------

    def _schedule(self, group_id: str, group: Group) -> None:
        deadline = group.next_deadline_ms()
        if deadline is not None:
            self._context.schedule((_GROUP_TIMER, group_id), deadline, lambda: self._advance(group_id))

    async def _advance(self, group_id: str) -> None:
        if group_id in self.groups:
            await self._apply(group_id, self._advance_decision)

    async def _expire_offsets(self) -> None:
        expired = 0
        for group_id in list(self.groups):
            before = self.groups[group_id]
            await self._apply(group_id, self._expire_decision)
            if not self._context.active:
                return
            after = self.groups.get(group_id)
            expired += len(before.offsets) - (len(after.offsets) if after is not None else 0)
        if expired:
            log.info("Removed %d expired offsets from __consumer_offsets-%d", expired, self.partition)

    def _advance_decision(self, group: Group | None, now: Now) -> classic.Decision:
        if group is None:
            return classic.Decision(None)
        return classic.advance(group, now, self._config)

    def _expire_decision(self, group: Group | None, now: Now) -> classic.Decision:
        if group is None:
            return classic.Decision(None)
        consumer = self.consumer_groups.get(group.group_id)
        keep = consumer.subscribed_topic_names() if consumer is not None else frozenset()
        return classic.expire_offsets(group, now, self._config, keep)

    def _now(self) -> Now:
        return Now(self._clock.time_ms(), self._clock.monotonic_ms())


def _records(records: tuple[classic.Record, ...], now: Now) -> list[SimpleRecord]:
    return [
        SimpleRecord(value=_encode_value(value), key=encode_key(key), timestamp=now.wall_ms)
        for key, value in records
    ]


def _consumer_records(records: tuple[consumer_group.CgRecord, ...], now: Now) -> list[SimpleRecord]:
    encoded = (consumer_records.encode(record) for record in records)
    return [SimpleRecord(value=value, key=key, timestamp=now.wall_ms) for key, value in encoded]


def _log_consumer_transition(
    group_id: str, before: ConsumerGroup | None, after: ConsumerGroup | None
) -> None:
    """One INFO line when a consumer group is created, moves to a new epoch, is emptied or deleted."""
    if after is None:
        if before is not None:
            log.info("Consumer group %s deleted (epoch %d)", group_id, before.group_epoch)
        return
    if before is None:
        log.info("Consumer group %s created", group_id)
    before_epoch = before.group_epoch if before is not None else 0
    if not after.members:
        if before is not None and before.members:
            log.info("Consumer group %s is now empty (epoch %d)", group_id, after.group_epoch)
    elif after.group_epoch != before_epoch:
        log.info(
            "Consumer group %s moved to epoch %d with %d members",
            group_id,
            after.group_epoch,
            len(after.members),
        )
    elif before is not None and log.isEnabledFor(logging.DEBUG) and before.state is not after.state:
        log.debug("Consumer group %s: %s -> %s", group_id, before.state.value, after.state.value)


def _log_share_transition(group_id: str, before: ShareGroup | None, decision: share_group.Decision) -> None:
    """One INFO line when a share group is created, moves to a new epoch, fences members or is deleted."""
    after = decision.group
    for member_id in decision.fenced:
        log.info("Share group %s: member %s fenced, its session expired", group_id, member_id)
    if after is None:
        if before is not None:
            log.info("Share group %s deleted (epoch %d)", group_id, before.group_epoch)
    elif before is None:
        log.info("Share group %s created", group_id)
    elif after.group_epoch != before.group_epoch:
        log.info(
            "Share group %s moved to epoch %d with %d members",
            group_id,
            after.group_epoch,
            len(after.members),
        )


def _log_transition(group_id: str, before: Group | None, after: Group | None) -> None:
    """One INFO line per change an operator follows; every other state change at DEBUG."""
    if after is None:
        if before is not None:
            log.info("Group %s deleted (generation %d)", group_id, before.generation_id)
        return
    if before is None:
        log.info("Group %s created", group_id)
    if after.state is GroupState.EMPTY:
        if before is not None and before.state is not GroupState.EMPTY:
            log.info("Group %s is now empty (generation %d)", group_id, after.generation_id)
    elif after.generation_id != (before.generation_id if before is not None else 0):
        log.info(
            "Group %s rebalanced: generation %d with %d members, protocol %s, leader %s",
            group_id,
            after.generation_id,
            len(after.members),
            after.protocol_name,
            after.leader_id,
        )
    elif before is not None and before.state is not after.state:
        log.debug("Group %s: %s -> %s", group_id, before.state.value, after.state.value)


def _encode_value(value: OffsetCommitValue | GroupMetadataValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return encode_offset_commit_value(value)
    return encode_group_metadata_value(value)
