"""ConsumerGroupDescribe handler (KIP-848 consumer groups).

API: v0-v1 (v1: the member type, KIP-1099).

Behaviour: per requested group, from its coordinator: state (Empty, Assigning, Reconciling, Stable),
group epoch, assignment epoch, the assignor the group uses, and each member with its member epoch,
instance and rack ids, client id and host, subscribed topic names and regex, current assignment and
target assignment (topic ids with their names; a topic the metadata no longer has is left out, as
Kafka does) and, v1, its member type (1: a consumer-protocol member). An unknown group, or a
classic one, answers GROUP_ID_NOT_FOUND (Kafka's admin client then falls back to DescribeGroups);
a group whose coordinator is elsewhere or loading carries that error. `include_authorized_operations`:
the group operations the principal may perform.

Authorization (Kafka's): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it; a group whose
members' assignments name a topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from odradek.coordinator.consumer_group import GroupDescription, TopicPartitions
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_names, authorized_operations
from odradek.server.context import RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
MIN_VERSION = 0
MAX_VERSION = 1

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
CONSUMER_MEMBER_TYPE = 1  # v1 MemberType: -1 unknown, 0 classic member, 1 consumer member
CLASSIC_MEMBER_TYPE = 0  # a classic member of a consumer group (online migration)

Response = ConsumerGroupDescribeResponse
Described = ConsumerGroupDescribeResponse.DescribedGroup


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> Response:
    coordinator = ctx.broker.group_coordinator
    described: list[Described] = []
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        description = await coordinator.consumer_group_describe(group_id)
        described.append(_described(ctx, description, request.include_authorized_operations))
    return Response(groups=described)


def _described(ctx: RequestContext, group: GroupDescription, include_operations: bool) -> Described:
    if group.error_code != ErrorCode.NONE:
        return Described(
            error_code=group.error_code, error_message=group.error_message, group_id=group.group_id
        )
    names = _topic_names(ctx, group)
    if len(authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names.values())) < len(
        set(names.values())
    ):
        return Described(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message="The described group uses topics that the client is not authorized to describe.",
            group_id=group.group_id,
        )
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if include_operations:
        operations = authorized_operations(ctx, ResourceType.GROUP, group.group_id)
    return Described(
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=[
            Response.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(m.assignment, names),
                target_assignment=_assignment(m.target_assignment, names),
                member_type=CLASSIC_MEMBER_TYPE if m.classic else CONSUMER_MEMBER_TYPE,
            )
            for m in group.members
        ],
        authorized_operations=operations,
    )


def _topic_names(ctx: RequestContext, group: GroupDescription) -> dict[uuid.UUID, str]:
    """The names of the topics in the members' assignments, as the metadata knows them now."""
    ids = {t for m in group.members for held in (m.assignment, m.target_assignment) for t in held}
    names: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        topic = ctx.broker.metadata_cache.topic_by_id(topic_id)
        if topic is not None:
            names[topic_id] = topic.name
    return names


def _assignment(partitions: TopicPartitions, names: Mapping[uuid.UUID, str]) -> Response.Assignment:
    return Response.Assignment(
        topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, topic_name=names[topic_id], partitions=sorted(p))
            for topic_id, p in sorted(partitions.items())
            if topic_id in names
        ]
    )


def error_response(request: ConsumerGroupDescribeRequest, version: int, code: int) -> Response:
    return Response(groups=[Described(error_code=code, group_id=g) for g in request.group_ids])
