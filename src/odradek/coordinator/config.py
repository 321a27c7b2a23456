"""The group coordinator's settings, read once from the broker's `KafkaConfig` by Kafka's names.

Owns `ConfigValues`, what the coordinators read configs from (the broker's `KafkaConfig`, or a dict
in tests: anything indexable by Kafka config name), and `GroupConfig`, the immutable subset of
broker configuration the group coordinator acts on:
group.min.session.timeout.ms, group.max.session.timeout.ms, group.initial.rebalance.delay.ms,
group.max.size, offsets.topic.num.partitions, offsets.topic.replication.factor,
offsets.topic.segment.bytes, offsets.retention.minutes, offsets.retention.check.interval.ms,
offsets.commit.timeout.ms, offsets.load.buffer.size, offset.metadata.max.bytes, and for
consumer-protocol groups (KIP-848) group.consumer.session.timeout.ms,
group.consumer.heartbeat.interval.ms, group.consumer.max.size, group.consumer.assignors (the
first is the default assignor; their bounds are checked by the broker's config) and
group.consumer.migration.policy (bidirectional, upgrade, downgrade or disabled; Kafka 4's default
bidirectional; read case-insensitively as Kafka does). The new-member
join timeout is Kafka's fixed 5 minutes (not a config in Kafka either).
Callers: the coordinator runtime, the state machine (timeouts) and handlers (metadata size limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

_NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class ConfigValues(Protocol):
    """Configs by Kafka's names (a `KafkaConfig`, a dict)."""

    def __getitem__(self, name: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = _NEW_MEMBER_JOIN_TIMEOUT_MS
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    offsets_load_buffer_size: int = 5 * 1024 * 1024
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200

    @property
    def upgrade_enabled(self) -> bool:
        """A classic group with members may become a consumer group (group.consumer.migration.policy)."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group left with only classic members may become a classic group."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_kafka_config(cls, config: ConfigValues) -> GroupConfig:
        """Read the keys from the broker's configs."""
        return cls(
            min_session_timeout_ms=int(config["group.min.session.timeout.ms"]),
            max_session_timeout_ms=int(config["group.max.session.timeout.ms"]),
            initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
            max_size=int(config["group.max.size"]),
            offsets_topic_num_partitions=int(config["offsets.topic.num.partitions"]),
            offsets_topic_replication_factor=int(config["offsets.topic.replication.factor"]),
            offsets_topic_segment_bytes=int(config["offsets.topic.segment.bytes"]),
            offsets_retention_ms=int(config["offsets.retention.minutes"]) * 60_000,
            offsets_retention_check_interval_ms=int(config["offsets.retention.check.interval.ms"]),
            offsets_commit_timeout_ms=int(config["offsets.commit.timeout.ms"]),
            offsets_load_buffer_size=int(config["offsets.load.buffer.size"]),
            offset_metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
            consumer_session_timeout_ms=int(_get(config, "group.consumer.session.timeout.ms", 45000)),
            consumer_heartbeat_interval_ms=int(_get(config, "group.consumer.heartbeat.interval.ms", 5000)),
            consumer_max_size=int(_get(config, "group.consumer.max.size", 2**31 - 1)),
            consumer_assignors=tuple(_get(config, "group.consumer.assignors", ("uniform", "range"))),
            consumer_migration_policy=str(
                _get(config, "group.consumer.migration.policy", "bidirectional")
            ).lower(),
            share_session_timeout_ms=int(_get(config, "group.share.session.timeout.ms", 45000)),
            share_heartbeat_interval_ms=int(_get(config, "group.share.heartbeat.interval.ms", 5000)),
            share_max_size=int(_get(config, "group.share.max.size", 200)),
        )


def _get(config: ConfigValues, name: str, default: Any) -> Any:
    """A consumer-protocol setting, its default where `config` predates them (a dict in tests)."""
    try:
        return config[name]
    except KeyError:
        return default
