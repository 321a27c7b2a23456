"""CreatePartitions handler.

API: v0-v3.

Behaviour: grows each topic to `count` partitions. A topic named twice: INVALID_REQUEST for each
copy; unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one:
INVALID_PARTITIONS with Kafka's message; explicit assignments (one replica list per new partition)
are checked like CreateTopics assignments (INVALID_REPLICA_ASSIGNMENT). `validate_only` checks and
changes nothing. New partitions are led by this broker before the response leaves.

Deliberate deviations: synchronous, `timeout_ms` is never waited on.
"""

from __future__ import annotations

from collections import Counter

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from odradek.server.context import RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        result = Result(name=topic.name)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = "Duplicate topic in request."
        else:
            _grow(ctx, topic, request.validate_only, result)
        results.append(result)
    return CreatePartitionsResponse(results=results)


def _grow(
    ctx: RequestContext,
    topic: CreatePartitionsRequest.CreatePartitionsTopic,
    validate_only: bool,
    result: Result,
) -> None:
    assignments = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
    try:
        ctx.broker.metadata.create_partitions(topic.name, topic.count, assignments, validate_only)
    except KafkaError as exc:
        result.error_code, result.error_message = exc.code, exc.message


def error_response(request: CreatePartitionsRequest, version: int, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(results=[Result(name=t.name, error_code=code) for t in request.topics])
