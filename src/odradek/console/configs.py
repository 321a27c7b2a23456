"""The config requests the console's topic and broker pages share: DescribeConfigs with synonyms and
IncrementalAlterConfigs SET / DELETE of one config of one resource, over a given connection (Kafka's
names of a config's source: protocol/config_sources.py).

Callers: console/cluster_pages.py (topics), console/broker_pages.py (brokers and their defaults).
"""

from __future__ import annotations

from typing import Any

from odradek.client.connection import BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import check
from odradek.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
TOPIC_SOURCE, BROKER_SOURCE, DEFAULT_BROKER_SOURCE, DEFAULT_SOURCE = 1, 2, 3, 5


def describe_resource(
    connection: BrokerConnection, resource_type: int, name: str, *, documentation: bool = False
) -> tuple[int, str | None, list[Any]]:
    """The resource's configs with their synonyms: (error code, error message, configs); the caller
    decides what an error means (an unknown topic is a 404 to one page, a refusal to another)."""
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type, name, None)],
        include_synonyms=True,
        include_documentation=documentation,
    )
    (result,) = connection.request(ApiKey.DESCRIBE_CONFIGS, request).results
    return result.error_code, result.error_message, list(result.configs or ())


def alter_resource(
    connection: BrokerConnection, resource_type: int, name: str, key: str, value: str | None
) -> None:
    """SET `key` to `value` on the resource, or DELETE its override when `value` is None; raises the
    cluster's KafkaError when it refuses."""
    op = IncrementalAlterConfigsRequest.AlterableConfig(key, SET if value is not None else DELETE, value)
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type, name, [op])]
    )
    for result in connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request).responses:
        check(result.error_code, result.error_message)
