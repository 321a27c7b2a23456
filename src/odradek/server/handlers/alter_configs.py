"""AlterConfigs handler.

API: v0-v2.

Behaviour: for a TOPIC resource (type 2) the given configs replace the topic's whole override set
(Kafka's non-incremental semantics: a config left out returns to its default). Every value is
validated first: a null value is INVALID_REQUEST, an unknown name or a bad value INVALID_CONFIG; an
unknown topic UNKNOWN_TOPIC_OR_PARTITION. `validate_only` checks and changes nothing. The new set is
written to the metadata store; the store's config change notification brings it to this broker's
metadata cache and the topic's logs before the response leaves.

Deliberate deviations: odradek has no dynamic broker configs, so a BROKER resource (type 4) with
any config answers INVALID_REQUEST (Kafka accepts its dynamically updatable subset); other resource
types answer INVALID_REQUEST too.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.controller.metadata import TopicMetadata, validate_topic_name
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from odradek.server.config import ConfigError
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
            configs = {c.name: c.value for c in resource.configs}
            topic = target_topic(ctx, resource.resource_type, resource.resource_name, configs)
            await apply_topic_configs(ctx, topic, _non_null(configs), request.validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
        results.append(result)
    return AlterConfigsResponse(responses=results)


def target_topic(
    ctx: RequestContext, resource_type: int, name: str, configs: Mapping[str, object]
) -> TopicMetadata:
    """The topic a resource names, or the KafkaError Kafka answers for a resource we cannot alter."""
    if resource_type == BROKER_RESOURCE:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {sorted(configs)}"
        )
    if resource_type != TOPIC_RESOURCE:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
    validate_topic_name(name)
    topic = ctx.broker.metadata_cache.topic(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return topic


async def apply_topic_configs(
    ctx: RequestContext, topic: TopicMetadata, configs: dict[str, str], validate_only: bool
) -> None:
    """Validate the topic's complete new override set and, unless validating only, store it."""
    try:
        ctx.broker.config.log_config(configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        await ctx.broker.admin.alter_topic_configs(topic.name, configs)


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
