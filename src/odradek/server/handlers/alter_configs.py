"""AlterConfigs handler.

API: v0-v2.

Behaviour: the given configs replace the resource's whole set (Kafka's non-incremental semantics: a
config left out returns to its default). A null value is INVALID_REQUEST; `validate_only` checks
and changes nothing.
- TOPIC resources (type 2): every value is validated first; an unknown name or a bad value is
  INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. The deprecated
  `message.format.version` is accepted and ignored (logged, not stored). The new set is written to
  the metadata store; the store's config change notification brings it to this broker's metadata
  cache and the topic's logs before the response leaves.
- BROKER resources (type 4): the empty name sets the cluster-wide dynamic defaults
  (`/config/brokers/<default>`), this broker's id its per-broker dynamic configs
  (`/config/brokers/<id>`); another id is INVALID_REQUEST ("Unexpected broker id", as Kafka). A
  config Kafka knows that is not dynamic here (see `DYNAMIC_KEYS` in server/config.py) is
  INVALID_REQUEST "Cannot update these configs dynamically: ..."; an unknown name, or a value the
  broker's config validation refuses (the resulting config is built with both dynamic levels), is
  INVALID_CONFIG with the reason, and nothing is stored. `log.message.format.version` is accepted
  and ignored. The set is written to the store, whose notification makes every broker concerned
  apply it live (server/kafka_server.py) before the response leaves this one.

Deliberate deviations: Kafka answers a bad broker config value INVALID_REQUEST ("Invalid config
value for resource ..."), odradek INVALID_CONFIG as for topics; Kafka stores unknown broker config
names (custom configs), odradek refuses them; only the keys odradek applies live are dynamic, so
some that Kafka marks per-broker or cluster-wide (thread pool sizes, SSL, quotas, ...) are refused.
Other resource types answer INVALID_REQUEST.

Authorization (Kafka's): ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a
broker, on the cluster (else CLUSTER_AUTHORIZATION_FAILED), per resource.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.controller.metadata import TopicMetadata, validate_topic_name
from odradek.controller.store import DEFAULT_BROKER_ENTITY
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from odradek.security.authorizer import AclOperation
from odradek.server.authz import AUTHORIZATION_FAILURES, require_config_resource
from odradek.server.config import (
    DEPRECATED_BROKER_CONFIGS,
    DEPRECATED_TOPIC_CONFIGS,
    DYNAMIC_KEYS,
    ConfigError,
    is_known_key,
    without_deprecated,
)
from odradek.server.context import RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    results = []
    for resource in request.resources:
        result = Result(resource_type=resource.resource_type, resource_name=resource.resource_name)
        try:
            await _alter(ctx, resource, request.validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            if exc.code in AUTHORIZATION_FAILURES:  # Kafka answers these without a message
                result.error_message = None
        results.append(result)
    return AlterConfigsResponse(responses=results)


async def _alter(
    ctx: RequestContext, resource: AlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> None:
    require_config_resource(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    configs = {c.name: c.value for c in resource.configs}
    if resource.resource_type == BROKER_RESOURCE:
        entity = broker_entity(ctx, resource.resource_name)
        await apply_broker_configs(ctx, entity, _non_null(configs), validate_only)
    else:
        topic = target_topic(ctx, resource.resource_type, resource.resource_name)
        await apply_topic_configs(ctx, topic, _non_null(configs), validate_only)


def target_topic(ctx: RequestContext, resource_type: int, name: str) -> TopicMetadata:
    """The topic a resource names, or the KafkaError Kafka answers for a resource we cannot alter."""
    if resource_type != TOPIC_RESOURCE:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
    validate_topic_name(name)
    topic = ctx.broker.metadata_cache.topic(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return topic


def broker_entity(ctx: RequestContext, name: str) -> str:
    """The store entity a BROKER resource names: the cluster-wide default or this broker's id."""
    if name == "":
        return DEFAULT_BROKER_ENTITY
    if name != str(ctx.broker.broker_id):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.broker.broker_id} or empty string, but received {name}",
        )
    return name


async def apply_topic_configs(
    ctx: RequestContext, topic: TopicMetadata, configs: dict[str, str], validate_only: bool
) -> None:
    """Validate the topic's complete new override set and, unless validating only, store it."""
    configs = without_deprecated(configs, DEPRECATED_TOPIC_CONFIGS, f"topic {topic.name}")
    try:
        ctx.broker.config.log_config(configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        await ctx.broker.admin.alter_topic_configs(topic.name, configs)


async def apply_broker_configs(
    ctx: RequestContext, entity: str, configs: dict[str, str], validate_only: bool
) -> None:
    """Validate an entity's complete new dynamic config set and, unless validating only, store it."""
    configs = without_deprecated(configs, DEPRECATED_BROKER_CONFIGS, f"broker entity {entity}")
    _check_dynamic_names(configs)
    store = ctx.broker.store
    own = str(ctx.broker.broker_id)
    default = DEFAULT_BROKER_ENTITY
    cluster_default = configs if entity == default else store.broker_configs(default)
    per_broker = configs if entity == own else store.broker_configs(own)
    try:
        ctx.broker.config.with_dynamic(cluster_default, per_broker)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        await store.set_broker_configs(entity, configs)


def _check_dynamic_names(configs: Mapping[str, str]) -> None:
    unknown = sorted(name for name in configs if not is_known_key(name))
    if unknown:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown broker configs: {', '.join(unknown)}")
    static = sorted(name for name in configs if name not in DYNAMIC_KEYS)
    if static:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {', '.join(static)}"
        )


def _non_null(configs: Mapping[str, str | None]) -> dict[str, str]:
    nulls = sorted(name for name, value in configs.items() if value is None)
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {', '.join(nulls)}")
    return {name: value for name, value in configs.items() if value is not None}


def error_response(request: AlterConfigsRequest, version: int, code: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(
        responses=[
            Result(error_code=code, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources
        ]
    )
