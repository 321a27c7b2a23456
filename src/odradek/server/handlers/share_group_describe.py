"""ShareGroupDescribe handler (KIP-932 share groups).

API: v1 (v0 was the early-access version Kafka 4.1 dropped).

Behaviour: per requested group, from its coordinator: state (Empty, Stable), group epoch,
assignment epoch, assignor (`simple`) and each member with its member epoch, rack id, client id and
host, subscribed topic names and assignment (topic ids with their names; a topic the metadata no
longer has is left out). An unknown group answers GROUP_ID_NOT_FOUND "Group X not found.", a
classic or consumer group "Group X is not a share group."; a group whose coordinator is elsewhere
or loading carries that error. `include_authorized_operations`: the group operations the principal
may perform.

Authorization (Kafka's): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it; a group
whose members' assignments name a topic the principal may not DESCRIBE answers
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid

from odradek.coordinator.share_group import GroupDescription, TopicPartitions
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorized_names, authorized_operations
from odradek.server.context import RequestContext

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
MIN_VERSION = 1
MAX_VERSION = 1

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

Response = ShareGroupDescribeResponse
Described = ShareGroupDescribeResponse.DescribedGroup


async def handle(ctx: RequestContext, request: ShareGroupDescribeRequest) -> Response:
    coordinator = ctx.broker.group_coordinator
    described: list[Described] = []
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        description = await coordinator.share_group_describe(group_id)
        described.append(_described(ctx, description, request.include_authorized_operations))
    return Response(groups=described)


def _described(ctx: RequestContext, group: GroupDescription, include_operations: bool) -> Described:
    if group.error_code != ErrorCode.NONE:
        return Described(
            error_code=group.error_code, error_message=group.error_message, group_id=group.group_id
        )
    names = _topic_names(ctx, group)
    allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names.values())
    if len(allowed) < len(set(names.values())):
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
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=_assignment(m.assigned, names),
            )
            for m in group.members
        ],
        authorized_operations=operations,
    )


def _topic_names(ctx: RequestContext, group: GroupDescription) -> dict[uuid.UUID, str]:
    names: dict[uuid.UUID, str] = {}
    for topic_id in {t for m in group.members for t in m.assigned}:
        topic = ctx.broker.metadata_cache.topic_by_id(topic_id)
        if topic is not None:
            names[topic_id] = topic.name
    return names


def _assignment(partitions: TopicPartitions, names: dict[uuid.UUID, str]) -> Response.Assignment:
    return Response.Assignment(
        topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, topic_name=names[topic_id], partitions=sorted(p))
            for topic_id, p in sorted(partitions.items())
            if topic_id in names and p
        ]
    )


def error_response(request: ShareGroupDescribeRequest, version: int, code: int) -> Response:
    return Response(groups=[Described(error_code=code, group_id=g) for g in request.group_ids])
