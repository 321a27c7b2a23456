"""Options of the `odradek` Spark data source and sink, parsed into values.

Owns the option names and their meanings, which are those of Spark's Kafka source and sink so that
existing Spark code ports by renaming the format (docs/spark.md has the table):
- source: `kafka.bootstrap.servers`, exactly one of `subscribe` / `subscribePattern` (a Java regex,
  translated by odradek.spark.java_regex) / `assign`; `startingTimestamp`, then
  `startingOffsetsByTimestamp`, then `startingOffsets` (the first one given wins, as in Spark), and
  the same three for the end; `startingOffsetsByTimestampStrategy`; `maxOffsetsPerTrigger`,
  `minOffsetsPerTrigger`, `maxTriggerDelay` (streaming; accepted and unused in batch, as in Spark);
  `minPartitions`, `maxRecordsPerPartition`, `failOnDataLoss`, `includeHeaders`,
  `kafkaConsumer.pollTimeoutMs`, `fetchOffset.numRetries`, `fetchOffset.retryIntervalMs`,
  `groupIdPrefix`;
- sink: `kafka.bootstrap.servers`, `topic`; `kafka.enable.idempotence` (false only, unless
  exactly-once) and `kafka.max.in.flight.requests.per.connection` are accepted because the sink
  already behaves so (not idempotent, one request in flight); odradek's own `exactlyOnce` (false by
  default: Spark's at-least-once), with `transactionalIdPrefix` and `kafka.transaction.timeout.ms`,
  which only apply to it (given without it they are refused); `kafka.transactional.id` is refused,
  as the exactly-once sink derives its transactional ids (odradek.spark.writer);
- `kafka.*` keys: the ones this client honours (`_SOURCE_KAFKA_KEYS`, `_SINK_KAFKA_KEYS`) take
  effect; every other one is refused by name with the reason, so no Kafka client setting is
  silently ignored. `kafka.security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) with the
  client's `kafka.ssl.*` and `kafka.sasl.*` keys (security/client_config.py: PEM stores,
  `sasl.mechanism` PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 / OAUTHBEARER with `sasl.jaas.config`) pass
  through to every connection the driver and the executors open, as Spark's Kafka source passes them
  to its Kafka client; one it cannot honour (GSSAPI, a JKS store) is refused by name.

Invariants: option keys are case-insensitive (Spark lower-cases them); every bad value raises
OptionError naming the option. `parse_source_options(streaming=None)` checks everything that does
not depend on the kind of query (run at `load()`); True/False add the batch or streaming rules.
Values are frozen dataclasses so they pickle to executors unchanged.

Callers: odradek.spark.source, reader, writer (driver side) and tests.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client import KafkaClient
from odradek.client.types import TopicPartition
from odradek.protocol.records.compression import CompressionType
from odradek.security.client_config import CLIENT_SECURITY_KEYS, client_security
from odradek.spark.java_regex import JavaRegexError, to_python_regex

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1

_DEFAULT_POLL_TIMEOUT_MS = 120_000
_DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DEFAULT_FETCH_MAX_BYTES = 8 << 20
_DEFAULT_FETCH_MAX_WAIT_MS = 500
_DEFAULT_REQUEST_TIMEOUT_MS = 30_000
_DEFAULT_BATCH_BYTES = 512 << 10
_DEFAULT_BUFFER_BYTES = 8 << 20
_DEFAULT_MAX_REQUEST_BYTES = 1 << 20
_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
DEFAULT_TRANSACTIONAL_ID_PREFIX = "odradek-spark-sink"


class OptionError(ValueError):
    """An option is missing, malformed or not allowed in this kind of query."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    """`subscribe`: a fixed list of topics."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """`subscribePattern`: every topic in whose name the (Java) regular expression finds a match.

    `pattern` is the Java text as given; `python_pattern` its translation (odradek.spark.java_regex).
    Like Spark's source (which lists topics and keeps those where the regex `findFirstIn` the name),
    the match may be anywhere in the name: anchor it with ^...$ to match whole names.
    """

    pattern: str
    python_pattern: str

    def matches(self, topic: str) -> bool:
        return re.search(self.python_pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    """`assign`: fixed topic-partitions."""

    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True, slots=True)
class EarliestOffsets:
    """Bind to each partition's log start offset."""


@dataclass(frozen=True, slots=True)
class LatestOffsets:
    """Bind to each partition's high watermark."""


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Per-partition offsets; EARLIEST (-2) and LATEST (-1) are resolved against the broker."""

    offsets: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class TimestampOffsets:
    """Per-partition timestamps: the first offset whose timestamp is >= the given one."""

    timestamps: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.timestamps)


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    """One timestamp for every partition (`startingTimestamp` / `endingTimestamp`)."""

    timestamp_ms: int


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | TimestampOffsets | GlobalTimestamp


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How the source's or sink's connections are made: where to, the client id they announce
    (`kafka.client.id`; for a read, Kafka's default `consumer-<group id>` otherwise), the request
    timeout (`kafka.request.timeout.ms`), for a read `kafka.isolation.level`, and the security
    settings (`kafka.security.protocol`, `kafka.ssl.*`, `kafka.sasl.*`, without their prefix; kept as
    text so that they pickle to the executors, each of which builds its own TLS context)."""

    bootstrap_servers: str
    client_id: str
    timeout_s: float
    read_committed: bool = False
    security: tuple[tuple[str, str], ...] = ()

    def connect(self) -> KafkaClient:
        """A new client with these settings (it connects lazily)."""
        return KafkaClient(
            self.bootstrap_servers,
            client_id=self.client_id,
            timeout_s=self.timeout_s,
            read_committed=self.read_committed,
            security=client_security(dict(self.security)),
        )


@dataclass(frozen=True, slots=True)
class TriggerLimits:
    """Admission control of a stream: `maxOffsetsPerTrigger`, and `minOffsetsPerTrigger` with
    `maxTriggerDelay` (a trigger with fewer new records waits, but never longer than the delay)."""

    max_offsets: int | None = None
    min_offsets: int | None = None
    max_delay_ms: int = _DEFAULT_MAX_TRIGGER_DELAY_MS


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything a read (batch or streaming) needs, validated."""

    client: ClientSettings
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    group_id: str
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    limits: TriggerLimits = TriggerLimits()
    timestamp_not_found_latest: bool = False
    poll_timeout_ms: int = _DEFAULT_POLL_TIMEOUT_MS
    offset_fetch_attempts: int = 3
    offset_retry_interval_ms: int = 1000
    max_poll_records: int | None = None
    fetch_max_bytes: int = _DEFAULT_FETCH_MAX_BYTES
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = _DEFAULT_FETCH_MAX_WAIT_MS

    @property
    def bootstrap_servers(self) -> str:
        return self.client.bootstrap_servers


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything a write needs: the connection, the topic that overrides the `topic` column, and
    the producer settings (`kafka.acks`, `kafka.compression.type`, `kafka.linger.ms`,
    `kafka.batch.size`, `kafka.buffer.memory`, `kafka.max.request.size`) and, with `exactlyOnce`,
    the transactions' id prefix and timeout (`transactionalIdPrefix`, `kafka.transaction.timeout.ms`)."""

    client: ClientSettings
    topic: str | None = None
    compression: CompressionType = CompressionType.NONE
    acks: int = -1
    linger_ms: int | None = None
    batch_bytes: int = _DEFAULT_BATCH_BYTES
    buffer_bytes: int = _DEFAULT_BUFFER_BYTES
    max_request_bytes: int = _DEFAULT_MAX_REQUEST_BYTES
    exactly_once: bool = False
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    transaction_timeout_ms: int = _DEFAULT_TRANSACTION_TIMEOUT_MS

    @property
    def bootstrap_servers(self) -> str:
        return self.client.bootstrap_servers


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be 'true' or 'false', got {raw!r}")


def _int(opts: dict[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    value = _optional_int(opts, name, minimum=minimum)
    return default if value is None else value


def _optional_int(opts: dict[str, str], name: str, *, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be {what}, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option '{name}' must be {what}, got {raw!r}")
    return value


_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(opts: dict[str, str], name: str, default: int) -> int:
    """A Spark time string (`15m`, `30s`, `500ms`; a bare number is milliseconds)."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", raw.strip().lower())
    if match is None or match.group(2) not in ("", *_TIME_UNITS_MS):
        raise OptionError(f"option '{name}' must be a duration such as '15m', '30s' or '500ms', got {raw!r}")
    return int(int(match.group(1)) * _TIME_UNITS_MS.get(match.group(2) or "ms", 1))


def bootstrap_servers(options: Mapping[str, str]) -> str:
    """The `kafka.bootstrap.servers` option, required by every read and write."""
    servers = _lower(options).get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    return servers


def _json_object(name: str, raw: str) -> dict[str, object]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{name}' is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option '{name}' must be a JSON object, got {raw!r}")
    return parsed


def parse_partition_map(name: str, raw: str) -> tuple[tuple[TopicPartition, int], ...]:
    """Parse `{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}` into sorted (partition, number) pairs."""
    pairs: list[tuple[TopicPartition, int]] = []
    for topic, partitions in _json_object(name, raw).items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option '{name}': topic {topic!r} must map partitions to numbers")
        for partition, number in partitions.items():
            if not str(partition).lstrip("-").isdigit() or not isinstance(number, int):
                raise OptionError(f"option '{name}': bad entry {partition!r}: {number!r} for {topic!r}")
            pairs.append((TopicPartition(topic, int(partition)), number))
    return tuple(sorted(pairs))


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be specified"
        )
    raw = opts[given[0]].strip()
    if given[0] == "subscribe":
        topics = tuple(topic.strip() for topic in raw.split(",") if topic.strip())
        if not topics:
            raise OptionError(f"option 'subscribe' names no topic: {raw!r}")
        return Subscribe(topics)
    if given[0] == "subscribepattern":
        return _pattern(raw)
    return Assign(_assignment(raw))


def _pattern(raw: str) -> SubscribePattern:
    if not raw:
        raise OptionError("option 'subscribePattern' is empty")
    try:
        translated = to_python_regex(raw)
        re.compile(translated)
    except JavaRegexError as exc:
        raise OptionError(f"option 'subscribePattern': {exc}") from None
    except re.error as exc:
        raise OptionError(f"option 'subscribePattern' is not a valid pattern: {exc}") from None
    return SubscribePattern(raw, translated)


def _assignment(raw: str) -> tuple[TopicPartition, ...]:
    assigned: set[TopicPartition] = set()
    for topic, partitions in _json_object("assign", raw).items():
        if not isinstance(partitions, list) or not all(isinstance(p, int) for p in partitions):
            raise OptionError(f"option 'assign': topic {topic!r} must map to a list of partition numbers")
        assigned.update(TopicPartition(topic, p) for p in partitions)
    if not assigned:
        raise OptionError(f"option 'assign' names no partition: {raw!r}")
    return tuple(sorted(assigned))


def _offset_spec(opts: dict[str, str], side: str, default: OffsetSpec) -> OffsetSpec:
    """`<side>Timestamp`, else `<side>OffsetsByTimestamp`, else `<side>Offsets`: Spark's preference."""
    global_ts = opts.get(f"{side}timestamp")
    if global_ts is not None:
        try:
            return GlobalTimestamp(int(global_ts.strip()))
        except ValueError:
            raise OptionError(f"option '{side}Timestamp' must be epoch milliseconds: {global_ts!r}") from None
    by_timestamp = opts.get(f"{side}offsetsbytimestamp")
    if by_timestamp is not None:
        return TimestampOffsets(parse_partition_map(f"{side}OffsetsByTimestamp", by_timestamp))
    raw = opts.get(f"{side}offsets")
    if raw is None:
        return default
    word = raw.strip().lower()
    if word == "earliest":
        return EarliestOffsets()
    if word == "latest":
        return LatestOffsets()
    return SpecificOffsets(parse_partition_map(f"{side}Offsets", raw))


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, LatestOffsets):
        raise OptionError("option 'startingOffsets' for a batch query cannot be 'latest'")
    if isinstance(ending, EarliestOffsets):
        raise OptionError("option 'endingOffsets' for a batch query cannot be 'earliest'")
    if isinstance(starting, SpecificOffsets) and LATEST in starting.as_dict().values():
        raise OptionError("option 'startingOffsets' for a batch query cannot use -1 (latest)")
    if isinstance(ending, SpecificOffsets) and EARLIEST in ending.as_dict().values():
        raise OptionError("option 'endingOffsets' for a batch query cannot use -2 (earliest)")
    if type(starting) is type(ending) and isinstance(starting, SpecificOffsets | TimestampOffsets):
        _check_start_before_end(starting.as_dict(), ending.as_dict())  # type: ignore[union-attr]


def _check_start_before_end(start: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> None:
    if set(start) != set(end):
        raise OptionError(
            "the starting and ending options name different partitions:"
            f" {sorted(map(str, start))} and {sorted(map(str, end))}"
        )
    for tp, first in sorted(start.items()):
        if first > end[tp] >= 0 and first >= 0:
            raise OptionError(
                f"the starting offset/timestamp {first} of {tp} is after its ending one {end[tp]}"
            )


def _timestamp_strategy(opts: dict[str, str]) -> bool:
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )
    return strategy == "latest"


def _trigger_limits(opts: dict[str, str]) -> TriggerLimits:
    limits = TriggerLimits(
        max_offsets=_optional_int(opts, "maxOffsetsPerTrigger"),
        min_offsets=_optional_int(opts, "minOffsetsPerTrigger"),
        max_delay_ms=_duration_ms(opts, "maxTriggerDelay", _DEFAULT_MAX_TRIGGER_DELAY_MS),
    )
    if limits.min_offsets and limits.max_offsets and limits.min_offsets > limits.max_offsets:
        raise OptionError(
            f"option 'minOffsetsPerTrigger' ({limits.min_offsets}) is higher than"
            f" 'maxOffsetsPerTrigger' ({limits.max_offsets})"
        )
    return limits


# -- kafka.* keys -----------------------------------------------------------------------------------

_COMMON_KAFKA_KEYS = (
    frozenset({"bootstrap.servers", "client.id", "request.timeout.ms"}) | CLIENT_SECURITY_KEYS
)
_SOURCE_KAFKA_KEYS = _COMMON_KAFKA_KEYS | {
    "group.id",
    "isolation.level",
    "max.poll.records",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.min.bytes",
    "fetch.max.wait.ms",
}
_SINK_KAFKA_KEYS = _COMMON_KAFKA_KEYS | {
    "acks",
    "compression.type",
    "linger.ms",
    "batch.size",
    "buffer.memory",
    "max.request.size",
    "enable.idempotence",
    "max.in.flight.requests.per.connection",
    "transaction.timeout.ms",
}

_REFUSED_CONSUMER_KEYS = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead",
    "key.deserializer": "keys are always returned as binary; deserialize them with DataFrame operations",
    "value.deserializer": "values are always returned as binary; deserialize them with DataFrame operations",
    "enable.auto.commit": "offsets are tracked in Spark's checkpoint, never committed to a group",
    "interceptor.classes": "interceptors could change records, so they are not safe here",
}
_REFUSED_PRODUCER_KEYS = {
    "key.serializer": "write keys as string or binary columns",
    "value.serializer": "write values as string or binary columns",
    "partitioner.class": "a partitioner is a Java class; set a 'partition' column to choose partitions",
    "transactional.id": "set the sink option 'exactlyOnce' to true instead: its transactional ids are"
    " derived from the query id and the partition (prefix: option 'transactionalIdPrefix')",
}


def _check_kafka_keys(
    opts: dict[str, str], role: str, honoured: frozenset[str], refused: dict[str, str]
) -> None:
    """Refuse every `kafka.*` key this client does not honour, naming it and saying why."""
    for key in sorted(k for k in opts if k.startswith("kafka.")):
        name = key.removeprefix("kafka.")
        if name in refused:
            raise OptionError(f"option '{key}' is not supported: {refused[name]}")
        if name not in honoured:
            raise OptionError(
                f"option '{key}' is not supported: the {role} does not implement the Kafka setting"
                f" '{name}' (it honours {', '.join('kafka.' + k for k in sorted(honoured))})"
            )


def _security_settings(opts: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The `kafka.*` security keys without their prefix, checked now (OptionError naming the key)."""
    settings = {
        key.removeprefix("kafka."): value
        for key, value in opts.items()
        if key.removeprefix("kafka.") in CLIENT_SECURITY_KEYS and key.startswith("kafka.")
    }
    try:
        client_security(settings)
    except ValueError as exc:
        raise OptionError(f"a kafka.* security option cannot be honoured: {exc}") from None
    return tuple(sorted(settings.items()))


def _client_settings(
    opts: dict[str, str], default_client_id: str, read_committed: bool = False
) -> ClientSettings:
    timeout_ms = _int(opts, "kafka.request.timeout.ms", _DEFAULT_REQUEST_TIMEOUT_MS)
    client_id = opts.get("kafka.client.id", "").strip() or default_client_id
    return ClientSettings(
        bootstrap_servers(opts), client_id, timeout_ms / 1000, read_committed, _security_settings(opts)
    )


def _group_id(opts: dict[str, str], streaming: bool | None) -> str:
    """`kafka.group.id`, else `<groupIdPrefix>-<random>`, with Spark's default prefixes."""
    group = opts.get("kafka.group.id", "").strip()
    if group:
        if "groupidprefix" in opts:
            log.warning("option 'groupIdPrefix' is ignored because 'kafka.group.id' is set")
        return group
    default = "spark-kafka-source" if streaming else "spark-kafka-relation"
    return f"{opts.get('groupidprefix', default).strip() or default}-{uuid.uuid4()}"


def _read_committed(opts: dict[str, str]) -> bool:
    """`kafka.isolation.level`: read_committed reads up to the last stable offset (see the client)."""
    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            f"option 'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed', got {level!r}"
        )
    return level == "read_committed"


def include_headers(options: Mapping[str, str]) -> bool:
    """The `includeHeaders` option (false by default)."""
    return _bool(_lower(options), "includeHeaders", False)


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the options of `spark.read` (streaming=False), `spark.readStream` (True) or either
    (None: only the rules common to both, as at `load()`)."""
    opts = _lower(options)
    _check_kafka_keys(opts, "source", _SOURCE_KAFKA_KEYS, _REFUSED_CONSUMER_KEYS)
    starting = _offset_spec(opts, "starting", LatestOffsets() if streaming else EarliestOffsets())
    ending = _offset_spec(opts, "ending", LatestOffsets())
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in opts:
                raise OptionError(f"option '{name}' is not allowed in a streaming query")
    elif streaming is False:
        _check_batch_bounds(starting, ending)
    group_id = _group_id(opts, streaming)
    fetch_limits = [
        _optional_int(opts, name) for name in ("kafka.fetch.max.bytes", "kafka.max.partition.fetch.bytes")
    ]
    return SourceOptions(
        client=_client_settings(opts, f"consumer-{group_id}", _read_committed(opts)),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        group_id=group_id,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_optional_int(opts, "minPartitions"),
        max_records_per_partition=_optional_int(opts, "maxRecordsPerPartition"),
        limits=_trigger_limits(opts),
        timestamp_not_found_latest=_timestamp_strategy(opts),
        poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", _DEFAULT_POLL_TIMEOUT_MS),
        offset_fetch_attempts=_int(opts, "fetchOffset.numRetries", 3),
        offset_retry_interval_ms=_int(opts, "fetchOffset.retryIntervalMs", 1000, minimum=0),
        max_poll_records=_optional_int(opts, "kafka.max.poll.records"),
        fetch_max_bytes=min([limit for limit in fetch_limits if limit] or [_DEFAULT_FETCH_MAX_BYTES]),
        fetch_min_bytes=_int(opts, "kafka.fetch.min.bytes", 1),
        fetch_max_wait_ms=_int(opts, "kafka.fetch.max.wait.ms", _DEFAULT_FETCH_MAX_WAIT_MS, minimum=0),
    )


def _acks(opts: dict[str, str]) -> int:
    raw = opts.get("kafka.acks", "all").strip().lower()
    if raw in ("all", "-1"):
        return -1
    if raw == "1":
        return 1
    if raw == "0":
        raise OptionError(
            "option 'kafka.acks' = 0 is not supported: the sink checks every write (use 1 or all)"
        )
    raise OptionError(f"option 'kafka.acks' must be all, -1 or 1, got {raw!r}")


def _compression(opts: dict[str, str]) -> CompressionType:
    codec = opts.get("kafka.compression.type", "none")
    try:
        return CompressionType.from_name(codec.strip())
    except ValueError:
        raise OptionError(
            f"option 'kafka.compression.type' must be none, gzip, snappy, lz4 or zstd, got {codec!r}"
        ) from None


def _check_delivery(opts: dict[str, str], exactly_once: bool) -> None:
    """At least once (the default): `kafka.enable.idempotence` may only be false, as the sink's
    producer is not idempotent. Exactly once: the producer is transactional, hence idempotent, so
    idempotence may not be turned off and acks must be all, as Kafka requires. Either way
    `kafka.max.in.flight.requests.per.connection` is any positive number (one request is in flight)."""
    idempotence = _bool(opts, "kafka.enable.idempotence", exactly_once)
    if idempotence and not exactly_once:
        raise OptionError(
            "option 'kafka.enable.idempotence' = true is not supported: the sink's producer is not"
            " idempotent (a produce request retried after a lost answer may write its records twice);"
            " set 'exactlyOnce' to true for a transactional (and idempotent) producer"
        )
    if exactly_once and not idempotence:
        raise OptionError(
            "option 'kafka.enable.idempotence' = false contradicts 'exactlyOnce' = true: a transactional"
            " producer is idempotent"
        )
    if exactly_once and _acks(opts) != -1:
        raise OptionError("option 'kafka.acks' must be all with 'exactlyOnce' = true (transactions need it)")
    _optional_int(opts, "kafka.max.in.flight.requests.per.connection")


def _transactional_id_prefix(opts: dict[str, str], exactly_once: bool) -> str:
    raw = opts.get("transactionalidprefix")
    if raw is None:
        return DEFAULT_TRANSACTIONAL_ID_PREFIX
    if not exactly_once:
        raise OptionError("option 'transactionalIdPrefix' only applies with 'exactlyOnce' = true")
    if not raw.strip():
        raise OptionError("option 'transactionalIdPrefix' is empty")
    return raw.strip()


def _transaction_timeout_ms(opts: dict[str, str], exactly_once: bool) -> int:
    if "kafka.transaction.timeout.ms" in opts and not exactly_once:
        raise OptionError("option 'kafka.transaction.timeout.ms' only applies with 'exactlyOnce' = true")
    return _int(opts, "kafka.transaction.timeout.ms", _DEFAULT_TRANSACTION_TIMEOUT_MS)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of `df.write` / `df.writeStream`."""
    opts = _lower(options)
    _check_kafka_keys(opts, "sink", _SINK_KAFKA_KEYS, _REFUSED_PRODUCER_KEYS)
    exactly_once = _bool(opts, "exactlyOnce", False)
    _check_delivery(opts, exactly_once)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    return SinkOptions(
        client=_client_settings(opts, "odradek-spark-sink"),
        topic=topic.strip() if topic else None,
        compression=_compression(opts),
        acks=_acks(opts),
        linger_ms=_optional_int(opts, "kafka.linger.ms", minimum=0),
        batch_bytes=_int(opts, "kafka.batch.size", _DEFAULT_BATCH_BYTES),
        buffer_bytes=_int(opts, "kafka.buffer.memory", _DEFAULT_BUFFER_BYTES),
        max_request_bytes=_int(opts, "kafka.max.request.size", _DEFAULT_MAX_REQUEST_BYTES),
        exactly_once=exactly_once,
        transactional_id_prefix=_transactional_id_prefix(opts, exactly_once),
        transaction_timeout_ms=_transaction_timeout_ms(opts, exactly_once),
    )
