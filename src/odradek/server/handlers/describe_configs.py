"""DescribeConfigs handler.

API: v0-v4.

Behaviour: TOPIC resources (type 2) list every topic config with its effective value and source:
TOPIC_CONFIG(1) for an override, STATIC_BROKER_CONFIG(4) when the broker-level synonym was set in
server.properties or an override, DEFAULT_CONFIG(5) otherwise; an unknown topic answers
UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. A topic config whose broker
synonym is set dynamically reports DYNAMIC_BROKER_CONFIG(2) or DYNAMIC_DEFAULT_BROKER_CONFIG(3).
GROUP resources (type 32): every group config (server/group_configs.py), the group's own value
with source GROUP_CONFIG(8), else the broker's with DEFAULT_CONFIG(5).
BROKER resources (type 4) named by this broker's id list every broker config with its effective
value (per-broker dynamic > cluster-wide dynamic default > static > default), its source
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG(4), DEFAULT_CONFIG(5)),
and `read_only` false for the dynamic ones (server/config.py `DYNAMIC_KEYS`); the empty name lists
the cluster-wide dynamic defaults that are set (DYNAMIC_DEFAULT_BROKER_CONFIG); another broker's
id answers INVALID_REQUEST. `configuration_keys` filters by name. Synonyms (v1+, when `include_synonyms`) go
from highest to lowest precedence; config types (v3+) are Kafka's; documentation (v3+, when asked)
is empty.

Deliberate deviations: BROKER_LOGGER resources (type 8) answer INVALID_REQUEST; documentation strings
are empty; a resource named twice (same type, name and keys) is described once (Kafka describes it
again each time, so a small request naming one topic thousands of times asks for an answer hundreds
of times its size).

Authorization (Kafka's): DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a
broker, on the cluster (else CLUSTER_AUTHORIZATION_FAILED), for a group on the group (else
GROUP_AUTHORIZATION_FAILED), per resource.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.controller.metadata import validate_topic_name
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from odradek.security.authorizer import AclOperation
from odradek.server import group_configs
from odradek.server.authz import require_config_resource
from odradek.server.config import ConfigEntry
from odradek.server.context import RequestContext

API_KEY = ApiKey.DESCRIBE_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 4

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

Resource = DescribeConfigsRequest.DescribeConfigsResource
Result = DescribeConfigsResponse.DescribeConfigsResult
Config = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    distinct = {_resource_key(r): r for r in request.resources}
    return DescribeConfigsResponse(results=[_describe(ctx, request, r) for r in distinct.values()])


def _resource_key(resource: DescribeConfigsRequest.DescribeConfigsResource) -> tuple[object, ...]:
    keys = None if resource.configuration_keys is None else tuple(sorted(set(resource.configuration_keys)))
    return resource.resource_type, resource.resource_name, keys


def _describe(
    ctx: RequestContext,
    request: DescribeConfigsRequest,
    resource: DescribeConfigsRequest.DescribeConfigsResource,
) -> Result:
    result = Result(resource_type=resource.resource_type, resource_name=resource.resource_name)
    try:
        require_config_resource(
            ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        entries = _entries(ctx, resource.resource_type, resource.resource_name)
    except KafkaError as exc:
        result.error_code, result.error_message = exc.code, exc.message
        return result
    keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
    result.configs = [
        _config(entry, request.include_synonyms, request.include_documentation)
        for entry in entries
        if keys is None or entry.name in keys
    ]
    return result


def _entries(ctx: RequestContext, resource_type: int, name: str) -> Iterable[ConfigEntry]:
    broker = ctx.broker
    if resource_type == TOPIC_RESOURCE:
        validate_topic_name(name)
        topic = broker.metadata_cache.topic(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        return broker.config.describe_topic(topic.configs)
    if resource_type == BROKER_RESOURCE:
        if name == "":
            return broker.config.describe_dynamic_default()
        if name != str(broker.broker_id):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {broker.broker_id} or empty string, but received {name}",
            )
        return broker.config.describe()
    if resource_type == group_configs.GROUP_RESOURCE:
        return group_configs.describe(broker.store.group_configs(name), lambda key: broker.config[key])
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _config(entry: ConfigEntry, include_synonyms: bool, include_documentation: bool) -> Config:
    synonyms = [Synonym(name=s.name, value=s.value, source=s.source.value) for s in entry.synonyms]
    return Config(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.is_default,
        config_source=entry.source.value,
        is_sensitive=entry.sensitive,
        synonyms=synonyms if include_synonyms else [],
        config_type=entry.config_type.value,
        documentation="" if include_documentation else None,
    )


def error_response(request: DescribeConfigsRequest, version: int, code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[
            Result(error_code=code, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources
        ]
    )
