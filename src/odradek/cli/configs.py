"""`odradek configs`: kafka-configs.sh for topics and brokers, with its flags and its output.

    odradek configs --bootstrap-server H:P --entity-type topics|brokers
        (--entity-name NAME | --entity-default) --describe [--all]
    odradek configs --bootstrap-server H:P --entity-type topics|brokers (--entity-name NAME |
        --entity-default) --alter [--add-config k=v,k2=[a,b]] [--delete-config k,k2]
    (--topic T, --broker ID and --broker-defaults stand for the --entity-type/--entity-name pairs)

Output as Kafka 3.9's ConfigCommand prints it: `Dynamic configs for topic T are:` (`All configs` with
--all; `Default configs for brokers in the cluster are:` for the cluster-wide broker defaults) then
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` per config, sorted by name, and
`Completed updating config for topic T.` after --alter. --describe without a name describes every
topic (or every broker, then the defaults). Deleting a config that is not set is refused as Kafka
does (`Invalid config(s): k`). Users, clients, IPs and broker loggers are refused in one line: odradek
has no quotas, SCRAM credentials or dynamic loggers. Errors: one line on stderr, exit status 1.

Talks the protocol (DescribeConfigs with synonyms, IncrementalAlterConfigs, Metadata); a broker's own
configs are asked of that broker, as Kafka's admin client does.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import ToolError, add_connection_options, connect, guarded, key_values
from odradek.cli.main import UsageError
from odradek.client import KafkaClient
from odradek.client.connection import BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import check
from odradek.protocol.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)

COMMAND = "configs"
HELP = "describe and alter topic and broker configs (kafka-configs)"

TOPICS, BROKERS = "topics", "brokers"
UNSUPPORTED = {
    "users": "odradek has no client quotas or SCRAM credentials",
    "clients": "odradek has no client quotas",
    "ips": "odradek has no connection quotas by IP",
    "client-metrics": "odradek has no client metrics subscriptions",
    "broker-loggers": "odradek's log levels are not dynamic configs",
}
RESOURCE_TYPE = {TOPICS: 2, BROKERS: 4}
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
TOPIC_SOURCE, BROKER_SOURCE, BROKER_DEFAULT_SOURCE = 1, 2, 3
SET, DELETE = 0, 1
DEFAULT_ENTITY = ""


@dataclass(frozen=True, slots=True)
class Entity:
    kind: str  # TOPICS or BROKERS
    name: str  # DEFAULT_ENTITY: the cluster-wide broker defaults

    @property
    def resource(self) -> tuple[int, str]:
        return RESOURCE_TYPE[self.kind], self.name

    @property
    def dynamic_source(self) -> int:
        if self.kind == TOPICS:
            return TOPIC_SOURCE
        return BROKER_DEFAULT_SOURCE if self.name == DEFAULT_ENTITY else BROKER_SOURCE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the configs of the entity")
    actions.add_argument("--alter", action="store_true", help="set or delete configs of the entity")
    parser.add_argument("--entity-type", choices=[TOPICS, BROKERS, *UNSUPPORTED], help="topics or brokers")
    names = parser.add_mutually_exclusive_group()
    names.add_argument("--entity-name", help="the topic's name or the broker's id")
    names.add_argument("--entity-default", action="store_true", help="the cluster-wide broker defaults")
    names.add_argument("--topic", help="short for --entity-type topics --entity-name TOPIC")
    names.add_argument("--broker", help="short for --entity-type brokers --entity-name ID")
    names.add_argument("--broker-defaults", action="store_true", help="short for brokers --entity-default")
    parser.add_argument("--all", action="store_true", help="--describe: every config, not only dynamic ones")
    parser.add_argument(
        "--add-config",
        type=lambda text: key_values(text, "--add-config"),
        default={},
        metavar="K=V,K2=[A,B],...",
        help="configs to set",
    )
    parser.add_argument(
        "--delete-config",
        type=lambda text: [k.strip() for k in text.split(",") if k.strip()],
        default=[],
        metavar="K,K2,...",
        help="configs to remove",
    )


def run(args: argparse.Namespace) -> int:
    kind, name = _entity(args)
    if args.alter and not (args.add_config or args.delete_config):
        raise UsageError("--alter needs --add-config or --delete-config")
    if args.alter and name is None:
        raise UsageError("--alter needs --entity-name or --entity-default")

    def body() -> int:
        with connect(args, COMMAND) as client:
            if args.alter:
                _alter(client, Entity(kind, name), args.add_config, args.delete_config)
            else:
                _describe(client, kind, name, args.all)
        return 0

    return guarded(COMMAND, body)


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or DEFAULT_ENTITY or None for all) from the options; UsageError if unclear."""
    if args.topic is not None:
        return TOPICS, args.topic
    if args.broker is not None or args.broker_defaults:
        return BROKERS, DEFAULT_ENTITY if args.broker_defaults else args.broker
    if args.entity_type is None:
        raise UsageError("--entity-type (or --topic, --broker, --broker-defaults) is required")
    if args.entity_type in UNSUPPORTED:
        raise UsageError(
            f"--entity-type {args.entity_type} is not supported: {UNSUPPORTED[args.entity_type]}"
        )
    if args.entity_default and args.entity_type != BROKERS:
        raise UsageError("--entity-default goes with --entity-type brokers only")
    if args.entity_type == BROKERS and args.entity_name is not None and not args.entity_name.isdigit():
        raise UsageError(f"the broker's --entity-name must be its integer id, not {args.entity_name!r}")
    return args.entity_type, DEFAULT_ENTITY if args.entity_default else args.entity_name


# ---------------------------------------------------------------------------------------------
# the actions


def _describe(client: KafkaClient, kind: str, name: str | None, describe_all: bool) -> None:
    for entity in _entities(client, kind, name):
        configs = [
            c
            for c in _configs(client, entity, synonyms=True)
            if describe_all or c.config_source == entity.dynamic_source
        ]
        if entity.name == DEFAULT_ENTITY:
            print(f"Default configs for {kind} in the cluster are:")
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {entity.name} are:")
        for config in configs:
            print(_config_line(config))


def _config_line(config: Any) -> str:
    synonyms = ", ".join(f"{SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={s.value}" for s in config.synonyms)
    sensitive = str(config.is_sensitive).lower()
    return f"  {config.name}={config.value} sensitive={sensitive} synonyms={{{synonyms}}}"


def _alter(client: KafkaClient, entity: Entity, added: dict[str, str], deleted: Sequence[str]) -> None:
    dynamic = {
        c.name for c in _configs(client, entity, synonyms=False) if c.config_source == entity.dynamic_source
    }
    missing = [k for k in deleted if k not in dynamic]
    if missing:
        raise ToolError(f"Error: Invalid config(s): {','.join(missing)}")
    resource_type, name = entity.resource
    ops = [IncrementalAlterConfigsRequest.AlterableConfig(k, SET, v) for k, v in added.items()]
    ops += [IncrementalAlterConfigsRequest.AlterableConfig(k, DELETE, None) for k in deleted]
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type, name, ops)]
    )
    for result in _connection(client, entity).request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request).responses:
        check(result.error_code, result.error_message)
    if entity.name == DEFAULT_ENTITY:
        print(f"Completed updating default config for {entity.kind} in the cluster.")
    else:
        print(f"Completed updating config for {entity.kind[:-1]} {entity.name}.")


# ---------------------------------------------------------------------------------------------
# reading the cluster


def _entities(client: KafkaClient, kind: str, name: str | None) -> list[Entity]:
    if name is not None:
        return [Entity(kind, name)]
    if kind == BROKERS:
        ids = sorted(client.metadata([]).brokers)
        return [*(Entity(kind, str(i)) for i in ids), Entity(kind, DEFAULT_ENTITY)]
    topics = client.request(ApiKey.METADATA, MetadataRequest(topics=None)).topics
    return [Entity(kind, t.name) for t in topics if not t.error_code]


def _configs(client: KafkaClient, entity: Entity, *, synonyms: bool) -> list[Any]:
    resource_type, name = entity.resource
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type, name, None)],
        include_synonyms=synonyms,
    )
    (result,) = _connection(client, entity).request(ApiKey.DESCRIBE_CONFIGS, request).results
    check(result.error_code, result.error_message)
    return sorted(result.configs, key=lambda c: c.name)


def _connection(client: KafkaClient, entity: Entity) -> BrokerConnection:
    """A broker's own configs are asked of that broker; anything else of any broker."""
    if entity.kind != BROKERS or entity.name == DEFAULT_ENTITY:
        return client.any_connection()
    broker = client.metadata([]).brokers.get(int(entity.name))
    if broker is None:
        raise ToolError(f"Error: broker {entity.name} is not in the cluster")
    return client.connect_to(broker.host, broker.port)
