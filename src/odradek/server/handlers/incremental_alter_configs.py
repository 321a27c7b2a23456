"""IncrementalAlterConfigs handler.

API: v0-v1.

Behaviour: each operation changes the resource's current set: SET(0) sets a value, DELETE(1)
removes it (back to the next level down), APPEND(2) / SUBTRACT(3) add or remove items of a LIST
config starting from its effective value. The same config twice in one resource answers
INVALID_REQUEST; APPEND or SUBTRACT on a non-list config, an unknown operation, a null value for
SET/APPEND/SUBTRACT, an unknown name or a bad resulting value answer INVALID_CONFIG /
INVALID_REQUEST as Kafka does. The resulting set is validated as a whole before it is stored;
`validate_only` stores nothing.
- TOPIC resources (type 2): the topic's override set; the LIST configs are cleanup.policy and the
  throttled replica lists.
- GROUP resources (type 32): a group's configs (server/group_configs.py: consumer.* and share.*
  keys, checked against the broker's bounds), kept by the metadata store; no LIST configs.
- BROKER resources (type 4): the dynamic configs of the cluster-wide default (empty name) or of this
  broker (its id), checked and stored as AlterConfigs does (handlers/alter_configs.py); the LIST
  config is log.cleanup.policy, whose effective value is this broker's current one.

Deliberate deviations: as AlterConfigs (the dynamic keys are those odradek applies live; a bad
broker config value is INVALID_CONFIG).

Authorization (Kafka's): ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a
broker, on the cluster (else CLUSTER_AUTHORIZATION_FAILED), for a group on the group (else
GROUP_AUTHORIZATION_FAILED), per resource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from odradek.security.authorizer import AclOperation
from odradek.server import group_configs
from odradek.server.authz import AUTHORIZATION_FAILURES, require_config_resource
from odradek.server.config import CONFIG_KEYS, ConfigType, format_value, topic_config_type
from odradek.server.context import RequestContext
from odradek.server.handlers.alter_configs import (
    BROKER_RESOURCE,
    apply_broker_configs,
    apply_topic_configs,
    broker_entity,
    target_topic,
)

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
Alteration = IncrementalAlterConfigsRequest.AlterableConfig
ListValue = Callable[[str], str | None]


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
            await _alter(ctx, resource, request.validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            if exc.code in AUTHORIZATION_FAILURES:  # Kafka answers these without a message
                result.error_message = None
        results.append(result)
    return IncrementalAlterConfigsResponse(responses=results)


async def _alter(ctx: RequestContext, resource: Resource, validate_only: bool) -> None:
    require_config_resource(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    if resource.resource_type == BROKER_RESOURCE:
        entity = broker_entity(ctx, resource.resource_name)
        current = ctx.broker.store.broker_configs(entity)
        configs = _altered(current, resource.configs, _broker_list_value(ctx))
        await apply_broker_configs(ctx, entity, configs, validate_only)
    elif resource.resource_type == group_configs.GROUP_RESOURCE:
        store = ctx.broker.store
        configs = _altered(store.group_configs(resource.resource_name), resource.configs, lambda name: None)
        group_configs.validate(configs, lambda key: ctx.broker.config[key])
        if not validate_only:
            await store.set_group_configs(resource.resource_name, configs)
    else:
        topic = target_topic(ctx, resource.resource_type, resource.resource_name)
        defaults = ctx.broker.config.topic_config_defaults()
        configs = _altered(topic.configs, resource.configs, _topic_list_value(defaults))
        await apply_topic_configs(ctx, topic, configs, validate_only)


def _topic_list_value(defaults: Mapping[str, str]) -> ListValue:
    """A topic LIST config's default value (None: not a LIST topic config)."""

    def value(name: str) -> str | None:
        return defaults.get(name) if topic_config_type(name) is ConfigType.LIST else None

    return value


def _broker_list_value(ctx: RequestContext) -> ListValue:
    """A broker LIST config's current value on this broker (None: not a LIST broker config)."""

    def value(name: str) -> str | None:
        key = CONFIG_KEYS.get(name)
        if key is None or key.type is not ConfigType.LIST:
            return None
        return format_value(ctx.broker.config[name]) or ""

    return value


def _altered(
    current: Mapping[str, str], alterations: list[Alteration], list_value: ListValue
) -> dict[str, str]:
    configs = dict(current)
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
            base = list_value(change.name)
            current_value = None if base is None else configs.get(change.name, base)
            configs[change.name] = _list_change(change, current_value)
    return configs


def _list_change(change: Alteration, current_value: str | None) -> str:
    """APPEND or SUBTRACT the items of `change.value` to / from a LIST config's current value (None:
    not a LIST config)."""
    if current_value is None:
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
