"""Helpers of the dynamic broker config tests: confluent-kafka's AdminClient for a broker id, raw
requests for the cluster-wide default (librdkafka refuses a BROKER resource with an empty name)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.describe_configs import DescribeConfigsRequest
from odradek.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.compat.helpers import TIMEOUT_S
from tests.server.raw_client import RawClient

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1


def set_broker(admin: AdminClient, broker_id: str, validate_only: bool = False, **configs: str) -> None:
    """IncrementalAlterConfigs SET on one broker (raises KafkaException on an error)."""
    entries = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in configs.items()]
    resource = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=entries)
    futures = admin.incremental_alter_configs(
        [resource], validate_only=validate_only, request_timeout=TIMEOUT_S
    )
    futures[resource].result(TIMEOUT_S)


def describe_broker(admin: AdminClient, broker_id: str) -> dict:
    resource = ConfigResource(ResourceType.BROKER, broker_id)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def describe_topic(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def alter_raw(
    bootstrap: str, name: str, operation: int = SET, **configs: str | None
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of BROKER resource `name` ("": the cluster-wide default) sent to the
    broker at `bootstrap`: (error code, message)."""
    with RawClient(bootstrap) as client:
        return alter_on(client, name, operation, **configs)


def alter_on(
    client: RawClient, name: str, operation: int = SET, **configs: str | None
) -> tuple[int, str | None]:
    """`alter_raw` over an open connection."""
    op = IncrementalAlterConfigsRequest.AlterableConfig
    changes = [op(name=n, config_operation=operation, value=v) for n, v in configs.items()]
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name=name, configs=changes
    )
    request = IncrementalAlterConfigsRequest(resources=[resource])
    (result,) = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
    return result.error_code, result.error_message


def describe_raw(bootstrap: str, resource_type: int, name: str) -> dict[str, tuple[str | None, int, bool]]:
    """A resource's configs as the broker at `bootstrap` describes them: name -> (value,
    config_source, read_only)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=resource_type, resource_name=name)
    with RawClient(bootstrap) as client:
        request = DescribeConfigsRequest(resources=[resource], include_synonyms=True)
        (result,) = client.call(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}


def describe_default(bootstrap: str) -> dict[str, tuple[str | None, int, bool]]:
    """The cluster-wide dynamic defaults as the broker at `bootstrap` describes them."""
    return describe_raw(bootstrap, BROKER, "")
