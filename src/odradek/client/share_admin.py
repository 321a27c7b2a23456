"""The share-group operations of `odradek share-groups` (KIP-932): a blocking admin client.

Owns `ShareAdmin`: over a connected `KafkaClient`, the share group APIs as plain requests to the
group's coordinator (found and retried as `GroupAdmin` does, which it extends): ShareGroupDescribe
(v1), DescribeShareGroupOffsets (v1, start offsets and lag), AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups; ListGroups filtered to the share type. Printing is the
callers' business.
Callers: cli/share_groups.py, tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client import TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.client.group_admin import GroupAdmin, GroupListing, _raise_if_moved
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from odradek.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from odradek.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from odradek.protocol.messages.share_group_describe import ShareGroupDescribeRequest


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupReport:
    group_id: str
    state: str
    coordinator: str  # "host:port  (id)"
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]
    topic_ids: dict[str, uuid.UUID]


@dataclass(frozen=True, slots=True)
class StartOffset:
    tp: TopicPartition
    start_offset: int  # -1: no state
    leader_epoch: int
    lag: int


class ShareAdmin(GroupAdmin):
    """Share group operations against one cluster."""

    def list_share_groups(self) -> list[GroupListing]:
        return [g for g in self.list_groups() if g.group_type == "share"]

    def describe_share(self, group: str) -> ShareGroupReport:
        """The group's description; KafkaError GROUP_ID_NOT_FOUND (with Kafka's message) when it is
        not a share group."""

        def describe_at(connection: BrokerConnection, found: Any) -> ShareGroupReport:
            response = connection.request(
                ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group])
            )
            described = response.groups[0]
            _raise_if_moved(described.error_code)
            if described.error_code != ErrorCode.NONE:
                raise KafkaError(described.error_code, described.error_message or "")
            topic_ids: dict[str, uuid.UUID] = {}
            members = []
            for m in described.members:
                partitions: list[TopicPartition] = []
                for t in m.assignment.topic_partitions:
                    topic_ids[t.topic_name] = t.topic_id
                    partitions.extend(TopicPartition(t.topic_name, p) for p in t.partitions)
                members.append(
                    ShareMember(
                        m.member_id, m.client_id, m.client_host, m.member_epoch, tuple(sorted(partitions))
                    )
                )
            return ShareGroupReport(
                group,
                described.group_state,
                f"{found.host}:{found.port}  ({found.node_id})",
                described.group_epoch,
                described.assignment_epoch,
                tuple(members),
                topic_ids,
            )

        return self._with_coordinator(group, describe_at)

    def log_offsets(self, tps: Sequence[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """ListOffsets of `tps` for one spec: EARLIEST (-2), LATEST (-1) or a timestamp."""
        return dict(self._client.list_offsets({tp: spec for tp in tps}))

    def start_offsets(self, group: str, topics: Sequence[str] | None = None) -> list[StartOffset]:
        """The start offset and lag of each share-partition of the group (all topics with state for
        None)."""
        requested = None
        if topics is not None:
            requested = [
                DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(
                    t, list(range(self._client.partition_count(t)))
                )
                for t in topics
            ]
        request = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group, requested)]
        )

        def describe_at(connection: BrokerConnection, _found: Any) -> list[StartOffset]:
            answered = connection.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request).groups[0]
            _raise_if_moved(answered.error_code)
            if answered.error_code != ErrorCode.NONE:
                raise KafkaError(answered.error_code, answered.error_message or "")
            return sorted(
                (
                    StartOffset(
                        TopicPartition(t.topic_name, p.partition_index), p.start_offset, p.leader_epoch, p.lag
                    )
                    for t in answered.topics
                    for p in t.partitions
                    if p.error_code == ErrorCode.NONE
                ),
                key=lambda s: (s.tp.topic, s.tp.partition),
            )

        return self._with_coordinator(group, describe_at)

    def alter_start_offsets(
        self, group: str, offsets: dict[TopicPartition, int]
    ) -> tuple[int, str | None, dict[TopicPartition, int]]:
        """(group error, its message, error per partition) of setting the start offsets."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(offsets):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=[
                AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
                    topic,
                    [
                        AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(
                            p, offsets[TopicPartition(topic, p)]
                        )
                        for p in partitions
                    ],
                )
                for topic, partitions in by_topic.items()
            ],
        )

        def alter_at(
            connection: BrokerConnection, _found: Any
        ) -> tuple[int, str | None, dict[TopicPartition, int]]:
            response = connection.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request)
            _raise_if_moved(response.error_code)
            errors = {
                TopicPartition(t.topic_name, p.partition_index): p.error_code
                for t in response.responses
                for p in t.partitions
            }
            return response.error_code, response.error_message, errors

        return self._with_coordinator(group, alter_at)

    def delete_start_offsets(
        self, group: str, topics: Sequence[str]
    ) -> tuple[int, str | None, dict[str, int]]:
        """(group error, its message, error per topic) of deleting the group's state of `topics`."""
        request = DeleteShareGroupOffsetsRequest(
            group_id=group,
            topics=[DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(t) for t in topics],
        )

        def delete_at(connection: BrokerConnection, _found: Any) -> tuple[int, str | None, dict[str, int]]:
            response = connection.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request)
            _raise_if_moved(response.error_code)
            return (
                response.error_code,
                response.error_message,
                {t.topic_name: t.error_code for t in response.responses},
            )

        return self._with_coordinator(group, delete_at)
