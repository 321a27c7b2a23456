"""CreatePartitions handler.

API: v0-v3.

Behaviour: grows each topic to `count` partitions. A topic named twice: INVALID_REQUEST for each
copy; unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one:
INVALID_PARTITIONS with Kafka's message; explicit assignments (one replica list per new partition)
are checked like CreateTopics assignments (INVALID_REPLICA_ASSIGNMENT); more replicas on a broker than
max.broker.partitions: POLICY_VIOLATION. `validate_only` checks and changes nothing. Accepted growth
is written to the metadata store; the controller brings the new partitions online and their logs are
created in the background. With `timeout_ms` > 0 the response waits (as CreateTopics does) for their
leaders, REQUEST_TIMED_OUT past it; with `timeout_ms` <= 0 it answers at once.
Controller mutation quota (KIP-599): the new partitions of a growth that passed every check count
against the group's controller_mutation_rate; while its bucket is empty v3+ answers the topic
THROTTLING_QUOTA_EXCEEDED (nothing written), older versions grow it; throttle_time_ms says how long
the group must wait. validate_only is not counted.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from odradek.server.client_quotas import ControllerMutationQuota
from odradek.server.context import RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3
STRICT_QUOTA_VERSION = 3  # KIP-599: from v3 a throttled mutation is refused

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    grown: dict[str, list[int]] = {}
    quota = ctx.broker.quotas.controller_mutation_quota(
        ctx, ctx.api_version >= STRICT_QUOTA_VERSION, request.validate_only
    )
    for topic in request.topics:
        result = Result(name=topic.name)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = "Duplicate topic in request."
        else:
            added = await _grow(ctx, topic, request.validate_only, result, quota)
            if added:
                grown[topic.name] = added
        results.append(result)
    if grown and not request.validate_only and request.timeout_ms > 0:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.timeout_ms / 1000
        for result in results:
            new_partitions = grown.get(result.name, [])
            remaining = max(0.0, deadline - loop.time())
            if new_partitions and not await ctx.broker.wait_for_leaders(
                result.name, new_partitions, remaining
            ):
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = "Timed out waiting for the leaders of the new partitions."
    return CreatePartitionsResponse(throttle_time_ms=quota.throttle_time_ms, results=results)


async def _grow(
    ctx: RequestContext,
    topic: CreatePartitionsRequest.CreatePartitionsTopic,
    validate_only: bool,
    result: Result,
    quota: ControllerMutationQuota,
) -> list[int]:
    """The new partitions' indexes (none when refused); with a controller mutation quota, they are
    counted once the growth passed every check."""
    assignments = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
    admin = ctx.broker.admin
    try:
        if quota.limited and not validate_only:
            quota.record(len(await admin.create_partitions(topic.name, topic.count, assignments, True)))
        added = await admin.create_partitions(topic.name, topic.count, assignments, validate_only)
    except KafkaError as exc:
        result.error_code, result.error_message = exc.code, exc.message
        return []
    return sorted(added)


def error_response(request: CreatePartitionsRequest, version: int, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(results=[Result(name=t.name, error_code=code) for t in request.topics])
