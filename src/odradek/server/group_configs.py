"""Group configs (Kafka 4's GROUP config resources, resource type 32): a group's own settings that
override the broker's group.consumer.* / group.share.* ones, set with IncrementalAlterConfigs and
read with DescribeConfigs (`kafka-configs --entity-type groups`).

Owns the group config keys odradek serves, their types, defaults (the broker's setting of the same
meaning) and bounds, the validation of a group's whole config set, the DescribeConfigs entries of a
group, and the reading of a share group's settings by the share-partition leaders
(`share_group_config`, wired to `SharePartitionManager.group_config` by the broker).

| group config | broker default | bounds |
|---|---|---|
| consumer.session.timeout.ms | group.consumer.session.timeout.ms | min/max session timeout |
| consumer.heartbeat.interval.ms | group.consumer.heartbeat.interval.ms | min/max heartbeat interval |
| share.session.timeout.ms | group.share.session.timeout.ms | min/max session timeout |
| share.heartbeat.interval.ms | group.share.heartbeat.interval.ms | min/max heartbeat interval |
| share.record.lock.duration.ms | group.share.record.lock.duration.ms | min/max record lock duration |
| share.delivery.count.limit | group.share.delivery.count.limit | 2-10 |
| share.partition.max.record.locks | group.share.partition.max.record.locks | 100-10000 |
| share.auto.offset.reset | latest | latest, earliest, by_duration:<ISO-8601 duration> |
| share.isolation.level | read_uncommitted | read_uncommitted, read_committed |

The configs are kept by the metadata store (`/config/groups/<group>` in ZooKeeper, the
`group_configs` of the single node's metadata file). DescribeConfigs answers every key: a group's
own value with source GROUP_CONFIG (8), else the broker's with DEFAULT_CONFIG (5).

Applied: share.auto.offset.reset and share.isolation.level (read by the share-partition leader when
it builds a share-partition), share.session.timeout.ms and share.heartbeat.interval.ms (read by the
group coordinator at each share group heartbeat). Deviation: the other keys are stored and
described but the broker-wide settings still govern; by_duration resets read as latest.
Callers: the DescribeConfigs and IncrementalAlterConfigs handlers, the broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.config import ConfigEntry, ConfigSource, ConfigSynonym, ConfigType
from odradek.server.share_partitions import READ_COMMITTED, READ_UNCOMMITTED, ShareGroupConfig

GROUP_RESOURCE = 32
_DURATION = re.compile(r"^by_duration:P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$")


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    config_type: ConfigType
    broker_key: str | None  # the broker setting giving the default (None: `default`)
    default: str = ""
    bounds: tuple[str, str] | tuple[int, int] | None = None  # broker keys, or fixed numbers
    allowed: tuple[str, ...] = ()


_I, _S = ConfigType.INT, ConfigType.STRING
KEYS: dict[str, GroupConfigKey] = {
    k.name: k
    for k in (
        GroupConfigKey(
            "consumer.session.timeout.ms",
            _I,
            "group.consumer.session.timeout.ms",
            bounds=("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        ),
        GroupConfigKey(
            "consumer.heartbeat.interval.ms",
            _I,
            "group.consumer.heartbeat.interval.ms",
            bounds=("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
        ),
        GroupConfigKey(
            "share.session.timeout.ms",
            _I,
            "group.share.session.timeout.ms",
            bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        ),
        GroupConfigKey(
            "share.heartbeat.interval.ms",
            _I,
            "group.share.heartbeat.interval.ms",
            bounds=("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        ),
        GroupConfigKey(
            "share.record.lock.duration.ms",
            _I,
            "group.share.record.lock.duration.ms",
            bounds=("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        ),
        GroupConfigKey("share.delivery.count.limit", _I, "group.share.delivery.count.limit", bounds=(2, 10)),
        GroupConfigKey(
            "share.partition.max.record.locks",
            _I,
            "group.share.partition.max.record.locks",
            bounds=(100, 10000),
        ),
        GroupConfigKey("share.auto.offset.reset", _S, None, "latest"),
        GroupConfigKey(
            "share.isolation.level",
            _S,
            None,
            "read_uncommitted",
            allowed=("read_uncommitted", "read_committed"),
        ),
    )
}

BrokerValue = Callable[[str], object]


def validate(configs: Mapping[str, str], broker: BrokerValue) -> None:
    """A group's whole config set: INVALID_CONFIG for an unknown key or a bad value."""
    for name, value in configs.items():
        key = KEYS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        _check(key, value, broker)


def _check(key: GroupConfigKey, value: str, broker: BrokerValue) -> None:
    if key.name == "share.auto.offset.reset":
        if value not in ("latest", "earliest") and _DURATION.match(value) is None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {key.name}: "
                "String must be one of: latest, earliest, by_duration:PnDTnHnMn.nS",
            )
        return
    if key.allowed:
        if value not in key.allowed:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {key.name}: String must be one of: "
                + ", ".join(key.allowed),
            )
        return
    try:
        number = int(value)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {value} for configuration {key.name}: Not a number of type INT",
        ) from None
    if key.bounds is None:
        return
    low, high = key.bounds
    low_value = int(str(broker(low))) if isinstance(low, str) else low
    high_value = int(str(broker(high))) if isinstance(high, str) else high
    if not low_value <= number <= high_value:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"{key.name} must be greater than or equal to {low_value} and less than or equal to {high_value}",
        )


def default_value(key: GroupConfigKey, broker: BrokerValue) -> str:
    return str(broker(key.broker_key)) if key.broker_key is not None else key.default


def describe(configs: Mapping[str, str], broker: BrokerValue) -> list[ConfigEntry]:
    """Every group config of a group: its own value (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG)."""
    entries = []
    for name, key in sorted(KEYS.items()):
        own = configs.get(name)
        entries.append(
            ConfigEntry(
                name=name,
                value=own if own is not None else default_value(key, broker),
                source=ConfigSource.GROUP_CONFIG if own is not None else ConfigSource.DEFAULT_CONFIG,
                is_default=own is None,
                read_only=False,
                sensitive=False,
                config_type=key.config_type,
                synonyms=(ConfigSynonym(name, own, ConfigSource.GROUP_CONFIG),) if own is not None else (),
            )
        )
    return entries


def share_group_setting(configs: Mapping[str, str], name: str, broker: BrokerValue) -> str:
    """One share group setting: the group's own value, else the broker's."""
    own = configs.get(name)
    return own if own is not None else default_value(KEYS[name], broker)


def share_group_config(
    group_configs: Callable[[str], Mapping[str, str]], broker: BrokerValue
) -> Callable[[str], ShareGroupConfig]:
    """What the share-partition leaders read for a group (`SharePartitionManager.group_config`):
    share.auto.offset.reset ("latest" or "earliest"; by_duration reads as latest) and
    share.isolation.level."""

    def read(group_id: str) -> ShareGroupConfig:
        configs = group_configs(group_id)
        reset = share_group_setting(configs, "share.auto.offset.reset", broker)
        isolation = share_group_setting(configs, "share.isolation.level", broker)
        return ShareGroupConfig(
            auto_offset_reset="earliest" if reset == "earliest" else "latest",
            isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
        )

    return read
