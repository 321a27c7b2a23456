"""The console's cluster pages: the overview (`/`: cluster id, controller, brokers and counts), the
topic list (`/topics`) and a topic's partitions (`/topic?name=`), each with sizes from every
broker's DescribeLogDirs, and a topic's configs (`/topic/configs?name=`).

Actions (POST, each refused in read-only mode by console/web.py's guard; a Kafka error, an ACL
refusal included, is flashed as "Refused: ..."):
- `/topics/create`: CreateTopics (name, partitions, replication factor, `key=value` configs, one a
  line; an empty count asks for the broker's default), validated first (validate_only), then created;
  when refused, the topic list's form is drawn again with the values given (in the address);
- `/topic/partitions`: CreatePartitions to a new total count;
- `/topic/delete`: DeleteTopics, only when the confirmation field repeats the topic's name (an
  internal topic is never deleted);
- `/topic/configs/set` and `/topic/configs/delete`: IncrementalAlterConfigs SET of one config, or
  DELETE of its override.
A topic's configs come from DescribeConfigs with synonyms (and documentation, when the broker
serves any): each config's value, source (Kafka's source names), and its default: the synonym
below the topic's own override, else Kafka's default for the topic config (storage/config.py).

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from odradek.console.configs import (
    DEFAULT_SOURCE,
    TOPIC_RESOURCE,
    TOPIC_SOURCE,
    alter_resource,
    describe_resource,
)
from odradek.console.reader import ClusterReader, Partition, ReplicaSizes, Topic
from odradek.console.web import FormError, NotFound, page, required
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.config_sources import source_name
from odradek.protocol.errors import ErrorCode, check
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from odradek.storage.config import LogConfig

routes = web.RouteTableDef()

BROKER_DEFAULT = -1  # CreateTopics: the broker's num.partitions / default.replication.factor
TIMEOUT_MS = 30_000
SETTLE_S = 5.0  # how long a change may take to show in the metadata the next page reads
KAFKA_DEFAULTS = LogConfig().to_topic_configs()
DRAFT_FIELDS = ("name", "partitions", "replication_factor", "configs")  # the create form's, kept when refused


@dataclass(frozen=True)
class TopicRow:
    """A topic as the topic list shows it."""

    topic: Topic
    replicas: int  # the replication factor (the most replicas of a partition)
    end_offsets: int
    size: int  # bytes of the partitions' leader replicas: what a consumer reads
    on_disk: int  # bytes of every replica

    @classmethod
    def of(cls, topic: Topic, sizes: ReplicaSizes) -> TopicRow:
        by_partition = [sizes.get((topic.name, p.index), {}) for p in topic.partitions]
        return cls(
            topic,
            max((len(p.replicas) for p in topic.partitions), default=0),
            sum(max(p.end, 0) for p in topic.partitions),
            sum(s.get(p.leader, 0) for p, s in zip(topic.partitions, by_partition, strict=True)),
            sum(sum(s.values()) for s in by_partition),
        )


@dataclass(frozen=True)
class PartitionRow:
    """A partition as a topic's page shows it."""

    partition: Partition
    size: int | None  # its leader replica's bytes
    replica_sizes: str  # "broker: bytes, ..."


@dataclass(frozen=True)
class ConfigRow:
    """A topic config as its configs page shows it."""

    name: str
    value: str | None  # None: sensitive (hidden) or null
    source: str  # Kafka's name of where the value comes from
    overridden: bool  # set on the topic itself (DYNAMIC_TOPIC_CONFIG)
    sensitive: bool
    read_only: bool
    default: str | None  # what the value is without the topic's override
    default_name: str  # the config that gives the default: the topic config's or a broker synonym's
    default_source: str  # "" when neither a synonym nor Kafka's default is known
    documentation: str

    @classmethod
    def of(cls, config: Any) -> ConfigRow:
        below = [s for s in config.synonyms if s.source != TOPIC_SOURCE]
        if below:  # the broker's synonyms, highest precedence first
            default, name, source = below[0].value, below[0].name, below[0].source
        elif config.name in KAFKA_DEFAULTS:
            default, name, source = KAFKA_DEFAULTS[config.name], config.name, DEFAULT_SOURCE
        elif config.config_source != TOPIC_SOURCE:
            default, name, source = config.value, config.name, config.config_source
        else:
            default, name, source = None, config.name, None
        return cls(
            config.name,
            None if config.is_sensitive else config.value,
            source_name(config.config_source),
            config.config_source == TOPIC_SOURCE,
            bool(config.is_sensitive),
            bool(config.read_only),
            None if config.is_sensitive else default,
            name,
            "" if source is None else source_name(source),
            config.documentation or "",
        )


# -- the requests, blocking (run in the console lane) ------------------------------------------------


def topic_configs(reader: ClusterReader, name: str) -> list[ConfigRow]:
    """Every config of topic `name` (DescribeConfigs with synonyms and documentation), by name."""
    code, message, found = describe_resource(
        reader.kafka().any_connection(), TOPIC_RESOURCE, name, documentation=True
    )
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise NotFound(f"There is no topic named {name!r}.")
    check(code, message)
    return sorted((ConfigRow.of(c) for c in found), key=lambda row: row.name)


def create_topic(
    reader: ClusterReader, name: str, partitions: int, replication: int, configs: dict[str, str]
) -> None:
    """CreateTopics, validated first (nothing is created when any check fails); then waits until the
    metadata shows the topic."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in configs.items()],
    )
    client = reader.kafka()
    for validate_only in (True, False):
        request = CreateTopicsRequest(topics=[topic], timeout_ms=TIMEOUT_MS, validate_only=validate_only)
        (result,) = client.request(ApiKey.CREATE_TOPICS, request).topics
        check(result.error_code, result.error_message)
    _settle(reader, name, present=True)


def add_partitions(reader: ClusterReader, name: str, count: int) -> None:
    """CreatePartitions: `name` grows to `count` partitions (the broker places the new ones)."""
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)],
        timeout_ms=TIMEOUT_MS,
    )
    for result in reader.kafka().request(ApiKey.CREATE_PARTITIONS, request).results:
        check(result.error_code, result.error_message)


def delete_topic(reader: ClusterReader, name: str) -> None:
    """DeleteTopics; then waits until the metadata no longer shows the topic."""
    request = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], topic_names=[name], timeout_ms=TIMEOUT_MS
    )
    for result in reader.kafka().request(ApiKey.DELETE_TOPICS, request).responses:
        check(result.error_code, result.error_message)
    _settle(reader, name, present=False)


def alter_config(reader: ClusterReader, name: str, key: str, value: str | None) -> None:
    """IncrementalAlterConfigs on topic `name`: SET `key` to `value`, or DELETE its override (None)."""
    alter_resource(reader.kafka().any_connection(), TOPIC_RESOURCE, name, key, value)


def _settle(reader: ClusterReader, name: str, *, present: bool) -> None:
    """Wait (up to SETTLE_S) until the metadata shows topic `name` (or no longer does)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        topics = reader.cluster(offsets=False).topics
        if any(t.name == name for t in topics) == present:
            return
        time.sleep(0.1)


@routes.get("/")
async def overview(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    cluster = await ctx.run(ClusterReader.cluster, offsets=False)
    groups = await ctx.run(ClusterReader.groups)
    return ctx.render(
        "cluster/overview.html",
        title="Cluster",
        cluster=cluster,
        partitions=sum(len(t.partitions) for t in cluster.topics),
        under_replicated=sum(t.under_replicated for t in cluster.topics),
        groups=len(groups),
    )


@routes.get("/topics")
async def topics(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    cluster = await ctx.run(ClusterReader.cluster)
    sizes = await ctx.run(ClusterReader.replica_sizes)
    rows = [TopicRow.of(t, sizes) for t in cluster.topics]
    draft = {field: request.query.get(field, "") for field in DRAFT_FIELDS}  # a refused create's values
    return ctx.render("cluster/topics.html", title="Topics", rows=rows, draft=draft)


@routes.get("/topic")
async def topic(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    name = request.query.get("name", "")
    cluster = await ctx.run(ClusterReader.cluster)
    found = next((t for t in cluster.topics if t.name == name), None)
    if found is None:
        raise NotFound(f"There is no topic named {name!r}.")
    sizes = await ctx.run(ClusterReader.replica_sizes)
    rows = [
        PartitionRow(
            p,
            sizes.get((name, p.index), {}).get(p.leader),
            ", ".join(f"{b}: {n}" for b, n in sorted(sizes.get((name, p.index), {}).items())) or "-",
        )
        for p in found.partitions
    ]
    return ctx.render("cluster/topic.html", title=f"Topic {name}", topic=found, rows=rows)


@routes.get("/topic/configs")
async def configs(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    name = required(request.query, "name", "a topic name is needed: /topic/configs?name=<topic>")
    rows = await ctx.run(topic_configs, name)
    return ctx.render(
        "cluster/configs.html",
        title=f"Topic {name}: configs",
        topic=name,
        rows=rows,
        overrides=sum(1 for r in rows if r.overridden),
    )


@routes.post("/topics/create")
async def create(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    name = required(form, "name", "a topic needs a name", strip=True)
    partitions = _count(form, "partitions")
    replication = _count(form, "replication_factor")
    draft = "/topics?" + urlencode({f: str(form.get(f, "")) for f in DRAFT_FIELDS}) + "#create"
    try:
        configs = _config_lines(str(form.get("configs", "")))
    except ValueError as exc:
        raise ctx.not_done(f"Refused: {exc}", draft) from None
    raise await ctx.attempt_redirect(
        f"Created topic {name}.",
        create_topic,
        name,
        partitions,
        replication,
        configs,
        success=_topic_path(name),
        failure=draft,
    )


@routes.post("/topic/partitions")
async def partitions(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    name = str(form.get("name", ""))
    count = _count(form, "count")
    await ctx.attempt(f"Topic {name} now has {count} partitions.", add_partitions, name, count)
    raise ctx.redirect(_topic_path(name))


@routes.post("/topic/delete")
async def delete(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    name = str(form.get("name", ""))
    if str(form.get("confirm", "")) != name:
        raise ctx.not_done(f"Not deleted: type the topic's name, {name}, to delete it.", _topic_path(name))
    cluster = await ctx.run(ClusterReader.cluster, offsets=False)
    if any(t.name == name and t.internal for t in cluster.topics):
        raise ctx.not_done(f"Not deleted: {name} is an internal topic.", _topic_path(name))
    raise await ctx.attempt_redirect(
        f"Deleted topic {name}.", delete_topic, name, success="/topics", failure=_topic_path(name)
    )


@routes.post("/topic/configs/set")
async def set_config(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    name, value = str(form.get("name", "")), str(form.get("value", ""))
    key = required(form, "key", "a config name is needed")
    await ctx.attempt(f"Set {key}={value} on topic {name}.", alter_config, name, key, value)
    raise ctx.redirect(_configs_path(name))


@routes.post("/topic/configs/delete")
async def delete_config(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    name, key = str(form.get("name", "")), required(form, "key", "a config name is needed")
    await ctx.attempt(f"Removed the override of {key} on topic {name}.", alter_config, name, key, None)
    raise ctx.redirect(_configs_path(name))


def _count(form: Any, field: str) -> int:
    """A positive count from the form; empty: the broker's default (-1)."""
    text = str(form.get(field, "")).strip()
    if not text:
        return BROKER_DEFAULT
    try:
        count = int(text)
    except ValueError:
        raise FormError(f"{field.replace('_', ' ')} must be a whole number, not {text!r}") from None
    if count < 1:
        raise FormError(f"{field.replace('_', ' ')} must be at least 1, not {count}")
    return count


def _config_lines(text: str) -> dict[str, str]:
    """`key=value` lines (blank lines skipped) as a dict; a line without `=` or a key is refused."""
    configs: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected one key=value a line, got {line.strip()!r}")
        configs[key.strip()] = value.strip()
    return configs


def _topic_path(name: str) -> str:
    return f"/topic?name={quote(name, safe='')}"


def _configs_path(name: str) -> str:
    return f"/topic/configs?name={quote(name, safe='')}"
