"""The consumer-group operations of `odradek consumer-groups` (and its older form `odradek groups`)
and the web console: a blocking group admin client.

Owns `GroupAdmin`: over a connected `KafkaClient`, the group APIs as plain requests to the group's
coordinator (FindCoordinator, ListGroups on every broker, ConsumerGroupDescribe and DescribeGroups,
OffsetFetch, OffsetCommit, DeleteGroups, OffsetDelete) and log offsets (ListOffsets) for lag and
resets. Coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
are retried until the admin's timeout.

`describe` gives a group's state, coordinator, members with their assignments and one row per
partition the group has committed or is assigned. It asks ConsumerGroupDescribe first where the
coordinator serves it, as Kafka 4's admin does: a group of the consumer protocol (KIP-848) comes with
its group and target-assignment epochs and each member's epoch and target assignment;
GROUP_ID_NOT_FOUND there (a classic group, or none) falls back to DescribeGroups, whose assignments
are decoded from the classic consumer protocol. `plan_reset` computes new offsets as Kafka's reset
does (a target outside the log is clamped to it, with Kafka's notice line); `commit` writes them.
Printing is the callers' business.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.client import KafkaClient, TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assignment_partitions
from odradek.protocol.errors import ErrorCode, KafkaError, check
from odradek.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)

EARLIEST, LATEST = -2, -1


class GroupAdminError(Exception):
    """A group operation that cannot go on, said in one line (the tools print it and exit 1)."""


_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
_BACKOFF_S = 0.1
PROGRESS_CHUNK = 100  # partitions per ListOffsets round of a reset, one progress call each
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    group_type: str = "classic"  # ListGroups v5's: classic, consumer (KIP-848), share (KIP-932)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: tuple[TopicPartition, ...]
    member_epoch: int | None = None  # a consumer-protocol group's (KIP-848) member; None: classic
    target: tuple[TopicPartition, ...] = ()  # the partitions it reconciles towards (consumer protocol)


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One line of the offsets table: a partition (None: a member without partitions) and its owner."""

    tp: TopicPartition | None
    committed: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.committed, 0)


@dataclass(frozen=True, slots=True)
class GroupReport:
    group: str
    state: str
    protocol: str
    coordinator: str  # Kafka's `host:port  (id)`
    members: tuple[Member, ...]
    rows: tuple[PartitionRow, ...]
    committed: dict[TopicPartition, int]
    group_epoch: int | None = None  # consumer-protocol groups only, as the two below
    assignment_epoch: int | None = None

    @property
    def consumer_protocol(self) -> bool:
        """Whether the group speaks the consumer group protocol of KIP-848 (Kafka's type Consumer)."""
        return self.group_epoch is not None


@dataclass(frozen=True, slots=True)
class _Described:
    """A group as its coordinator described it, through either API."""

    state: str
    protocol: str  # the assignment strategy (classic) or the server-side assignor (consumer)
    members: tuple[Member, ...]
    group_epoch: int | None = None
    assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """How --reset-offsets picks new offsets: kind is earliest, latest, current, offset, shift or time."""

    kind: str
    value: int = 0


class _CoordinatorMoved(Exception):
    pass


class GroupAdmin:
    """The group operations against one cluster, through a client that reached it."""

    def __init__(self, client: KafkaClient, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s

    def _with_coordinator(self, group: str, call: Callable[[BrokerConnection, Any], T]) -> T:
        """`call(connection, found)` against the group's coordinator, found again while it moves."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            found = self._client.any_connection().request(
                ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0)
            )
            try:
                _raise_if_moved(found.error_code)
                check(found.error_code, f"finding the coordinator of '{group}' failed")
                return call(self._client.connect_to(found.host, found.port), found)
            except _CoordinatorMoved:
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise KafkaError(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator for '{group}'"
                    ) from None
                time.sleep(_BACKOFF_S)

    # -- list ---------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        groups: dict[str, GroupListing] = {}
        for broker in self._client.metadata([]).brokers.values():
            response = self._client.connect_to(broker.host, broker.port).request(
                ApiKey.LIST_GROUPS, ListGroupsRequest()
            )
            check(response.error_code, f"listing the groups of broker {broker.node_id} failed")
            groups.update(
                (g.group_id, GroupListing(g.group_id, g.group_state, g.group_type or "classic"))
                for g in response.groups
            )
        return sorted(groups.values(), key=lambda g: g.group_id)

    # -- describe -----------------------------------------------------------------------------

    def describe(self, group: str) -> GroupReport:
        def describe_at(
            connection: BrokerConnection, found: Any
        ) -> tuple[_Described, str, dict[TopicPartition, int]]:
            described = _consumer_group(connection, group) or _classic_group(connection, group)
            return (
                described,
                f"{found.host}:{found.port}  ({found.node_id})",
                self._committed(connection, group),
            )

        described, coordinator, committed = self._with_coordinator(group, describe_at)
        members = described.members
        owners = {tp: m for m in members for tp in m.partitions}
        partitions = sorted(set(committed) | set(owners))
        log_end = self._log_end_offsets(partitions)
        rows = [
            PartitionRow(tp, committed.get(tp), log_end.get(tp), *_owner_cells(owners.get(tp)))
            for tp in partitions
        ]
        rows += [PartitionRow(None, None, None, *_owner_cells(m)) for m in members if not m.partitions]
        return GroupReport(
            group,
            described.state,
            described.protocol,
            coordinator,
            members,
            tuple(rows),
            committed,
            described.group_epoch,
            described.assignment_epoch,
        )

    def _committed(self, connection: BrokerConnection, group: str) -> dict[TopicPartition, int]:
        response = connection.request(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None))
        _raise_if_moved(response.error_code)
        check(response.error_code, f"fetching the offsets of '{group}' failed")
        return {
            TopicPartition(t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    def _log_end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        existing = [tp for tp in partitions if tp.partition < self._client.partition_count(tp.topic)]
        if not existing:
            return {}
        return self._client.list_offsets({tp: LATEST for tp in existing})

    # -- delete -------------------------------------------------------------------------------

    def delete(self, group: str) -> int:
        """The error code of deleting `group` (NONE when it is gone)."""

        def delete_at(connection: BrokerConnection, _found: Any) -> int:
            result = connection.request(
                ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group])
            ).results[0]
            _raise_if_moved(result.error_code)
            return int(result.error_code)

        return self._with_coordinator(group, delete_at)

    def delete_offsets(
        self, group: str, tps: Sequence[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """(top-level error code, error code per partition) of deleting the group's offsets of `tps`."""
        request = OffsetDeleteRequest(
            group_id=group,
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(p) for p in partitions],
                )
                for topic, partitions in _by_topic(tps).items()
            ],
        )

        def delete_at(connection: BrokerConnection, _found: Any) -> tuple[int, dict[TopicPartition, int]]:
            response = connection.request(ApiKey.OFFSET_DELETE, request)
            _raise_if_moved(response.error_code)
            errors = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            return response.error_code, errors

        return self._with_coordinator(group, delete_at)

    # -- reset --------------------------------------------------------------------------------

    def partitions(self, topic: str, partitions: Sequence[int] | None) -> list[TopicPartition]:
        """The named partitions of `topic` (all of them for None); UNKNOWN_TOPIC_OR_PARTITION if none."""
        count = self._client.partition_count(topic)
        if count == 0:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist")
        return [TopicPartition(topic, p) for p in (partitions if partitions is not None else range(count))]

    def plan_reset(
        self,
        tps: Sequence[TopicPartition],
        target: ResetTarget,
        committed: dict[TopicPartition, int],
        progress: Callable[[int], None],
    ) -> dict[TopicPartition, int]:
        """New offsets of `tps` for `target`, in rounds of PROGRESS_CHUNK partitions, calling
        `progress(n)` after each."""
        planned: dict[TopicPartition, int] = {}
        for start in range(0, len(tps), PROGRESS_CHUNK):
            chunk = tps[start : start + PROGRESS_CHUNK]
            planned.update(self._plan_chunk(chunk, target, committed))
            progress(len(chunk))
        return planned

    def _plan_chunk(
        self, tps: Sequence[TopicPartition], target: ResetTarget, committed: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        earliest = self._client.list_offsets({tp: EARLIEST for tp in tps})
        latest = self._client.list_offsets({tp: LATEST for tp in tps})
        if target.kind in ("earliest", "latest"):
            return dict(earliest if target.kind == "earliest" else latest)
        if target.kind == "time":
            found = self._client.list_offsets({tp: target.value for tp in tps})
            return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in tps}
        if target.kind == "current":
            return {tp: committed.get(tp, latest[tp]) for tp in tps}
        return {tp: _clamped(tp, _requested(tp, target, committed), earliest[tp], latest[tp]) for tp in tps}

    def commit(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The error code per partition of committing `offsets` for `group` as an admin (generation -1)."""
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=offsets[TopicPartition(topic, p)]
                        )
                        for p in partitions
                    ],
                )
                for topic, partitions in _by_topic(offsets).items()
            ],
        )

        def commit_at(connection: BrokerConnection, _found: Any) -> dict[TopicPartition, int]:
            response = connection.request(ApiKey.OFFSET_COMMIT, request)
            errors = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            for code in errors.values():
                _raise_if_moved(code)
            return errors

        return self._with_coordinator(group, commit_at)


def _requested(tp: TopicPartition, target: ResetTarget, committed: dict[TopicPartition, int]) -> int:
    if target.kind == "offset":
        return target.value
    if tp not in committed:
        raise GroupAdminError(
            f"Error: Expected a valid current offset for topic partition: {tp.topic}-{tp.partition}"
        )
    return committed[tp] + target.value


def _clamped(tp: TopicPartition, offset: int, earliest: int, latest: int) -> int:
    """`offset` within [earliest, latest], with Kafka's notice when it is moved."""
    name = f"{tp.topic}-{tp.partition}"
    if offset < earliest:
        print(f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
              f"Value will be set to {earliest}")  # fmt: skip
        return earliest
    if offset > latest:
        print(f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
              f"Value will be set to {latest}")  # fmt: skip
        return latest
    return offset


def _consumer_group(connection: BrokerConnection, group: str) -> _Described | None:
    """The group by ConsumerGroupDescribe; None when the coordinator does not serve the API or the group
    is not of the consumer protocol (GROUP_ID_NOT_FOUND: a classic group, or no group)."""
    if ApiKey.CONSUMER_GROUP_DESCRIBE not in connection.versions:
        return None
    described = connection.request(
        ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group])
    ).groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    _raise_if_moved(described.error_code)
    check(described.error_code, f"describing '{group}' failed")
    members = tuple(
        Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            _described_partitions(m.assignment),
            m.member_epoch,
            _described_partitions(m.target_assignment),
        )
        for m in described.members
    )
    state = described.group_state[:1].upper() + described.group_state[1:]  # Kafka's admin prints Stable
    return _Described(
        state, described.assignor_name, members, described.group_epoch, described.assignment_epoch
    )


def _described_partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    return tuple(
        sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
    )


def _classic_group(connection: BrokerConnection, group: str) -> _Described:
    described = connection.request(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group])).groups[0]
    _raise_if_moved(described.error_code)
    check(described.error_code, f"describing '{group}' failed")
    return _Described(described.group_state, described.protocol_data, _members(described))


def _members(described: Any) -> tuple[Member, ...]:
    """The group's members, with their partitions decoded when the group speaks the consumer protocol."""
    consumer = described.protocol_type == CONSUMER_PROTOCOL_TYPE
    return tuple(
        Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            _assigned(m.member_assignment) if consumer else (),
        )
        for m in described.members
    )


def _assigned(assignment: bytes) -> tuple[TopicPartition, ...]:
    by_topic = assignment_partitions(assignment) or {}
    return tuple(TopicPartition(topic, p) for topic, parts in sorted(by_topic.items()) for p in sorted(parts))


def _owner_cells(member: Member | None) -> tuple[str, str, str]:
    return ("-", "-", "-") if member is None else (member.member_id, member.host, member.client_id)


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(tps):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _raise_if_moved(code: int) -> None:
    if code in _COORDINATOR_ERRORS:
        raise _CoordinatorMoved
