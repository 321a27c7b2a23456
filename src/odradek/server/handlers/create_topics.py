"""CreateTopics handler.

API: v0-v7.

Behaviour, per topic of the request, each answered on its own:
- a name given twice in one request: INVALID_REQUEST for every copy;
- both explicit assignments and a partition count or replication factor other than -1:
  INVALID_REQUEST; -1 takes `num.partitions` / `default.replication.factor`;
- a config with a null value: INVALID_REQUEST; an unknown topic config or a bad value:
  INVALID_CONFIG(40) with the reason; the deprecated `message.format.version` is accepted and
  ignored (logged, not stored), as Kafka 3.x ignores it;
- then the admin manager's checks: INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
  INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, and POLICY_VIOLATION
  when the topic would put more than max.broker.partitions replicas on a broker (nothing is written).
`validate_only` (v1+) runs every check and creates nothing. v5+ results carry the partition count,
replication factor and every topic config with its source; v7+ the topic id.

Each accepted topic is written to the metadata store (durably, off the event loop); the controller
then brings its partitions online and their logs are created in the background. As Kafka's
DelayedCreatePartitions: with `timeout_ms` > 0 the response waits (without blocking the broker)
until this broker's metadata cache has a live leader for every new partition, or answers
REQUEST_TIMED_OUT for the topics still without them when `timeout_ms` passes (they are created
all the same); with `timeout_ms` <= 0 it answers at once.

Controller mutation quota (KIP-599, server/client_quotas.py): a topic that passed every check counts
its partitions against the group's controller_mutation_rate before it is written; while the
group's bucket is empty, v6+ answers the topic THROTTLING_QUOTA_EXCEEDED (nothing written) and
older versions create it; throttle_time_ms (v2+) says how long the group must wait, and the
connection is muted that long. validate_only is not counted.

Deliberate deviations: a new partition led by this broker counts as having its leader once it
serves here (its log is ready), so a produce right after the answer finds the partition.

Authorization (Kafka's): CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED for it.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.controller.store import StoredTopic
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorize, authorize_cluster
from odradek.server.client_quotas import ControllerMutationQuota
from odradek.server.config import (
    DEPRECATED_TOPIC_CONFIGS,
    ConfigError,
    KafkaConfig,
    without_deprecated,
)
from odradek.server.context import RequestContext

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 0
MAX_VERSION = 7
STRICT_QUOTA_VERSION = 6  # KIP-599: from v6 a throttled mutation is refused

Result = CreateTopicsResponse.CreatableTopicResult
CreatableTopic = CreateTopicsRequest.CreatableTopic


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    created: dict[str, StoredTopic] = {}
    may_create_any = authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False)
    quota = ctx.broker.quotas.controller_mutation_quota(
        ctx, ctx.api_version >= STRICT_QUOTA_VERSION, request.validate_only
    )
    for topic in request.topics:
        if counts[topic.name] > 1:
            message = f"Create topics request contains multiple entries for the topic {topic.name}"
            results.append(_error(topic.name, ErrorCode.INVALID_REQUEST, message))
            continue
        if not may_create_any and not authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            message = "Authorization failed."
            refused = _error(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, message)
            refused.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # v5+, as Kafka's
            results.append(refused)
            continue
        try:
            stored = await _create(ctx, topic, request.validate_only, quota)
        except KafkaError as exc:
            results.append(_error(topic.name, exc.code, exc.message))
            continue
        created[topic.name] = stored
        results.append(_success(ctx.broker.config, stored))
    if created and not request.validate_only and request.timeout_ms > 0:
        await _wait_for_leaders(ctx, created, request.timeout_ms, results)
    return CreateTopicsResponse(throttle_time_ms=quota.throttle_time_ms, topics=results)


def _error(name: str, code: int, message: str | None) -> Result:
    """A failed topic's result: v5+ carries an empty config list, as Kafka's (never null)."""
    return Result(name=name, error_code=code, error_message=message, configs=[])


async def _wait_for_leaders(
    ctx: RequestContext, created: dict[str, StoredTopic], timeout_ms: int, results: list[Result]
) -> None:
    """Wait for every created topic's leaders within one deadline; REQUEST_TIMED_OUT for the late."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    late = set()
    for name, stored in created.items():
        remaining = max(0.0, deadline - loop.time())
        if not await ctx.broker.wait_for_leaders(name, stored.assignment, remaining):
            late.add(name)
    for result in results:
        if result.name in late and result.error_code == ErrorCode.NONE:
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
            result.error_message = f"Timed out waiting for the leaders of {result.name}'s partitions."


async def _create(
    ctx: RequestContext,
    topic: CreatableTopic,
    validate_only: bool,
    quota: ControllerMutationQuota,
) -> StoredTopic:
    """Create (or only check) a topic; with a controller mutation quota, its partitions are counted
    once it passed every check."""
    if quota.limited and not validate_only:
        quota.record(len((await _create_topic(ctx, topic, validate_only=True)).assignment))
    return await _create_topic(ctx, topic, validate_only)


async def _create_topic(ctx: RequestContext, topic: CreatableTopic, validate_only: bool) -> StoredTopic:
    config = ctx.broker.config
    configs = _checked_configs(config, topic)
    admin = ctx.broker.admin
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        return await admin.create_topic(topic.name, -1, -1, configs, assignments, validate_only)
    partitions = config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    replication = (
        config["default.replication.factor"] if topic.replication_factor == -1 else topic.replication_factor
    )
    return await admin.create_topic(topic.name, partitions, replication, configs, None, validate_only)


def _checked_configs(config: KafkaConfig, topic: CreateTopicsRequest.CreatableTopic) -> dict[str, str]:
    configs: dict[str, str] = {}
    for entry in topic.configs:
        if entry.value is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs: {entry.name}"
            )
        configs[entry.name] = entry.value
    configs = without_deprecated(configs, DEPRECATED_TOPIC_CONFIGS, f"topic {topic.name}")
    try:
        config.log_config(configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return configs


def _success(config: KafkaConfig, topic: StoredTopic) -> Result:
    first = topic.assignment[min(topic.assignment)]
    return Result(
        name=topic.name,
        topic_id=topic.topic_id,
        num_partitions=len(topic.assignment),
        replication_factor=len(first),
        configs=[
            CreateTopicsResponse.CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=entry.source.value,
                is_sensitive=entry.sensitive,
            )
            for entry in config.describe_topic(topic.configs)
        ],
    )


def error_response(request: CreateTopicsRequest, version: int, code: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[Result(name=t.name, error_code=code) for t in request.topics])
