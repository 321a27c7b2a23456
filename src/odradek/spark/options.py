"""Options of the `odradek` Spark data source, parsed into values.

Owns the option names and their meanings, which are those of Spark's Kafka source and sink so that
existing Spark code ports by renaming the format: `kafka.bootstrap.servers`, exactly one of
`subscribe` / `subscribePattern` / `assign`, `startingOffsets` / `endingOffsets` ("earliest",
"latest", or per-partition JSON where -2 means earliest and -1 latest),
`startingOffsetsByTimestamp` / `endingOffsetsByTimestamp` (per-partition JSON of epoch milliseconds),
`startingTimestamp` / `endingTimestamp` (one timestamp for every partition),
`startingOffsetsByTimestampStrategy` ("error" or "latest"), `maxOffsetsPerTrigger`, `minPartitions`,
`failOnDataLoss`, `includeHeaders`, `kafkaConsumer.pollTimeoutMs`, and for the sink `topic` and
`kafka.compression.type`.

Other `kafka.*` options are accepted and ignored, except those this client cannot honour (TLS/SASL
settings, consumer groups, (de)serializers, `auto.offset.reset`), which are refused, as Spark refuses
the last three.

Invariants: option keys are case-insensitive (Spark lower-cases them); every bad value is refused here,
at planning time on the driver, with a message naming the option. Values are frozen dataclasses so
they pickle to executors unchanged.

Callers: odradek.spark.source (driver side) and tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.types import TopicPartition
from odradek.protocol.records.compression import CompressionType

EARLIEST = -2
LATEST = -1

_DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option is missing, malformed or not allowed in this kind of query."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    """`subscribe`: a fixed list of topics."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """`subscribePattern`: every topic whose whole name matches the regular expression."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


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
class SourceOptions:
    """Everything a read (batch or streaming) needs, validated."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    timestamp_not_found_latest: bool = False
    poll_timeout_ms: int = _DEFAULT_POLL_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything a write needs: where to connect, the topic that overrides the `topic` column, and
    the batch compression (`kafka.compression.type`)."""

    bootstrap_servers: str
    topic: str | None = None
    compression: CompressionType = CompressionType.NONE


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be 'true' or 'false', got {raw!r}")


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


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
        if not raw:
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid pattern: {exc}") from None
        return SubscribePattern(raw)
    return Assign(_assignment(raw))


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
    """Resolve `<side>OffsetsByTimestamp`, `<side>Timestamp` then `<side>Offsets`, in Spark's order."""
    by_timestamp = opts.get(f"{side}offsetsbytimestamp")
    if by_timestamp is not None:
        return TimestampOffsets(parse_partition_map(f"{side}OffsetsByTimestamp", by_timestamp))
    global_ts = opts.get(f"{side}timestamp")
    if global_ts is not None:
        try:
            return GlobalTimestamp(int(global_ts))
        except ValueError:
            raise OptionError(f"option '{side}Timestamp' must be epoch milliseconds: {global_ts!r}") from None
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


def _timestamp_strategy(opts: dict[str, str]) -> bool:
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )
    return strategy == "latest"


_REFUSED_CONSUMER_OPTIONS = {
    "kafka.group.id": "offsets are tracked by Spark's checkpoint, not by a consumer group",
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' instead",
    "kafka.key.deserializer": "keys are always returned as binary; cast them in the query",
    "kafka.value.deserializer": "values are always returned as binary; cast them in the query",
    "kafka.enable.auto.commit": "offsets are tracked by Spark's checkpoint, not by a consumer group",
    "kafka.interceptor.classes": "there is no Java consumer to intercept",
}
_REFUSED_PRODUCER_OPTIONS = {
    "kafka.key.serializer": "write keys as string or binary columns",
    "kafka.value.serializer": "write values as string or binary columns",
}


def _check_connection_options(opts: dict[str, str], refused: dict[str, str]) -> None:
    """Refuse Kafka client options this source cannot honour (it speaks PLAINTEXT only)."""
    for name, advice in refused.items():
        if name in opts:
            raise OptionError(f"option '{name}' is not supported: {advice}")
    protocol = opts.get("kafka.security.protocol", "PLAINTEXT").strip().upper()
    secured = [k for k in opts if k.startswith(("kafka.ssl.", "kafka.sasl."))]
    if protocol != "PLAINTEXT" or secured:
        raise OptionError("only PLAINTEXT connections are supported (no TLS or SASL options)")


def include_headers(options: Mapping[str, str]) -> bool:
    """The `includeHeaders` option (false by default)."""
    return _bool(_lower(options), "includeHeaders", False)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the options of `spark.read` (streaming=False) or `spark.readStream` (True)."""
    opts = _lower(options)
    _check_connection_options(opts, _REFUSED_CONSUMER_OPTIONS)
    starting = _offset_spec(opts, "starting", LatestOffsets() if streaming else EarliestOffsets())
    ending = _offset_spec(opts, "ending", LatestOffsets())
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in opts:
                raise OptionError(f"option '{name}' is not allowed in a streaming query")
    else:
        if "maxoffsetspertrigger" in opts:
            raise OptionError("option 'maxOffsetsPerTrigger' is only for streaming queries")
        _check_batch_bounds(starting, ending)
    return SourceOptions(
        bootstrap_servers=bootstrap_servers(opts),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        timestamp_not_found_latest=_timestamp_strategy(opts),
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or _DEFAULT_POLL_TIMEOUT_MS,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of `df.write` / `df.writeStream`."""
    opts = _lower(options)
    _check_connection_options(opts, _REFUSED_PRODUCER_OPTIONS)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    codec = opts.get("kafka.compression.type", "none")
    try:
        compression = CompressionType.from_name(codec.strip())
    except ValueError:
        raise OptionError(
            f"option 'kafka.compression.type' must be none, gzip, snappy, lz4 or zstd, got {codec!r}"
        ) from None
    return SinkOptions(bootstrap_servers(opts), topic.strip() if topic else None, compression)
