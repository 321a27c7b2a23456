"""IncrementalAlterConfigs handler.

API: v0-v1.

Behaviour: for a TOPIC resource (type 2) each operation changes the current override set: SET(0)
sets a value, DELETE(1) removes the override (back to the default), APPEND(2) / SUBTRACT(3) add or
remove items of a LIST config (cleanup.policy, the throttled replica lists) starting from its
effective value. The same config twice in one resource answers INVALID_REQUEST; APPEND or SUBTRACT
on a non-list config, an unknown operation, a null value for SET/APPEND/SUBTRACT, an unknown name or a
bad resulting value answer INVALID_CONFIG / INVALID_REQUEST as Kafka does. The resulting set is
validated as a whole before it is stored; `validate_only` stores nothing.

Deliberate deviations: as AlterConfigs, BROKER resources answer INVALID_REQUEST (no dynamic broker
configs).
"""

from __future__ import annotations

from collections import Counter

from odradek.controller.metadata import TopicMetadata
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from odradek.server.config import ConfigType, topic_config_type
from odradek.server.context import RequestContext
from odradek.server.handlers.alter_configs import apply_topic_configs, target_topic

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
Alteration = IncrementalAlterConfigsRequest.AlterableConfig


async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    results = []
    for resource in request.resources:
        result = Result(resource_type=resource.resource_type, resource_name=resource.resource_name)
        try:
            names = Counter(c.name for c in resource.configs)
            duplicated = sorted(name for name, count in names.items() if count > 1)
            if duplicated:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate config keys: {', '.join(duplicated)}")
            topic = target_topic(ctx, resource.resource_type, resource.resource_name, names)
            configs = _altered(ctx, topic, resource.configs)
            await apply_topic_configs(ctx, topic, configs, request.validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
        results.append(result)
    return IncrementalAlterConfigsResponse(responses=results)


def _altered(ctx: RequestContext, topic: TopicMetadata, alterations: list[Alteration]) -> dict[str, str]:
    configs = dict(topic.configs)
    defaults = ctx.broker.config.topic_config_defaults()
    for change in alterations:
        if change.config_operation == DELETE:
            configs.pop(change.name, None)
        elif change.config_operation not in (SET, APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {change.config_operation}")
        elif change.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {change.name}")
        elif change.config_operation == SET:
            configs[change.name] = change.value
        else:
            configs[change.name] = _list_change(change, configs.get(change.name, defaults.get(change.name)))
    return configs


def _list_change(change: Alteration, current_value: str | None) -> str:
    """APPEND or SUBTRACT the items of `change.value` to / from a LIST config's current value."""
    if current_value is None or topic_config_type(change.name) is not ConfigType.LIST:
        message = f"Config value append/subtract is not allowed for config {change.name}"
        raise KafkaError(ErrorCode.INVALID_CONFIG, message)
    current, delta = _items(current_value), _items(change.value or "")
    if change.config_operation == APPEND:
        return ",".join(current + [item for item in delta if item not in current])
    return ",".join(item for item in current if item not in delta)


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def error_response(
    request: IncrementalAlterConfigsRequest, version: int, code: int
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[
            Result(error_code=code, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources
        ]
    )
