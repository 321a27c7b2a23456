"""The console's broker pages: the brokers (`/brokers`: every broker with its rack, the controller,
each broker's log dirs from its own DescribeLogDirs, and the cluster's under-replicated and offline
partitions) and a broker's configs (`/broker?id=N`: DescribeConfigs of the BROKER resource with
synonyms, and the cluster-wide dynamic defaults), where a dynamic config is set for the broker or
as the cluster-wide default, or its override removed (IncrementalAlterConfigs SET / DELETE).

Every request goes as the session's principal, so the cluster's ACLs decide; a refused change is
flashed with the cluster's error (a static config cannot be set dynamically). A broker's own
configs are asked of and altered on that broker, as Kafka's admin client does; the cluster-wide
defaults on any broker.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from odradek.client.connection import BrokerConnection
from odradek.console.configs import BROKER_RESOURCE, alter_resource, describe_resource
from odradek.console.reader import Broker, ClusterReader, Topic
from odradek.console.web import FormError, NotFound, page, required
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.config_sources import source_name
from odradek.protocol.errors import ErrorCode, KafkaError, check, error_name
from odradek.protocol.messages import (
    DescribeLogDirsRequest,
)

routes = web.RouteTableDef()

CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide broker defaults
SCOPES = {"broker": "this broker", "default": "cluster-wide default"}
HIDDEN = "(hidden)"


# -- views -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogDir:
    """A log directory as DescribeLogDirs reports it."""

    path: str
    size: int  # bytes of the replicas in it (future replicas included)
    partitions: int  # current replicas
    future: int  # replicas being moved into it
    total_bytes: int  # the file system's (-1: not reported)
    usable_bytes: int
    error: str | None


@dataclass(frozen=True)
class BrokerRow:
    broker: Broker
    controller: bool
    log_dirs: tuple[LogDir, ...]
    error: str | None  # why its log dirs could not be read


@dataclass(frozen=True)
class PartitionIssue:
    """An under-replicated or offline partition."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def missing(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.isr)


@dataclass(frozen=True)
class ConfigRow:
    """A config of a broker (or of the cluster-wide default) as its page shows it."""

    name: str
    value: str | None  # None: null, or a sensitive one (never shown)
    source: str
    dynamic: bool
    sensitive: bool
    synonyms: tuple[str, ...]  # "SOURCE: name=value", in Kafka's order


def partition_issues(topics: Iterable[Topic]) -> tuple[list[PartitionIssue], list[PartitionIssue]]:
    """The under-replicated partitions (an ISR smaller than the replicas) and the offline ones (no
    leader), by topic and partition."""
    issues = [
        PartitionIssue(t.name, p.index, p.leader, p.replicas, p.isr) for t in topics for p in t.partitions
    ]
    issues.sort(key=lambda i: (i.topic, i.partition))
    return [i for i in issues if len(i.isr) < len(i.replicas)], [i for i in issues if i.leader < 0]


# -- blocking reads and changes (the console lane) -------------------------------------------------


def log_dirs(reader: ClusterReader, brokers: tuple[Broker, ...]) -> dict[int, tuple[LogDir, ...] | str]:
    """Each broker's log dirs from its own DescribeLogDirs, or why they could not be read."""
    client = reader.kafka()
    found: dict[int, tuple[LogDir, ...] | str] = {}
    for broker in brokers:
        try:
            response = client.connect_to(broker.host, broker.port).request(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None)
            )
            check(response.error_code)
        except KafkaError as exc:
            found[broker.node_id] = str(exc)
            continue
        except (ConnectionError, TimeoutError, OSError) as exc:
            found[broker.node_id] = f"unreachable: {exc}"
            continue
        found[broker.node_id] = tuple(_log_dir(d) for d in sorted(response.results, key=lambda d: d.log_dir))
    return found


def _log_dir(result: Any) -> LogDir:
    replicas = [p for t in result.topics for p in t.partitions]
    return LogDir(
        result.log_dir,
        sum(p.partition_size for p in replicas),
        sum(1 for p in replicas if not p.is_future_key),
        sum(1 for p in replicas if p.is_future_key),
        result.total_bytes,
        result.usable_bytes,
        None if result.error_code == ErrorCode.NONE else error_name(result.error_code),
    )


def broker_configs(reader: ClusterReader, broker: Broker) -> list[ConfigRow]:
    """The broker's configs (DescribeConfigs with synonyms, asked of that broker), by name."""
    return _describe(_connection(reader, broker), str(broker.node_id))


def default_configs(reader: ClusterReader) -> list[ConfigRow]:
    """The cluster-wide dynamic broker defaults that are set, by name."""
    return _describe(reader.kafka().any_connection(), CLUSTER_DEFAULT)


def alter_config(reader: ClusterReader, broker: Broker, scope: str, name: str, value: str | None) -> None:
    """Set `name` to `value` (None: delete the override) for the broker or as the cluster-wide
    default (IncrementalAlterConfigs); raises the cluster's KafkaError when it refuses."""
    if scope == "broker":
        alter_resource(_connection(reader, broker), BROKER_RESOURCE, str(broker.node_id), name, value)
    else:
        alter_resource(reader.kafka().any_connection(), BROKER_RESOURCE, CLUSTER_DEFAULT, name, value)


def _connection(reader: ClusterReader, broker: Broker) -> BrokerConnection:
    return reader.kafka().connect_to(broker.host, broker.port)


def _describe(connection: BrokerConnection, resource_name: str) -> list[ConfigRow]:
    code, message, found = describe_resource(connection, BROKER_RESOURCE, resource_name)
    check(code, message)
    return [_config_row(c) for c in sorted(found, key=lambda c: c.name)]


def _config_row(config: Any) -> ConfigRow:
    def shown(value: str | None) -> str:
        return HIDDEN if config.is_sensitive else ("null" if value is None else value)

    return ConfigRow(
        config.name,
        None if config.is_sensitive else config.value,
        source_name(config.config_source),
        not config.read_only,
        bool(config.is_sensitive),
        tuple(f"{source_name(s.source)}: {s.name}={shown(s.value)}" for s in config.synonyms),
    )


# -- pages -----------------------------------------------------------------------------------------


@routes.get("/brokers")
async def brokers(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    cluster = await ctx.run(ClusterReader.cluster, offsets=False)
    dirs = await ctx.run(log_dirs, cluster.brokers)
    rows = [
        BrokerRow(
            b,
            b.node_id == cluster.controller_id,
            d if isinstance(d := dirs.get(b.node_id, ()), tuple) else (),
            d if isinstance(d, str) else None,
        )
        for b in cluster.brokers
    ]
    under_replicated, offline = partition_issues(cluster.topics)
    return ctx.render(
        "brokers/list.html",
        title="Brokers",
        rows=rows,
        controller_id=cluster.controller_id,
        under_replicated=under_replicated,
        offline=offline,
    )


@routes.get("/broker")
async def broker(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    found = await _broker(ctx, request.query.get("id", ""))
    configs = await ctx.run(broker_configs, found)
    defaults = await ctx.run(default_configs)
    editing, scope = request.query.get("edit", ""), request.query.get("scope", "broker")
    current = next((c for c in (defaults if scope == "default" else configs) if c.name == editing), None)
    dynamic_only = request.query.get("dynamic") == "1"
    return ctx.render(
        "brokers/broker.html",
        title=f"Broker {found.node_id}",
        broker=found,
        configs=[c for c in configs if c.dynamic] if dynamic_only else configs,
        dynamic_only=dynamic_only,
        defaults=defaults,
        dynamic_names=[c.name for c in configs if c.dynamic],
        scopes=SCOPES,
        edit_name=editing,
        edit_value="" if current is None or current.value is None else current.value,
        edit_scope=scope,
    )


@routes.post("/broker/config")
async def set_config(request: web.Request) -> web.StreamResponse:
    """Set a config (`action=set`, `name`, `value`) or remove its override (`action=delete`), for
    the broker or as the cluster-wide default (`scope`)."""
    ctx = page(request)
    form = await request.post()
    found = await _broker(ctx, str(form.get("id", "")))
    scope, action = str(form.get("scope", "broker")), str(form.get("action", "set"))
    if scope not in SCOPES:
        raise FormError(f"Unknown scope {scope!r}: choose broker or default.")
    if action not in ("set", "delete"):
        raise FormError(f"Unknown action {action!r}: choose set or delete.")
    name, value = required(form, "name", "Name the config to change.", strip=True), str(form.get("value", ""))
    where = f"broker {found.node_id}" if scope == "broker" else "the cluster-wide default"
    if action == "set":
        done = f"Set {name}={value} for {where}."
        await ctx.attempt(done, alter_config, found, scope, name, value)
    else:
        await ctx.attempt(f"Removed {name} from {where}.", alter_config, found, scope, name, None)
    raise ctx.redirect("/broker?" + urlencode({"id": found.node_id}))


async def _broker(ctx: Any, text: str) -> Broker:
    try:
        node_id = int(text)
    except ValueError:
        raise FormError(f"A broker id is a number, not {text!r}.") from None
    cluster = await ctx.run(ClusterReader.cluster, offsets=False)
    found = next((b for b in cluster.brokers if b.node_id == node_id), None)
    if found is None:
        raise NotFound(f"There is no broker {node_id} in the cluster.")
    return found
