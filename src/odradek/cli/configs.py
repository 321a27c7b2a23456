"""`odradek configs`: kafka-configs.sh for topics, brokers, users and clients, with its flags and
its output.

    odradek configs --bootstrap-server H:P --entity-type topics|brokers
        (--entity-name NAME | --entity-default) --describe [--all]
    odradek configs --bootstrap-server H:P --entity-type topics|brokers (--entity-name NAME |
        --entity-default) --alter [--add-config k=v,k2=[a,b]] [--delete-config k,k2]
    odradek configs --bootstrap-server H:P --entity-type groups --entity-name GROUP
        (--describe [--all] | --alter [--add-config share.auto.offset.reset=earliest] [--delete-config k])
    (--topic T, --broker ID and --broker-defaults stand for the --entity-type/--entity-name pairs)
    odradek configs --bootstrap-server H:P --entity-type users|clients [--entity-name N |
        --entity-default] [--entity-type clients (--entity-name C | --entity-default)]
        (--describe | --alter [--add-config producer_byte_rate=N,...] [--delete-config k,...])

Output as Kafka 3.9's ConfigCommand prints it: `Dynamic configs for topic T are:` (`All configs` with
--all; `Default configs for brokers in the cluster are:` for the cluster-wide broker defaults) then
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` per config, sorted by name, and
`Completed updating config for topic T.` after --alter. --describe without a name describes every
topic (or every broker, then the defaults). Deleting a config that is not set is refused as Kafka
does (`Invalid config(s): k`). IPs, client metrics and broker loggers are refused in one line:
odradek has no IP quotas or dynamic loggers. Errors: one line on stderr, exit status 1.

Client quotas (users, clients, and a user with a client: the two --entity-type / --entity-name
pairs in one command, --entity-default standing for a name in its place) talk AlterClientQuotas and
DescribeClientQuotas (strict: the entity has exactly the types given; a type without a name matches
every name). --describe prints Kafka's `Quota configs for user-principal 'u', client-id 'c' are
producer_byte_rate=1048576.0` (`the default client-id` for a default); --alter prints `Completed
updating config for user u.` (`Completed updating default config for users in the cluster.`).

SCRAM credentials (a user alone, by name): `--add-config 'SCRAM-SHA-256=[iterations=8192,
password=pw],SCRAM-SHA-512=[password=pw]'` (iterations default 4096) salts and hashes the password
here, with a random salt, and sends AlterUserScramCredentials (the password never travels);
`--delete-config SCRAM-SHA-256` deletes one; other keys of the same command go to the quotas.
--describe of users adds Kafka's `SCRAM credential configs for user-principal 'u' are
SCRAM-SHA-256=iterations=8192` (DescribeUserScramCredentials; every user with one when no name is
given). A default user, or a user with a client id, has no SCRAM credentials.

Talks the protocol (DescribeConfigs with synonyms, IncrementalAlterConfigs, Metadata); a broker's own
configs are asked of that broker, as Kafka's admin client does.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import ToolError, add_connection_options, connect, guarded, key_values
from odradek.cli.main import UsageError
from odradek.client import KafkaClient
from odradek.client.connection import BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.config_sources import source_name
from odradek.protocol.errors import ErrorCode, check
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from odradek.security.sasl.scram import DEFAULT_ITERATIONS, ScramMechanism

COMMAND = "configs"
HELP = "describe and alter topic and broker configs (kafka-configs)"

TOPICS, BROKERS, GROUPS = "topics", "brokers", "groups"
USERS, CLIENTS = "users", "clients"
QUOTA_ENTITY_TYPES = {USERS: "user", CLIENTS: "client-id"}  # --entity-type -> ClientQuotaEntity type
QUOTA_TYPE_WORDS = {"user": "user-principal", "client-id": "client-id"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
SALT_BYTES = 32
UNSUPPORTED = {
    "ips": "odradek has no connection quotas by IP",
    "client-metrics": "odradek has no client metrics subscriptions",
    "broker-loggers": "odradek's log levels are not dynamic configs",
}
RESOURCE_TYPE = {TOPICS: 2, BROKERS: 4, GROUPS: 32}
TOPIC_SOURCE, BROKER_SOURCE, BROKER_DEFAULT_SOURCE, GROUP_SOURCE = 1, 2, 3, 8
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
        if self.kind == GROUPS:
            return GROUP_SOURCE
        return BROKER_DEFAULT_SOURCE if self.name == DEFAULT_ENTITY else BROKER_SOURCE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the configs of the entity")
    actions.add_argument("--alter", action="store_true", help="set or delete configs of the entity")
    parser.add_argument(
        "--entity-type",
        action="append",
        dest="entity_types",
        choices=[TOPICS, BROKERS, GROUPS, USERS, CLIENTS, *UNSUPPORTED],
        help="topics, brokers, users or clients (users then clients for a user's client)",
    )
    parser.add_argument(
        "--entity-name", action="append", dest="entity_names", help="the topic, broker id, user or client id"
    )
    parser.add_argument(
        "--entity-default",
        action="append_const",
        const=DEFAULT_ENTITY,
        dest="entity_names",
        help="the default (brokers: cluster-wide; users, clients: every user / client id without its own)",
    )
    names = parser.add_mutually_exclusive_group()
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
    if any(t in QUOTA_ENTITY_TYPES for t in args.entity_types or ()):
        return _run_client_quotas(args)
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
    if not args.entity_types:
        raise UsageError("--entity-type (or --topic, --broker, --broker-defaults) is required")
    names = args.entity_names or []
    if len(args.entity_types) > 1 or len(names) > 1:
        raise UsageError("only users and clients take two --entity-type options")
    entity_type, name = args.entity_types[0], names[0] if names else None
    if entity_type in UNSUPPORTED:
        raise UsageError(f"--entity-type {entity_type} is not supported: {UNSUPPORTED[entity_type]}")
    if name == DEFAULT_ENTITY and entity_type != BROKERS:
        raise UsageError("--entity-default goes with --entity-type brokers, users or clients only")
    if entity_type == GROUPS and name is None:
        raise UsageError("--entity-type groups needs --entity-name GROUP")
    if entity_type == BROKERS and name not in (None, DEFAULT_ENTITY) and not name.isdigit():
        raise UsageError(f"the broker's --entity-name must be its integer id, not {name!r}")
    return entity_type, name


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
    synonyms = ", ".join(f"{source_name(s.source)}:{s.name}={s.value}" for s in config.synonyms)
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


# ---------------------------------------------------------------------------------------------
# client quotas (users, clients, users with clients)

# A client quota entity as the options give it: (ClientQuotaEntity type, name); name DEFAULT_ENTITY
# is that type's default, None (describe only) any name.
QuotaComponents = list[tuple[str, str | None]]


def _run_client_quotas(args: argparse.Namespace) -> int:
    components = _quota_components(args)
    if args.alter and not (args.add_config or args.delete_config):
        raise UsageError("--alter needs --add-config or --delete-config")
    if args.alter and any(name is None for _, name in components):
        raise UsageError("--alter needs an --entity-name or --entity-default for each --entity-type")

    scram_added, added = _split_scram(args.add_config or {})
    scram_deleted, deleted = _split_scram(dict.fromkeys(args.delete_config or []))
    if (scram_added or scram_deleted) and not _scram_user(components):
        raise UsageError("SCRAM credentials go with --entity-type users and an --entity-name only")

    def body() -> int:
        with connect(args, COMMAND) as client:
            if args.alter:
                if scram_added or scram_deleted:
                    _alter_scram(client, str(components[0][1]), scram_added, list(scram_deleted))
                if added or deleted:
                    _alter_quotas(client, components, added, list(deleted))
                _completed(components)
            else:
                for line in _quota_lines(_describe_quotas(client, components)):
                    print(line)
                if components[0][0] == "user" and len(components) == 1 and components[0][1] != DEFAULT_ENTITY:
                    for line in _scram_lines(client, components[0][1]):
                        print(line)
        return 0

    return guarded(COMMAND, body)


def _quota_components(args: argparse.Namespace) -> QuotaComponents:
    """The entity of the --entity-type / --entity-name / --entity-default options, paired in order
    (a type without a name last: every name); UsageError for another entity type or a repeated one."""
    types, names = args.entity_types, args.entity_names or []
    if args.topic is not None or args.broker is not None or args.broker_defaults:
        raise UsageError("--topic, --broker and --broker-defaults do not go with users or clients")
    if len(types) > 2 or len(set(types)) != len(types) or any(t not in QUOTA_ENTITY_TYPES for t in types):
        raise UsageError("client quotas take --entity-type users, clients, or users then clients")
    if len(names) > len(types):
        raise UsageError("more --entity-name / --entity-default options than --entity-type options")
    padded = [*names, *([None] * (len(types) - len(names)))]
    return [(QUOTA_ENTITY_TYPES[t], n) for t, n in zip(types, padded, strict=True)]


def _describe_quotas(client: KafkaClient, components: QuotaComponents) -> list[Any]:
    request = DescribeClientQuotasRequest(
        components=[_filter_component(kind, name) for kind, name in components], strict=True
    )
    response = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    check(response.error_code, response.error_message)
    return response.entries or []


def _filter_component(kind: str, name: str | None) -> DescribeClientQuotasRequest.ComponentData:
    if name is None:
        return DescribeClientQuotasRequest.ComponentData(kind, MATCH_ANY, None)
    if name == DEFAULT_ENTITY:
        return DescribeClientQuotasRequest.ComponentData(kind, MATCH_DEFAULT, None)
    return DescribeClientQuotasRequest.ComponentData(kind, MATCH_EXACT, name)


def _quota_lines(entries: Sequence[Any]) -> list[str]:
    """Kafka's ConfigCommand lines: `Quota configs for user-principal 'u', client-id 'c' are k=v, ...`."""
    lines = []
    for entry in entries:
        names = {e.entity_type: e.entity_name for e in entry.entity}
        parts = [
            f"{QUOTA_TYPE_WORDS[kind]} '{names[kind]}'"
            if names[kind] is not None
            else f"the default {QUOTA_TYPE_WORDS[kind]}"
            for kind in ("user", "client-id")
            if kind in names
        ]
        values = ", ".join(f"{v.key}={v.value!r}" for v in entry.values)
        lines.append(f"Quota configs for {', '.join(parts)} are {values}")
    return lines


def _alter_quotas(
    client: KafkaClient, components: QuotaComponents, added: dict[str, str], deleted: Sequence[str]
) -> None:
    current = {v.key for entry in _describe_quotas(client, components) for v in entry.values}
    missing = [k for k in deleted if k not in current]
    if missing:
        raise ToolError(f"Error: Invalid config(s): {','.join(missing)}")
    ops = [AlterClientQuotasRequest.OpData(k, _quota_number(k, v), False) for k, v in added.items()]
    ops += [AlterClientQuotasRequest.OpData(k, 0.0, True) for k in deleted]
    entity = [
        AlterClientQuotasRequest.EntityData(kind, None if name == DEFAULT_ENTITY else name)
        for kind, name in components
    ]
    request = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(entity, ops)])
    for entry in client.request(ApiKey.ALTER_CLIENT_QUOTAS, request).entries:
        check(entry.error_code, entry.error_message)


def _completed(components: QuotaComponents) -> None:
    kind, name = components[0]
    entity_type = next(t for t, k in QUOTA_ENTITY_TYPES.items() if k == kind)
    if name == DEFAULT_ENTITY:
        print(f"Completed updating default config for {entity_type} in the cluster.")
    else:
        print(f"Completed updating config for {entity_type[:-1]} {name}.")


def _quota_number(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ToolError(f"Error: Invalid value {value} for configuration {key}: not a number") from None


# ---------------------------------------------------------------------------------------------
# SCRAM credentials (users)


def _split_scram(configs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the SCRAM mechanism keys, the other keys) of an --add-config / --delete-config."""
    scram = {k: v for k, v in configs.items() if ScramMechanism.named(k) is not None}
    return scram, {k: v for k, v in configs.items() if k not in scram}


def _scram_user(components: QuotaComponents) -> bool:
    return (
        len(components) == 1 and components[0][0] == "user" and components[0][1] not in (None, DEFAULT_ENTITY)
    )


def _alter_scram(client: KafkaClient, user: str, added: dict[str, str], deleted: list[str]) -> None:
    request = AlterUserScramCredentialsRequest(
        deletions=[
            AlterUserScramCredentialsRequest.ScramCredentialDeletion(user, _mechanism(name).type_id)
            for name in deleted
        ],
        upsertions=[_upsertion(user, name, value) for name, value in added.items()],
    )
    for result in client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request).results:
        check(result.error_code, result.error_message)


def _upsertion(user: str, name: str, value: str) -> AlterUserScramCredentialsRequest.ScramCredentialUpsertion:
    """Kafka's `[iterations=N,password=P]`: the salted password is computed here, with a new salt."""
    options = dict(part.partition("=")[::2] for part in value.split(",") if part)
    if not options.get("password"):
        raise ToolError(f"Error: {name} needs a password: {name}=[iterations=N,password=P]")
    try:
        iterations = int(options.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ToolError(f"Error: Invalid iterations {options['iterations']} for {name}") from None
    mechanism = _mechanism(name)
    salt = os.urandom(SALT_BYTES)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        user,
        mechanism.type_id,
        iterations,
        salt,
        mechanism.salted_password(options["password"], salt, iterations),
    )


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.named(name)
    assert mechanism is not None
    return mechanism


def _scram_lines(client: KafkaClient, user: str | None) -> list[str]:
    """Kafka's `SCRAM credential configs for user-principal 'u' are SCRAM-SHA-256=iterations=N`."""
    users = None if user is None else [DescribeUserScramCredentialsRequest.UserName(user)]
    response = client.request(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DescribeUserScramCredentialsRequest(users)
    )
    check(response.error_code, response.error_message)
    lines = []
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        check(result.error_code, result.error_message)
        described = ", ".join(
            f"{_named_type(info.mechanism)}=iterations={info.iterations}" for info in result.credential_infos
        )
        lines.append(f"SCRAM credential configs for user-principal '{result.user}' are {described}")
    return lines


def _named_type(type_id: int) -> str:
    mechanism = ScramMechanism.of_type(type_id)
    return mechanism.mechanism_name if mechanism is not None else f"UNKNOWN({type_id})"
