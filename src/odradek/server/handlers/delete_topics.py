"""DeleteTopics handler.

API: v0-v6.

Behaviour: deletes topics by name (v0-v5 `topic_names`, v6 `topics[].name`) or by topic id (v6
`topics[].topic_id` with a null name). Per topic: UNKNOWN_TOPIC_OR_PARTITION for an unknown name,
UNKNOWN_TOPIC_ID for an unknown id, INVALID_REQUEST when v6 gives both a name and an id; with
`delete.topic.enable=false` every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3,
which has no such code). An accepted deletion is written to the metadata store; the controller then
stops the topic's replicas (StopReplica with delete: their logs are deleted in the background) and
tells the brokers to forget it. As Kafka's DelayedDeleteTopics: with `timeout_ms` > 0 the response
waits until this broker's metadata cache no longer has the topic, REQUEST_TIMED_OUT past it; with
`timeout_ms` <= 0 it answers at once.

Authorization (Kafka's): DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED for it (checked
before whether it exists, when named).

Controller mutation quota (KIP-599): a found topic's partitions count against the group's
controller_mutation_rate before it is marked; while the bucket is empty v5+ answers the topic
THROTTLING_QUOTA_EXCEEDED (not deleted), older versions delete it; throttle_time_ms says how long the
group must wait.
"""

from __future__ import annotations

import asyncio

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from odradek.protocol.primitives import ZERO_UUID
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize
from odradek.server.client_quotas import ControllerMutationQuota
from odradek.server.context import RequestContext

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 0
MAX_VERSION = 6
STRICT_QUOTA_VERSION = 5  # KIP-599: from v5 a throttled mutation is refused

Result = DeleteTopicsResponse.DeletableTopicResult


def _requested(request: DeleteTopicsRequest, version: int) -> list[DeleteTopicsRequest.DeleteTopicState]:
    if version >= 6:
        return list(request.topics)
    return [DeleteTopicsRequest.DeleteTopicState(name=name) for name in request.topic_names]


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    quota = ctx.broker.quotas.controller_mutation_quota(ctx, ctx.api_version >= STRICT_QUOTA_VERSION)
    results = [await _delete(ctx, t, quota) for t in _requested(request, ctx.api_version)]
    if request.timeout_ms > 0:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.timeout_ms / 1000
        for result in results:
            if result.error_code == ErrorCode.NONE and result.name is not None:
                remaining = max(0.0, deadline - loop.time())
                if not await ctx.broker.wait_for_deletion(result.name, remaining):
                    _failed(result, ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for the deletion.")
    return DeleteTopicsResponse(throttle_time_ms=quota.throttle_time_ms, responses=results)


async def _delete(
    ctx: RequestContext, wanted: DeleteTopicsRequest.DeleteTopicState, quota: ControllerMutationQuota
) -> Result:
    result = Result(name=wanted.name, topic_id=wanted.topic_id)
    metadata = ctx.broker.metadata_cache
    if not ctx.broker.config["delete.topic.enable"]:
        disabled = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
        return _failed(result, disabled, "Topic deletion is disabled.")
    if wanted.name is not None and wanted.topic_id != ZERO_UUID:
        return _failed(result, ErrorCode.INVALID_REQUEST, "Give either a topic name or a topic id, not both.")
    topic = metadata.topic(wanted.name) if wanted.name is not None else metadata.topic_by_id(wanted.topic_id)
    if topic is None and wanted.name is not None and not _may_delete(ctx, wanted.name):
        return _failed(result, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    if topic is None:
        if wanted.name is None:
            return _failed(result, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        return _failed(result, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)  # Kafka gives no message
    if not _may_delete(ctx, topic.name):
        return _failed(result, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    try:
        quota.record(len(topic.partitions))
        await ctx.broker.admin.delete_topic(topic.name)
    except KafkaError as exc:
        return _failed(result, exc.code, exc.message)
    result.name, result.topic_id = topic.name, topic.topic_id
    return result


def _may_delete(ctx: RequestContext, name: str) -> bool:
    return authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)


def _failed(result: Result, code: ErrorCode, message: str | None) -> Result:
    result.error_code, result.error_message = code, message
    return result


def error_response(request: DeleteTopicsRequest, version: int, code: int) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(
        responses=[
            Result(name=t.name, topic_id=t.topic_id, error_code=code) for t in _requested(request, version)
        ]
    )
