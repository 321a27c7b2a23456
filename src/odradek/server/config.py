"""Broker configuration: Kafka's server.properties, with Kafka's names, types, defaults and validation.

Owns: parsing the Java properties syntax (`key=value`, `key: value`, `key value`, `#`/`!` comments,
`\\` line continuations, `\\uXXXX` escapes), applying `--override key=value` on top, typing and
validating every known key, and deriving the values Kafka derives (retention from ms/minutes/hours,
roll from ms/hours, `log.dirs` over `log.dir`, `log.flush.interval.ms` falling back to the scheduler
interval, advertised listeners falling back to listeners). Also the topic-level defaults a broker
hands to every topic (`segment.bytes` <- `log.segment.bytes`, ...) and the entries DescribeConfigs
reports for a BROKER resource.

Invariants: a `KafkaConfig` is immutable once built; every value in it has passed validation, so a bad
value is refused at start with a `ConfigError` that names the key. Unknown keys are kept out and
logged as a warning (Kafka ignores them too). Keys Kafka knows but odradek does not act on (thread
pool sizes, socket buffer sizes, metrics, quotas...) are accepted silently: see `IGNORED_KEYS`. A
key that asks for a protection odradek does not provide is never ignored: `principal.builder.class`,
an `ssl.*` key security/ssl_config.py does not apply, a `sasl.*` / `zookeeper.ssl.*`
key other than Kafka's default and other than the SASL keys odradek implements (a known key:
`sasl.enabled.mechanisms`, `sasl.mechanism.inter.broker.protocol`, `sasl.server.max.receive.size`;
per listener `listener.name.<l>.sasl.enabled.mechanisms` and
`listener.name.<l>.<mechanism>.sasl.jaas.config`, read by server/sasl_listener.py), the same under
`listener.name.<listener>.`, and the per-listener connection limits are refused at start with a
`ConfigError` naming the key (`odradek serve` exits 2).

TLS and SASL: listeners may be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. The `ssl.*` keys of
security/ssl_config.py (and their `listener.name.<listener>.ssl.*` overrides) are loaded at start
for every SSL / SASL_SSL listener (`listener_ssl`: its contexts; an unreadable key store is a
ConfigError naming the key); the SASL settings of SASL listeners are read by
server/sasl_listener.py. `security.inter.broker.protocol` (any of the four) picks the
inter-broker listener when `inter.broker.listener.name` is not set (setting both is refused, as
in Kafka); `inter_broker_ssl` is that listener's TLS, which the broker's own connections use.

Connection limits (read by server/limits.py and server/socket_server.py): `max.connections`,
`max.connections.per.ip`, `max.connections.per.ip.overrides` (`host:count,...`),
`max.connection.creation.rate`, `connections.max.idle.ms` (negative: never), `queued.max.request.bytes`
(-1 or 0: unbounded; otherwise at least socket.request.max.bytes, as Kafka requires).
`http.listeners` (an odradek key, `http://host:port,...`, empty by default: none) names where the
broker serves HTTP (Prometheus `/metrics` and the web console, server/console_host.py; `https://`
entries with the `ssl.*` keys of the listener name `HTTPS`).
`request.timeout.ms` (default 30000) is, as in Kafka, the timeout of the broker's own requests to
the controller (AlterPartition, ControlledShutdown: server/to_controller.py); WriteTxnMarkers waits
for its markers' replication up to it.

Deliberate deviations from Kafka's code defaults, taken from Kafka's shipped single-node
`config/server.properties` so that `odradek serve` with no arguments is a working single broker:
`broker.id` 0 (Kafka: -1), `listeners` PLAINTEXT://127.0.0.1:9092, `log.dir` the user's state dir
($XDG_STATE_HOME/odradek/data, else ~/.local/state/odradek/data; Kafka: /tmp/kafka-logs),
`offsets.topic.replication.factor`, `transaction.state.log.replication.factor` and
`transaction.state.log.min.isr` 1 (Kafka: 3, 3, 2), `share.coordinator.state.topic.replication.factor`
and `share.coordinator.state.topic.min.isr` 1 (Kafka: 3, 2), `group.initial.rebalance.delay.ms` 0
(Kafka: 3000).
`cluster.id` is an odradek key: when set it must match
the id in meta.properties; when absent the id stored there (or a new random one) is used.
`broker.id.generation.enable` defaults to false (Kafka: true) and true is refused: broker ids are
always configured.

ZooKeeper mode: `zookeeper.connect` (checked as `host:port[,host:port...][/chroot]`),
`zookeeper.session.timeout.ms`, `zookeeper.connection.timeout.ms` (else the session timeout),
`inter.broker.listener.name` (must name a listener; else the first listener speaking
security.inter.broker.protocol), and the
controlled shutdown's `controlled.shutdown.enable`, `controlled.shutdown.max.retries`,
`controlled.shutdown.retry.backoff.ms` (Kafka's defaults: true, 3, 5000).

Dynamic broker configs (Kafka's DynamicBrokerConfig): `with_dynamic(cluster_default, per_broker)`
returns a config whose values are, per key, the per-broker dynamic value, else the cluster-wide
dynamic default, else the static value (server.properties / overrides), else the code default;
everything derived (topic defaults, `log_config`, `cleaner_config`) follows. Only `DYNAMIC_KEYS` may
be dynamic: the primary broker synonym of every topic config (log.retention.ms, not
log.retention.hours: Kafka's rule), the log cleaner's threads / dedupe buffer / load factor /
backoff, max.connections, max.connections.per.ip, max.connections.per.ip.overrides (all cluster-wide
in Kafka), and the replication throttles leader.replication.throttled.rate,
follower.replication.throttled.rate and replica.alter.log.dirs.io.max.bytes.per.second (bytes/s,
per broker or cluster-wide). `describe()` reports each
key's source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG) and its synonyms in Kafka's order (level first: per-broker, cluster default, static;
then each synonym name; the code default last). Deprecated configs Kafka 3.x still accepts (topic
`message.format.version`, broker `log.message.format.version`) are accepted and ignored
(`without_deprecated` logs each).

Callers: cli (builds it), broker and everything the broker wires (reads it).
"""

from __future__ import annotations

import copy
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.security.authorizer import AUTHORIZER_CLASS_NAMES
from odradek.security.ssl_config import (
    SSL_KEYS,
    TLS_SECURITY_PROTOCOLS,
    ListenerSsl,
    SslConfigError,
    listener_ssl,
)
from odradek.storage.cleaner import CleanerConfig
from odradek.storage.config import TOPIC_CONFIG_NAMES, LogConfig

log = logging.getLogger(__name__)

# The security protocols of the listeners odradek serves.
SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value Kafka would refuse; the message names the offending key."""

    MESSAGE = "Invalid value {value!r} for configuration {key}: {reason}"

    def __init__(self, key: str, value: object, reason: str = "") -> None:
        super().__init__(self.MESSAGE.format(key=key, value=value, reason=reason))
        self.key = key
        self.value = value


class UnknownTopicConfigError(ConfigError):
    """A topic config name Kafka does not know, said in Kafka's words (its INVALID_CONFIG message)."""

    MESSAGE = "Unknown topic config name: {key}"


class ConfigType(Enum):
    """Kafka's ConfigDef types, as DescribeConfigs v3+ reports them (config_type)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(Enum):
    """DescribeConfigs config_source values."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


Validator = Callable[[str, Any], None]


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One known broker config: Kafka's name, type, default (None = no default) and validator."""

    name: str
    type: ConfigType
    default: object
    validator: Validator | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One place a config's value may come from, highest precedence first in a `ConfigEntry`."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """A broker or topic config as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    config_type: ConfigType
    synonyms: tuple[ConfigSynonym, ...]


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry of listeners / advertised.listeners."""

    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


# ---------------------------------------------------------------------------------------------------
# validators


def at_least(minimum: int | float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(key, value, f"Value must be at least {minimum}")

    return check


def between(minimum: int | float, maximum: int | float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and not minimum <= value <= maximum:
            raise ConfigError(key, value, f"Value must be between {minimum} and {maximum}")

    return check


def one_of(*allowed: str) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value not in allowed:
            raise ConfigError(key, value, f"String must be one of: {', '.join(allowed)}")

    return check


def _migration_policy(key: str, value: Any) -> None:
    """group.consumer.migration.policy: Kafka's values, any case (CaseInsensitiveValidString)."""
    if value is not None and str(value).lower() not in ("bidirectional", "upgrade", "downgrade", "disabled"):
        raise ConfigError(
            key,
            value,
            "String must be one of (case insensitive): BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED",
        )


def each_of(*allowed: str) -> Validator:
    def check(key: str, value: Any) -> None:
        for item in value or []:
            if item not in allowed:
                raise ConfigError(key, value, f"Each item must be one of: {', '.join(allowed)}")

    return check


def _listeners_validator(key: str, value: Any) -> None:
    if value is not None:
        _parse_endpoints(key, value)


_HTTP_LISTENER_RE = re.compile(r"^(https?)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]/]*):(\d+)/?$")


HTTPS_LISTENER = "HTTPS"  # the listener name of http.listeners' https:// entries, for their ssl.* keys


class HttpEndpoint(NamedTuple):
    """One `http.listeners` entry: where to bind, and whether it speaks HTTPS (TLS with the `ssl.*`
    configs of the listener name `HTTPS`, prefixed `listener.name.https.` or not)."""

    host: str
    port: int
    tls: bool = False


def parse_http_listeners(value: str) -> list[HttpEndpoint]:
    """`http.listeners`: `http://host:port,https://host:port,...` (IPv6 in brackets; empty host:
    every interface; port 0: any free port). Raises ConfigError naming the key."""
    key = "http.listeners"
    endpoints: list[HttpEndpoint] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        match = _HTTP_LISTENER_RE.match(item)
        if match is None:
            raise ConfigError(key, value, f"malformed listener {item!r}, expected http(s)://host:port")
        scheme, host, port = match.group(1), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(key, value, f"port {port} of listener {item!r} is out of range 0-65535")
        if any((e.host, e.port) == (host, port) for e in endpoints):
            raise ConfigError(key, value, f"listener {item!r} repeats")
        endpoints.append(HttpEndpoint(host, port, scheme == "https"))
    return endpoints


def _http_listeners_validator(key: str, value: Any) -> None:
    parse_http_listeners(str(value or ""))


def parse_connection_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,...` (a host name or an IP; IPv6 may be in
    brackets). Raises ConfigError naming the key."""
    key = "max.connections.per.ip.overrides"
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(key, value, f"malformed entry {item!r}, expected host:count")
        overrides[host] = int(count)
    return overrides


def _overrides_validator(key: str, value: Any) -> None:
    parse_connection_overrides(str(value or ""))


# ---------------------------------------------------------------------------------------------------
# the known keys

_B, _S, _I, _SH, _L, _D, _LS = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# group.consumer.assignors: the built-in assignors by name or by Kafka's class name
_CONSUMER_ASSIGNORS = (
    "uniform",
    "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
)


def default_log_dir() -> str:
    """The data dir used when neither log.dirs nor log.dir is given: the user's state dir."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "odradek", "data")


CONFIG_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        # broker identity and cluster
        ConfigKey("broker.id", _I, 0, at_least(-1)),
        ConfigKey("cluster.id", _S, None),
        ConfigKey("broker.rack", _S, None),
        ConfigKey("zookeeper.connect", _S, None),
        ConfigKey("zookeeper.session.timeout.ms", _I, 18000, at_least(1)),
        ConfigKey("zookeeper.connection.timeout.ms", _I, None, at_least(1)),
        ConfigKey("broker.id.generation.enable", _B, False),
        ConfigKey("inter.broker.listener.name", _S, None),
        ConfigKey("security.inter.broker.protocol", _S, "PLAINTEXT", one_of(*SERVED_PROTOCOLS)),
        ConfigKey("reserved.broker.max.id", _I, 1000, at_least(0)),
        ConfigKey("delete.topic.enable", _B, True),
        ConfigKey("auto.create.topics.enable", _B, True),
        ConfigKey("controlled.shutdown.enable", _B, True),
        ConfigKey("controlled.shutdown.max.retries", _I, 3),
        ConfigKey("controlled.shutdown.retry.backoff.ms", _L, 5000),
        # network
        ConfigKey("listeners", _S, "PLAINTEXT://127.0.0.1:9092", _listeners_validator),
        ConfigKey("advertised.listeners", _S, None, _listeners_validator),
        ConfigKey(
            "listener.security.protocol.map",
            _S,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        ),
        ConfigKey("socket.request.max.bytes", _I, 104857600, at_least(1)),
        ConfigKey("queued.max.requests", _I, 500, at_least(1)),
        ConfigKey("queued.max.request.bytes", _L, -1),
        ConfigKey("connections.max.idle.ms", _L, 600000),
        ConfigKey("max.connections", _I, INT_MAX, at_least(0)),
        ConfigKey("max.connections.per.ip", _I, INT_MAX, at_least(0)),
        ConfigKey("max.connections.per.ip.overrides", _S, "", _overrides_validator),
        ConfigKey("max.connection.creation.rate", _I, INT_MAX, at_least(0)),
        # SASL: per-listener and per-mechanism overrides are read by server/sasl_listener.py
        ConfigKey("sasl.enabled.mechanisms", _LS, ["GSSAPI"]),
        ConfigKey("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI"),
        ConfigKey("connections.max.reauth.ms", _L, 0, at_least(0)),
        ConfigKey("connection.failed.authentication.delay.ms", _I, 100, at_least(0)),
        ConfigKey("sasl.server.max.receive.size", _I, 524288, at_least(1)),
        # client quotas (KIP-219): server/client_quotas.py
        ConfigKey("quota.window.num", _I, 11, at_least(1)),
        ConfigKey("quota.window.size.seconds", _I, 1, at_least(1)),
        # replication throttles (KIP-73): replication/quotas.py
        ConfigKey("leader.replication.throttled.rate", _L, LONG_MAX, at_least(0)),
        ConfigKey("follower.replication.throttled.rate", _L, LONG_MAX, at_least(0)),
        # moves between log dirs (KIP-113): replication/alter_log_dirs.py
        ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", _L, LONG_MAX, at_least(0)),
        ConfigKey("request.timeout.ms", _I, 30000, at_least(0)),
        # odradek's HTTP listeners (Prometheus /metrics and the web console): console/web.py; empty = none
        ConfigKey("http.listeners", _S, "", _http_listeners_validator),
        # the web console (odradek's own; docs/console.md): who may use it and as whom it reads
        ConfigKey("console.authentication", _S, "none", one_of("none", "sasl")),
        ConfigKey("console.sasl.mechanism", _S, "PLAIN", one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        ConfigKey("console.listener.name", _S, None),
        ConfigKey("console.read.only", _S, "", one_of("", "true", "false")),
        ConfigKey("console.session.timeout.ms", _I, 1800000, at_least(1000)),
        ConfigKey("console.metrics.sample.ms", _I, 10000, at_least(100)),
        # logs
        ConfigKey("log.dirs", _LS, None),
        ConfigKey("log.dir", _S, None),
        ConfigKey("num.partitions", _I, 1, at_least(1)),
        ConfigKey("default.replication.factor", _I, 1, at_least(1)),
        ConfigKey("max.broker.partitions", _I, 10000, at_least(1)),
        # the scheduler's lanes (odradek/scheduler.py): partition loading (the larger of num.io.threads
        # and the recovery threads of all log dirs), the heavy parts of requests (num.io.threads),
        # flushes, checkpoints and retention (background.threads); see broker.lane_threads
        ConfigKey("num.io.threads", _I, 8, at_least(1)),
        ConfigKey("num.recovery.threads.per.data.dir", _I, 1, at_least(1)),
        ConfigKey("background.threads", _I, 10, at_least(1)),
        ConfigKey("log.segment.bytes", _I, 1073741824, at_least(14)),
        ConfigKey("log.roll.ms", _L, None, at_least(1)),
        ConfigKey("log.roll.hours", _I, 168, at_least(1)),
        ConfigKey("log.roll.jitter.ms", _L, None, at_least(0)),
        ConfigKey("log.roll.jitter.hours", _I, 0, at_least(0)),
        ConfigKey("log.retention.ms", _L, None),
        ConfigKey("log.retention.minutes", _I, None),
        ConfigKey("log.retention.hours", _I, 168),
        ConfigKey("log.retention.bytes", _L, -1),
        ConfigKey("log.retention.check.interval.ms", _L, 300000, at_least(1)),
        ConfigKey("log.index.interval.bytes", _I, 4096, at_least(0)),
        ConfigKey("log.index.size.max.bytes", _I, 10485760, at_least(4)),
        ConfigKey("log.flush.interval.messages", _L, LONG_MAX, at_least(1)),
        ConfigKey("log.flush.interval.ms", _L, None),
        ConfigKey("log.flush.scheduler.interval.ms", _L, LONG_MAX),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", _I, 60000, at_least(0)),
        ConfigKey("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, at_least(0)),
        ConfigKey("log.segment.delete.delay.ms", _L, 60000, at_least(0)),
        ConfigKey("log.preallocate", _B, False),
        ConfigKey("log.cleanup.policy", _LS, ["delete"], each_of("delete", "compact")),
        ConfigKey("log.cleaner.enable", _B, True),
        ConfigKey("log.cleaner.threads", _I, 1, at_least(0)),
        ConfigKey("log.cleaner.dedupe.buffer.size", _L, 134217728, at_least(0)),
        ConfigKey("log.cleaner.io.buffer.load.factor", _D, 0.9, between(0.0, 1.0)),
        ConfigKey("log.cleaner.io.buffer.size", _I, 524288, at_least(0)),
        ConfigKey("log.cleaner.backoff.ms", _L, 15000, at_least(0)),
        ConfigKey("log.cleaner.min.cleanable.ratio", _D, 0.5, between(0.0, 1.0)),
        ConfigKey("log.cleaner.delete.retention.ms", _L, 86400000, at_least(0)),
        ConfigKey("log.cleaner.min.compaction.lag.ms", _L, 0, at_least(0)),
        ConfigKey("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, at_least(1)),
        ConfigKey("message.max.bytes", _I, 1048588, at_least(0)),
        ConfigKey("log.message.timestamp.type", _S, "CreateTime", one_of(*_TIMESTAMP_TYPES)),
        ConfigKey("log.message.timestamp.difference.max.ms", _L, LONG_MAX, at_least(0)),
        ConfigKey("log.message.timestamp.before.max.ms", _L, LONG_MAX, at_least(0)),
        ConfigKey("log.message.timestamp.after.max.ms", _L, LONG_MAX, at_least(0)),
        ConfigKey("log.message.downconversion.enable", _B, True),
        ConfigKey("compression.type", _S, "producer", one_of(*_COMPRESSION)),
        ConfigKey("compression.gzip.level", _I, -1, between(-1, 9)),
        ConfigKey("compression.lz4.level", _I, 9, between(1, 17)),
        ConfigKey("compression.zstd.level", _I, 3, between(-131072, 22)),
        ConfigKey("log.local.retention.ms", _L, -2, at_least(-2)),
        ConfigKey("log.local.retention.bytes", _L, -2, at_least(-2)),
        # replication
        ConfigKey("min.insync.replicas", _I, 1, at_least(1)),
        ConfigKey("unclean.leader.election.enable", _B, False),
        ConfigKey("replica.lag.time.max.ms", _L, 30000),
        ConfigKey("replica.fetch.max.bytes", _I, 1048576, at_least(0)),
        ConfigKey("replica.fetch.min.bytes", _I, 1),
        ConfigKey("replica.fetch.wait.max.ms", _I, 500),
        ConfigKey("replica.fetch.backoff.ms", _I, 1000, at_least(0)),
        ConfigKey("replica.fetch.response.max.bytes", _I, 10485760, at_least(0)),
        ConfigKey("replica.high.watermark.checkpoint.interval.ms", _L, 5000),
        ConfigKey("replica.socket.timeout.ms", _I, 30000),
        ConfigKey("num.replica.fetchers", _I, 1),
        ConfigKey("controller.socket.timeout.ms", _I, 30000),
        ConfigKey("auto.leader.rebalance.enable", _B, True),
        ConfigKey("leader.imbalance.check.interval.seconds", _L, 300, at_least(1)),
        ConfigKey("leader.imbalance.per.broker.percentage", _I, 10, at_least(0)),
        ConfigKey("fetch.max.bytes", _I, 57671680, at_least(1024)),
        ConfigKey("max.incremental.fetch.session.cache.slots", _I, 1000, at_least(0)),
        # the most partitions one DescribeTopicPartitions response holds
        ConfigKey("max.request.partition.size.limit", _I, 2000, at_least(1)),
        # group coordinator and offsets
        ConfigKey("offsets.topic.num.partitions", _I, 50, at_least(1)),
        ConfigKey("offsets.topic.replication.factor", _SH, 1, at_least(1)),
        ConfigKey("offsets.topic.segment.bytes", _I, 104857600, at_least(1)),
        ConfigKey("offsets.topic.compression.codec", _I, 0),
        ConfigKey("offsets.retention.minutes", _I, 10080, at_least(1)),
        ConfigKey("offsets.retention.check.interval.ms", _L, 600000, at_least(1)),
        ConfigKey("offsets.commit.timeout.ms", _I, 5000, at_least(1)),
        ConfigKey("offsets.load.buffer.size", _I, 5242880, at_least(1)),
        ConfigKey("offset.metadata.max.bytes", _I, 4096),
        ConfigKey("group.initial.rebalance.delay.ms", _I, 0),
        ConfigKey("group.min.session.timeout.ms", _I, 6000),
        ConfigKey("group.max.session.timeout.ms", _I, 1800000),
        ConfigKey("group.max.size", _I, INT_MAX, at_least(1)),
        # consumer-protocol groups (KIP-848): coordinator/consumer_group.py
        ConfigKey("group.consumer.session.timeout.ms", _I, 45000, at_least(1)),
        ConfigKey("group.consumer.min.session.timeout.ms", _I, 45000, at_least(1)),
        ConfigKey("group.consumer.max.session.timeout.ms", _I, 60000, at_least(1)),
        ConfigKey("group.consumer.heartbeat.interval.ms", _I, 5000, at_least(1)),
        ConfigKey("group.consumer.min.heartbeat.interval.ms", _I, 5000, at_least(1)),
        ConfigKey("group.consumer.max.heartbeat.interval.ms", _I, 15000, at_least(1)),
        ConfigKey("group.consumer.max.size", _I, INT_MAX, at_least(1)),
        ConfigKey("group.consumer.assignors", _LS, ["uniform", "range"], each_of(*_CONSUMER_ASSIGNORS)),
        # online migration between classic and consumer groups: coordinator/migration.py
        ConfigKey("group.consumer.migration.policy", _S, "bidirectional", _migration_policy),
        # transactions and producer ids
        ConfigKey("transaction.state.log.replication.factor", _SH, 1, at_least(1)),
        ConfigKey("transaction.state.log.min.isr", _I, 1, at_least(1)),
        ConfigKey("transaction.state.log.num.partitions", _I, 50, at_least(1)),
        ConfigKey("transaction.state.log.segment.bytes", _I, 104857600, at_least(1)),
        ConfigKey("transaction.max.timeout.ms", _I, 900000, at_least(1)),
        ConfigKey("transactional.id.expiration.ms", _I, 604800000, at_least(1)),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, at_least(1)),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3600000, at_least(1)),
        # share groups (KIP-932): partition leaders' share-partitions and the share coordinator
        ConfigKey("group.share.record.lock.duration.ms", _I, 30000, between(1000, 3600000)),
        ConfigKey("group.share.session.timeout.ms", _I, 45000, at_least(1)),
        ConfigKey("group.share.min.session.timeout.ms", _I, 45000, at_least(1)),
        ConfigKey("group.share.max.session.timeout.ms", _I, 60000, at_least(1)),
        ConfigKey("group.share.heartbeat.interval.ms", _I, 5000, at_least(1)),
        ConfigKey("group.share.min.heartbeat.interval.ms", _I, 5000, at_least(1)),
        ConfigKey("group.share.max.heartbeat.interval.ms", _I, 15000, at_least(1)),
        ConfigKey("group.share.max.size", _I, 200, between(1, 1000)),
        ConfigKey("group.share.assignors", _LS, ["simple"], each_of("simple")),
        ConfigKey("group.share.min.record.lock.duration.ms", _I, 15000, between(1000, 30000)),
        ConfigKey("group.share.max.record.lock.duration.ms", _I, 60000, between(30000, 3600000)),
        ConfigKey("group.share.delivery.count.limit", _I, 5, between(2, 10)),
        ConfigKey("group.share.partition.max.record.locks", _I, 2000, between(100, 10000)),
        ConfigKey("group.share.max.share.sessions", _I, 2000, at_least(1)),
        ConfigKey("share.fetch.max.fetch.records", _I, INT_MAX, at_least(1)),
        ConfigKey("share.coordinator.state.topic.num.partitions", _I, 50, at_least(1)),
        ConfigKey("share.coordinator.state.topic.replication.factor", _SH, 1, at_least(1)),
        ConfigKey("share.coordinator.state.topic.min.isr", _SH, 1, at_least(1)),
        ConfigKey("share.coordinator.state.topic.segment.bytes", _I, 104857600, at_least(1)),
        ConfigKey("share.coordinator.snapshot.update.records.per.snapshot", _I, 500, at_least(0)),
        ConfigKey("share.coordinator.write.timeout.ms", _I, 5000, at_least(1)),
        ConfigKey("share.coordinator.load.buffer.size", _I, 5242880, at_least(1)),
        ConfigKey("producer.id.expiration.ms", _I, 86400000, at_least(1)),
        ConfigKey("transaction.partition.verification.enable", _B, True),
        # authorization: security/acl_authorizer.py (empty class name: every request is allowed)
        ConfigKey("authorizer.class.name", _S, "", one_of("", *AUTHORIZER_CLASS_NAMES)),
        ConfigKey("super.users", _S, None),
        ConfigKey("allow.everyone.if.no.acl.found", _B, False),
    ]
}

# Kafka configs accepted and ignored: odradek has no network threads, socket tuning, metrics, SSL, SASL
# or quotas (yet); a server.properties written for Kafka must still start.
IGNORED_KEYS = frozenset(
    {
        "num.network.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.listen.backlog.size",
        "inter.broker.protocol.version",
        "control.plane.listener.name",
        "log.message.format.version",
        "log.cleaner.io.max.bytes.per.second",
        "fetch.purgatory.purge.interval.requests",
        "producer.purgatory.purge.interval.requests",
        "delete.records.purgatory.purge.interval.requests",
        "zookeeper.max.in.flight.requests",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "remote.log.storage.system.enable",
        "group.coordinator.rebalance.protocols",
    }
)
# Prefixes of keys accepted and ignored once `refuse_unprovided_protections` has let them through: an
# ssl./sasl. key there holds Kafka's default, which asks for nothing.
IGNORED_PREFIXES = ("ssl.", "sasl.", "listener.name.", "metrics.", "zookeeper.ssl.", "confluent.")

# Keys that ask for a protection odradek does not provide (authorization, authentication, encryption).
# A broker that ignored them would let every client do everything, so any non-empty value is refused
# at start, naming the key.
PROTECTION_KEYS = frozenset(
    {
        "principal.builder.class",
        "delegation.token.secret.key",
        "delegation.token.master.key",
    }
)
# Key families that configure TLS or SASL: refused unless the value is Kafka's default (which asks
# for nothing), listed here. A key of these families not listed is refused whenever it is non-empty.
PROTECTION_PREFIXES = ("ssl.", "sasl.", "zookeeper.ssl.")
PROTECTION_DEFAULTS: dict[str, str] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.trustmanager.algorithm": "PKIX",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.client.auth": "none",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.allow.dn.changes": "false",
    "ssl.allow.san.changes": "false",
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
    "sasl.kerberos.min.time.before.relogin": "60000",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.kerberos.ticket.renew.jitter": "0.05",
    "sasl.kerberos.ticket.renew.window.factor": "0.8",
    "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.refresh.min.period.seconds": "60",
    "sasl.login.refresh.window.factor": "0.8",
    "sasl.login.refresh.window.jitter": "0.05",
    "sasl.login.retry.backoff.max.ms": "10000",
    "sasl.login.retry.backoff.ms": "100",
    "zookeeper.ssl.client.enable": "false",
    "zookeeper.ssl.protocol": "TLSv1.2",
    "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS",
    "zookeeper.ssl.crl.enable": "false",
    "zookeeper.ssl.ocsp.enable": "false",
}
# Keys with one value that asks for nothing (Kafka's default); any other value is refused.
PROTECTION_ONLY_VALUE: dict[str, str] = {
    "zookeeper.set.acl": "false",
}
# Per-listener overrides (listener.name.<listener>.<key>) of limits odradek applies broker-wide only.
PER_LISTENER_LIMITS = frozenset({"max.connections", "max.connection.creation.rate"})

# Topic config -> its broker-level synonyms, highest precedence first (Kafka's ServerTopicConfigSynonyms).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
}

# Broker configs a BROKER resource's AlterConfigs may change, applied live by every broker: the
# primary synonym of each topic config (a default for topics without an override), the log cleaner's
# pool settings and the connection limits the listeners check on accept.
DYNAMIC_KEYS = frozenset(synonyms[0] for synonyms in TOPIC_CONFIG_SYNONYMS.values()) | frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.backoff.ms",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)

# Deprecated configs Kafka 3.x still accepts and ignores (the message format follows the version).
DEPRECATED_TOPIC_CONFIGS = frozenset({"message.format.version"})
DEPRECATED_BROKER_CONFIGS = frozenset({"log.message.format.version"})

# Topic configs without a broker-level synonym, with Kafka's defaults.
TOPIC_ONLY_DEFAULTS: dict[str, str] = {
    "remote.storage.enable": "false",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
}

# Unit multipliers of the broker synonyms whose topic config is in ms.
_MS_UNITS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


# ---------------------------------------------------------------------------------------------------
# parsing


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterator[str]:
    """Join `\\`-continued lines (odd count of trailing backslashes), dropping continuation indent."""
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw
        if not pending and (not line.strip() or line.lstrip()[:1] in ("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield "".join(pending)
        pending = []
    if pending:
        yield "".join(pending)


def _split_key_value(line: str) -> tuple[str, str]:
    line = line.lstrip()
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text into a dict (later keys win, as in java.util.Properties)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        if key:
            props[key] = value
    return props


def parse_override(text: str) -> tuple[str, str]:
    """Parse one `--override key=value` argument."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(text, text, "an override must be written key=value")
    return key, value.strip()


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]/]*):(-?\d+)$")


def parse_listeners(key: str, value: str, protocol_map: Mapping[str, str] | None = None) -> list[Listener]:
    """Parse `NAME://host:port,...`; names must be unique and mapped to a security protocol."""
    protocol_map = protocol_map or parse_protocol_map(CONFIG_KEYS["listener.security.protocol.map"].default)
    listeners: list[Listener] = []
    for name, host, port in _parse_endpoints(key, value):
        if name not in protocol_map:
            raise ConfigError(key, value, f"no security protocol defined for listener {name}")
        listeners.append(Listener(name, host, port, protocol_map[name]))
    return listeners


def _parse_endpoints(key: str, value: str) -> list[tuple[str, str, int]]:
    """The syntax of a listener list: unique names, valid ports (the protocol map is checked later,
    once every key is known)."""
    endpoints: list[tuple[str, str, int]] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        match = _LISTENER_RE.match(item)
        if match is None:
            raise ConfigError(key, value, f"malformed listener {item!r}, expected NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, value, f"port {port} of listener {item!r} is out of range 0-65535")
        if any(existing[0] == name for existing in endpoints):
            raise ConfigError(key, value, f"each listener must have a different name, {name} repeats")
        endpoints.append((name, host, port))
    return endpoints


def parse_protocol_map(value: object) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in str(value).split(","):
        name, sep, protocol = item.strip().partition(":")
        if item.strip() and (not sep or not name or not protocol):
            raise ConfigError("listener.security.protocol.map", value, f"malformed entry {item!r}")
        if item.strip():
            result[name.strip().upper()] = protocol.strip().upper()
    return result


_INT_WIDTHS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def _parse_int(key: ConfigKey, text: str) -> int:
    bits = _INT_WIDTHS[key.type]
    try:
        number = int(text.strip())
    except ValueError:
        raise ConfigError(key.name, text, f"Expected value to be a {bits}-bit integer") from None
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise ConfigError(key.name, text, f"out of range for a {bits}-bit integer")
    return number


def convert(key: ConfigKey, text: str) -> object:
    """Convert a properties string to the key's type (raising ConfigError naming the key)."""
    match key.type:
        case ConfigType.INT | ConfigType.SHORT | ConfigType.LONG:
            return _parse_int(key, text)
        case ConfigType.BOOLEAN:
            lowered = text.strip().lower()
            if lowered not in ("true", "false"):
                raise ConfigError(key.name, text, "Expected value to be either true or false")
            return lowered == "true"
        case ConfigType.DOUBLE:
            try:
                return float(text.strip())
            except ValueError:
                raise ConfigError(key.name, text, "Expected value to be a double number") from None
        case ConfigType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
        case _:
            return text.strip()


def format_value(value: object) -> str | None:
    """Render a typed value the way Kafka shows it in DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


# ---------------------------------------------------------------------------------------------------
# the config


def without_deprecated(configs: Mapping[str, str], deprecated: frozenset[str], owner: str) -> dict[str, str]:
    """`configs` without the deprecated keys Kafka still accepts, logging each one dropped."""
    for name in sorted(configs.keys() & deprecated):
        log.info("Config %s of %s is deprecated and ignored (value %r)", name, owner, configs[name])
    return {name: value for name, value in configs.items() if name not in deprecated}


def _dynamic_value(name: str, raw: str) -> object:
    """A dynamic config's typed, validated value (ConfigError when the key is not dynamic)."""
    if name not in DYNAMIC_KEYS:
        raise ConfigError(name, raw, "cannot be updated dynamically")
    key = CONFIG_KEYS[name]
    value = convert(key, raw)
    if key.validator is not None:
        key.validator(name, value)
    return value


class KafkaConfig:
    """Validated broker configuration. Read values by Kafka name: `config["num.partitions"]`."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.originals: dict[str, str] = dict(props or {})
        self.unknown_keys: list[str] = []
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._values: dict[str, Any] = {}
        refuse_unprovided_protections(self.originals)
        refuse_static_quota_defaults(self.originals)
        for name, key in CONFIG_KEYS.items():
            raw = self.originals.get(name)
            value = key.default if raw is None else convert(key, raw)
            if key.validator is not None:
                key.validator(name, value)
            self._values[name] = value
        for name in self.originals:
            if name not in CONFIG_KEYS and not _is_ignored(name):
                self.unknown_keys.append(name)
                log.warning("Unknown configuration %r was supplied and is ignored", name)
        self._protocol_map = parse_protocol_map(self._values["listener.security.protocol.map"])
        self.listeners = self._bound_listeners()
        self.advertised_listeners = self._advertised()
        self.listener_ssl = self._listener_ssl()
        self._validate_cross_key()
        self._static_values = self._values

    def with_dynamic(self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]) -> KafkaConfig:
        """This config's static values under these dynamic layers (per-broker over cluster-wide
        default); ConfigError names a key that is not dynamic or a bad value."""
        layered = copy.copy(self)
        layered.dynamic_default, layered.dynamic_broker = dict(cluster_default), dict(per_broker)
        layered._values = dict(self._static_values)
        for layer in (cluster_default, per_broker):
            for name, raw in layer.items():
                layered._values[name] = _dynamic_value(name, raw)
        layered._validate_cross_key()
        return layered

    @classmethod
    def from_sources(
        cls, config_file: str | os.PathLike[str] | None, overrides: Iterable[str]
    ) -> KafkaConfig:
        """A config from an optional server.properties file, then `key=value` overrides on top."""
        props: dict[str, str] = {}
        if config_file is not None:
            props.update(parse_properties(Path(config_file).read_text(encoding="utf-8")))
        props.update(parse_override(item) for item in overrides)
        return cls(props)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def is_set(self, name: str) -> bool:
        """Whether the key was given explicitly (file or override) rather than defaulted."""
        return name in self.originals

    def _listeners(self, key: str) -> list[Listener]:
        listeners = parse_listeners(key, str(self._values[key]), self._protocol_map)
        if not listeners:
            raise ConfigError(key, self._values[key], "at least one listener is required")
        for listener in listeners:
            if listener.security_protocol not in SERVED_PROTOCOLS:
                raise ConfigError(
                    key,
                    self._values[key],
                    f"listener {listener.name} uses security protocol {listener.security_protocol}: "
                    f"odradek serves only {', '.join(SERVED_PROTOCOLS)} listeners",
                )
        return listeners

    def _bound_listeners(self) -> list[Listener]:
        """`listeners`, each on a port of its own (port 0: any free port)."""
        listeners = self._listeners("listeners")
        ports = [listener.port for listener in listeners if listener.port != 0]
        if len(ports) != len(set(ports)):
            raise ConfigError(
                "listeners", self._values["listeners"], "each listener must have a different port"
            )
        return listeners

    def _advertised(self) -> list[Listener]:
        if self._values["advertised.listeners"] is None:
            return list(self.listeners)
        advertised = self._listeners("advertised.listeners")
        names = {listener.name for listener in self.listeners}
        for listener in advertised:
            if listener.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    "advertised.listeners", str(listener), "0.0.0.0 / :: is not a valid advertised host"
                )
            if listener.name not in names:
                raise ConfigError(
                    "advertised.listeners",
                    str(listener),
                    "advertised.listeners listener names must be equal to or a subset of the ones defined "
                    "in listeners",
                )
        return advertised

    def _validate_consumer_group_keys(self) -> None:
        """Kafka's GroupCoordinatorConfig checks of the consumer-protocol group settings."""
        prefix = "group.consumer."
        for kind in ("session.timeout.ms", "heartbeat.interval.ms"):
            value = self[prefix + kind]
            low, high = self[f"{prefix}min.{kind}"], self[f"{prefix}max.{kind}"]
            if low > high:
                raise ConfigError(f"{prefix}min.{kind}", low, f"must not exceed {prefix}max.{kind}")
            if not low <= value <= high:
                raise ConfigError(
                    prefix + kind, value, f"must be between {prefix}min.{kind} and {prefix}max.{kind}"
                )
        heartbeat, session = self[prefix + "heartbeat.interval.ms"], self[prefix + "session.timeout.ms"]
        if heartbeat >= session:
            raise ConfigError(
                prefix + "heartbeat.interval.ms", heartbeat, f"must be less than {prefix}session.timeout.ms"
            )
        if not self[prefix + "assignors"]:
            raise ConfigError(prefix + "assignors", "", "at least one assignor is required")

    def _validate_share_group_keys(self) -> None:
        """Kafka's ShareGroupConfig checks: the record lock duration, session timeout and heartbeat
        interval each within its min and max."""
        prefix = "group.share."
        for kind in ("session.timeout.ms", "heartbeat.interval.ms"):
            value, low, high = self[prefix + kind], self[f"{prefix}min.{kind}"], self[f"{prefix}max.{kind}"]
            if not low <= value <= high:
                raise ConfigError(
                    prefix + kind, value, f"must be between {prefix}min.{kind} and {prefix}max.{kind}"
                )
        value = self[prefix + "record.lock.duration.ms"]
        low, high = self[prefix + "min.record.lock.duration.ms"], self[prefix + "max.record.lock.duration.ms"]
        if not low <= value <= high:
            raise ConfigError(
                prefix + "record.lock.duration.ms",
                value,
                f"must be between {prefix}min.record.lock.duration.ms and its max",
            )

    def _validate_cross_key(self) -> None:
        self._validate_cluster_keys()
        if self.broker_id < 0:
            raise ConfigError("broker.id", self.broker_id, "broker.id generation is not supported, set >= 0")
        if self.broker_id > self["reserved.broker.max.id"]:
            raise ConfigError("broker.id", self.broker_id, "Value must be at most reserved.broker.max.id")
        min_session, max_session = self["group.min.session.timeout.ms"], self["group.max.session.timeout.ms"]
        if min_session > max_session:
            raise ConfigError("group.min.session.timeout.ms", min_session, "must not exceed the max")
        self._validate_consumer_group_keys()
        self._validate_share_group_keys()
        if not self.log_dirs:
            raise ConfigError("log.dirs", self._values["log.dirs"], "at least one log directory is required")
        queued_bytes = self["queued.max.request.bytes"]
        if 0 < queued_bytes < self.socket_request_max_bytes:
            raise ConfigError(
                "queued.max.request.bytes", queued_bytes, "must be -1 or at least socket.request.max.bytes"
            )
        retention_ms = self.log_retention_ms
        if retention_ms == 0:
            raise ConfigError("log.retention.ms", retention_ms, "Value must be -1 (unlimited) or positive")

    def _validate_cluster_keys(self) -> None:
        """ZooKeeper mode's keys: a parseable zookeeper.connect, an inter-broker listener that exists,
        and no generated broker ids (broker.id.generation.enable: true is refused, the default is
        false where Kafka's is true)."""
        if self._values["broker.id.generation.enable"]:
            raise ConfigError(
                "broker.id.generation.enable", "true", "generated broker ids are not supported: set broker.id"
            )
        connect = self._values["zookeeper.connect"]
        if connect is not None:
            try:
                ZooKeeperConnect.parse(connect)
            except ValueError as exc:
                raise ConfigError("zookeeper.connect", connect, str(exc)) from None
        name = self._values["inter.broker.listener.name"]
        if name is not None and name not in {listener.name for listener in self.listeners}:
            raise ConfigError("inter.broker.listener.name", name, "must be the name of one of the listeners")
        protocol = self._values["security.inter.broker.protocol"]
        spoken = {listener.security_protocol for listener in self.listeners}
        if name is None and self.is_set("security.inter.broker.protocol") and protocol not in spoken:
            raise ConfigError("security.inter.broker.protocol", protocol, f"no listener speaks {protocol}")
        if name is not None and self.is_set("security.inter.broker.protocol"):
            raise ConfigError(
                "security.inter.broker.protocol",
                self._values["security.inter.broker.protocol"],
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
            )

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the first listener speaking security.inter.broker.protocol
        (default PLAINTEXT)."""
        name = self._values["inter.broker.listener.name"]
        if name is not None:
            return str(name)
        protocol = self._values["security.inter.broker.protocol"]
        return next((lis.name for lis in self.listeners if lis.security_protocol == protocol), protocol)

    @property
    def inter_broker_ssl(self) -> ListenerSsl | None:
        """The TLS settings of the inter-broker listener (None when it is not SSL / SASL_SSL): this
        broker's client side when it connects to other brokers."""
        return self.listener_ssl.get(self.inter_broker_listener_name)

    def _listener_ssl(self) -> dict[str, ListenerSsl]:
        """The TLS settings of every SSL / SASL_SSL listener, loaded now so that a bad key or an
        unreadable key store stops the start, naming the key."""
        settings = {}
        names = [lis.name for lis in self.listeners if lis.security_protocol in TLS_SECURITY_PROTOCOLS]
        if any(endpoint.tls for endpoint in self.http_listeners):
            names.append(HTTPS_LISTENER)
        for name in names:
            try:
                settings[name] = listener_ssl(self.originals, name)
            except SslConfigError as exc:
                raise ConfigError(exc.key, exc.value, str(exc)) from None
        https = f"listener.name.{HTTPS_LISTENER.lower()}."
        if HTTPS_LISTENER in settings and not any(
            self.originals.get(prefix + key)
            for prefix in (https, "")
            for key in ("ssl.keystore.location", "ssl.keystore.key")
        ):
            raise ConfigError(
                "http.listeners", self._values["http.listeners"], "https needs ssl.keystore.location"
            )
        return settings

    @property
    def http_listeners(self) -> list[HttpEndpoint]:
        """`http.listeners` as endpoints; empty when there is none."""
        return parse_http_listeners(self._values["http.listeners"])

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """zookeeper.connection.timeout.ms, else zookeeper.session.timeout.ms (Kafka's fallback)."""
        value = self._values["zookeeper.connection.timeout.ms"]
        return int(value if value is not None else self._values["zookeeper.session.timeout.ms"])

    # -- derived values Kafka computes --------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def cluster_id(self) -> str | None:
        return self._values["cluster.id"]

    @property
    def zookeeper_connect(self) -> str | None:
        return self._values["zookeeper.connect"]

    @property
    def log_dirs(self) -> list[Path]:
        """`log.dirs`, else `log.dir`, else the user's state dir."""
        dirs = self._values["log.dirs"]
        if dirs is None:
            dirs = [self._values["log.dir"] or default_log_dir()]
        return [Path(os.path.expanduser(d)) for d in dirs]

    @property
    def log_retention_ms(self) -> int:
        """ms wins over minutes over hours; any negative value means unlimited (-1)."""
        ms = self._ms_of("log.retention.ms", "log.retention.minutes", "log.retention.hours")
        return -1 if ms < 0 else ms

    @property
    def log_roll_ms(self) -> int:
        return self._ms_of("log.roll.ms", "log.roll.hours")

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._ms_of("log.roll.jitter.ms", "log.roll.jitter.hours")

    @property
    def log_flush_interval_ms(self) -> int:
        value = self._values["log.flush.interval.ms"]
        return value if value is not None else self._values["log.flush.scheduler.interval.ms"]

    @property
    def socket_request_max_bytes(self) -> int:
        return self._values["socket.request.max.bytes"]

    def _ms_of(self, *synonyms: str) -> int:
        for name in synonyms:
            value = self._values[name]
            if value is not None:
                return value * _MS_UNITS.get(name, 1)
        raise AssertionError(f"no value or default for any of {synonyms}")

    # -- topic-level defaults and DescribeConfigs ---------------------------------------------------

    def topic_config_defaults(self) -> dict[str, str]:
        """Every topic config with the value the broker gives topics without an override."""
        defaults = dict(TOPIC_ONLY_DEFAULTS)
        for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
            defaults[topic_name] = self._topic_value(topic_name, synonyms)
        return defaults

    def _topic_value(self, topic_name: str, synonyms: tuple[str, ...]) -> str:
        if topic_name == "retention.ms":
            return str(self.log_retention_ms)
        if topic_name == "flush.ms":
            return str(self.log_flush_interval_ms)
        if topic_name in ("segment.ms", "segment.jitter.ms"):
            return str(self._ms_of(*synonyms))
        return format_value(self._values[synonyms[0]]) or ""

    def cleaner_config(self) -> CleanerConfig:
        """The log cleaner's settings (log.cleaner.*; the topic-level ones are in `log_config`)."""
        return CleanerConfig(
            enable=self["log.cleaner.enable"],
            threads=self["log.cleaner.threads"],
            dedupe_buffer_size=self["log.cleaner.dedupe.buffer.size"],
            io_buffer_load_factor=self["log.cleaner.io.buffer.load.factor"],
            backoff_ms=self["log.cleaner.backoff.ms"],
        )

    def log_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The LogConfig of a topic: the broker's topic defaults with `overrides` validated and applied."""
        overrides = overrides or {}
        validate_topic_configs(overrides)
        merged = self.topic_config_defaults() | dict(overrides)
        try:
            return LogConfig.from_topic_configs({k: v for k, v in merged.items() if k in TOPIC_CONFIG_NAMES})
        except ValueError as exc:
            key = str(exc).partition(":")[0]
            raise ConfigError(key, merged.get(key), str(exc)) from None

    def describe(self) -> Iterator[ConfigEntry]:
        """The entries of DescribeConfigs for this broker, sorted by name."""
        for name in sorted(CONFIG_KEYS):
            key = CONFIG_KEYS[name]
            default = ConfigSynonym(name, format_value(key.default), ConfigSource.DEFAULT_CONFIG)
            synonyms = (*self._broker_synonyms((name,)), default)
            yield ConfigEntry(
                name=name,
                value=format_value(self._values[name]),
                source=synonyms[0].source,
                is_default=synonyms[0].source is ConfigSource.DEFAULT_CONFIG,
                read_only=name not in DYNAMIC_KEYS,
                sensitive=key.type is ConfigType.PASSWORD,
                config_type=key.type,
                synonyms=synonyms,
            )

    def describe_dynamic_default(self) -> Iterator[ConfigEntry]:
        """The entries of DescribeConfigs for the cluster-wide default (empty resource name): the
        dynamic defaults set, sorted by name."""
        for name in sorted(self.dynamic_default):
            value = _formatted(name, self.dynamic_default[name])
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            yield ConfigEntry(
                name=name,
                value=value,
                source=source,
                is_default=False,
                read_only=False,
                sensitive=False,
                config_type=CONFIG_KEYS[name].type,
                synonyms=(ConfigSynonym(name, value, source),),
            )

    def _broker_synonyms(self, names: tuple[str, ...]) -> list[ConfigSynonym]:
        """The levels setting any of `names`, Kafka's order: per-broker, cluster-wide default, static;
        within a level, `names` in order."""
        levels = (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.originals, ConfigSource.STATIC_BROKER_CONFIG),
        )
        return [
            ConfigSynonym(name, _formatted(name, layer[name]), source)
            for layer, source in levels
            for name in names
            if name in layer
        ]

    def describe_topic(self, overrides: Mapping[str, str]) -> Iterator[ConfigEntry]:
        """The entries of DescribeConfigs for a topic with these overrides, sorted by name."""
        defaults = self.topic_config_defaults()
        for name in sorted(defaults):
            override = overrides.get(name)
            synonyms = self._topic_synonyms(name, override, defaults[name])
            yield ConfigEntry(
                name=name,
                value=defaults[name] if override is None else override,
                source=synonyms[0].source,
                is_default=synonyms[0].source is ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                sensitive=False,
                config_type=topic_config_type(name),
                synonyms=synonyms,
            )

    def _topic_synonyms(self, name: str, override: str | None, default: str) -> tuple[ConfigSynonym, ...]:
        """Topic override, then the broker synonyms set (dynamic or static), then the built-in default."""
        synonyms = [] if override is None else [ConfigSynonym(name, override, ConfigSource.TOPIC_CONFIG)]
        broker_names = TOPIC_CONFIG_SYNONYMS.get(name, ())
        synonyms += self._broker_synonyms(broker_names)
        defaulted = [b for b in broker_names if CONFIG_KEYS[b].default is not None]
        if defaulted:
            builtin = format_value(CONFIG_KEYS[defaulted[0]].default)
            synonyms.append(ConfigSynonym(defaulted[0], builtin, ConfigSource.DEFAULT_CONFIG))
        else:
            synonyms.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
        return tuple(synonyms)


def topic_config_type(name: str) -> ConfigType:
    """A topic config's type: the type of its primary broker synonym."""
    if name in TOPIC_CONFIG_SYNONYMS:
        return CONFIG_KEYS[TOPIC_CONFIG_SYNONYMS[name][0]].type
    return ConfigType.BOOLEAN if name == "remote.storage.enable" else ConfigType.LIST


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """Refuse unknown topic config names and values of the wrong type or range (ConfigError)."""
    for name, raw in configs.items():
        if name in TOPIC_CONFIG_SYNONYMS:
            key = replace(CONFIG_KEYS[TOPIC_CONFIG_SYNONYMS[name][0]], name=name)
            value = convert(key, raw)
            if key.validator is not None:
                key.validator(name, value)
        elif name == "remote.storage.enable":
            if raw.strip().lower() != "false":
                raise ConfigError(name, raw, "remote storage is not enabled on this broker")
        elif name not in TOPIC_ONLY_DEFAULTS and name not in DEPRECATED_TOPIC_CONFIGS:
            raise UnknownTopicConfigError(name, raw)


def _formatted(name: str, raw: str) -> str | None:
    """A set value of a known broker config as DescribeConfigs shows it (typed, then rendered)."""
    return format_value(convert(CONFIG_KEYS[name], raw))


def refuse_unprovided_protections(props: Mapping[str, str]) -> None:
    """Raise ConfigError naming the first key that asks for a protection odradek does not provide
    (ACLs, TLS, SASL, ZooKeeper ACLs or TLS) or a per-listener connection limit; see PROTECTION_KEYS."""
    for name, raw in props.items():
        reason = _unprovided(name, raw.strip())
        if reason is not None:
            raise ConfigError(name, raw, f"{reason}; odradek does not provide it, remove the setting")


# The deprecated static quota defaults, and the dynamic default that replaces each.
STATIC_QUOTA_DEFAULTS = {
    "quota.producer.default": "producer_byte_rate",
    "quota.consumer.default": "consumer_byte_rate",
}


def refuse_static_quota_defaults(props: Mapping[str, str]) -> None:
    """Raise ConfigError for quota.producer.default / quota.consumer.default, naming the dynamic
    default that replaces it (the seeds call them deprecated; odradek has only dynamic quotas)."""
    for name, dynamic in STATIC_QUOTA_DEFAULTS.items():
        if name in props:
            raise ConfigError(
                name,
                props[name],
                f"{name} is deprecated and not supported; set the dynamic default instead: odradek configs "
                f"--bootstrap-server <broker> --alter --add-config {dynamic}=<bytes/s> --entity-type clients "
                "--entity-default",
            )


def _unprovided(name: str, value: str) -> str | None:
    if name in SSL_KEYS:
        return None  # applied by security/ssl_config.py
    if name in CONFIG_KEYS:
        return None
    if name.startswith("listener.name."):
        listener, _, key = name.removeprefix("listener.name.").partition(".")
        if key in PER_LISTENER_LIMITS:
            return f"a per-listener {key} for listener {listener.upper()} asks for a per-listener limit"
        return _unprovided(key, value) if key else None
    if name in PROTECTION_KEYS:
        return f"{name} asks for authentication or authorization" if value else None
    if name in PROTECTION_ONLY_VALUE:
        wanted = PROTECTION_ONLY_VALUE[name]
        return None if value.lower() == wanted.lower() else f"{name} other than {wanted} asks for security"
    if name.startswith(PROTECTION_PREFIXES):
        if _normalized(value) in ("", _normalized(PROTECTION_DEFAULTS.get(name, ""))):
            return None
        return f"{name} configures TLS or SASL"
    return None


def _normalized(value: str) -> str:
    return ",".join(part.strip() for part in value.split(",") if part.strip()).lower()


def is_known_key(name: str) -> bool:
    """Whether Kafka knows `name` as a broker config (odradek applies it or accepts and ignores it)."""
    return name in CONFIG_KEYS or _is_ignored(name)


def _is_ignored(name: str) -> bool:
    return (
        name in IGNORED_KEYS
        or name in PROTECTION_KEYS
        or name in PROTECTION_ONLY_VALUE
        or name.startswith(IGNORED_PREFIXES)
    )
