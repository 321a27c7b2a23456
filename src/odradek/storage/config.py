"""Topic-level log configuration: Kafka's topic config names, their defaults and validation.

Owns: `LogConfig` (one frozen value per log; field names are Kafka's topic config names in
snake_case), `LogConfig.from_topic_configs` (parse "segment.bytes"=... overrides on top of defaults,
refusing a bad value with a ValueError that names the key), `to_topic_configs` (back to strings, for
DescribeConfigs) and `TOPIC_CONFIG_NAMES` (each topic config name -> the broker config key that
supplies its default, e.g. segment.bytes <- log.segment.bytes).

Invariants: a LogConfig only holds values that passed validation. Sentinels are Kafka's: -1 means
unlimited for retention.ms / retention.bytes; Long.MAX disables flush.messages / flush.ms and the
timestamp bounds.

Callers: the server (broker defaults, topic overrides, DescribeConfigs/AlterConfigs/CreateTopics),
`Log` and `LogManager`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")

TOPIC_CONFIG_NAMES: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
}
"""Topic config name -> broker config key holding its cluster-wide default."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """`defaults` with the Kafka-named overrides in `configs` applied; unknown names are refused."""
        changes: dict[str, Any] = {}
        for key, raw in configs.items():
            parser = _PARSERS.get(key)
            if parser is None:
                raise ValueError(f"{key}: unknown topic config")
            changes[key.replace(".", "_")] = parser(key, raw)
        return replace(defaults if defaults is not None else cls(), **changes)

    def to_topic_configs(self) -> dict[str, str]:
        """Every topic config by its Kafka name, as DescribeConfigs reports values."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        return {name: str(values[name.replace(".", "_")]) for name in TOPIC_CONFIG_NAMES}


def _long(low: int, high: int = LONG_MAX) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"{key}: {raw!r} is not an integer") from None
        if not low <= value <= high:
            raise ValueError(f"{key}: {value} is outside [{low}, {high}]")
        return value

    return parse


def _ratio(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"{key}: {raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{key}: {value} is outside [0, 1]")
    return value


def _timestamp_type(key: str, raw: str) -> str:
    if raw.strip() not in TIMESTAMP_TYPES:
        raise ValueError(f"{key}: {raw!r} is not one of {', '.join(TIMESTAMP_TYPES)}")
    return raw.strip()


def _cleanup_policy(key: str, raw: str) -> str:
    policies = [part.strip() for part in raw.split(",") if part.strip()]
    if not policies or any(policy not in CLEANUP_POLICIES for policy in policies):
        raise ValueError(f"{key}: {raw!r} is not a list of {', '.join(CLEANUP_POLICIES)}")
    return ",".join(policies)


_PARSERS: dict[str, Callable[[str, str], int | float | str]] = {
    "cleanup.policy": _cleanup_policy,
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    "index.interval.bytes": _long(0, INT_MAX),
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _long(0, INT_MAX),
    "message.timestamp.after.max.ms": _long(0),
    "message.timestamp.before.max.ms": _long(0),
    "message.timestamp.type": _timestamp_type,
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _long(1, INT_MAX),
    "retention.bytes": _long(-(2**63)),
    "retention.ms": _long(-1),
    "segment.bytes": _long(14, INT_MAX),
    "segment.index.bytes": _long(4, INT_MAX),
    "segment.ms": _long(1),
}
