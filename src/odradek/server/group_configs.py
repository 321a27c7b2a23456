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

and, stored and described only, Kafka 4.4's other group configs with their defaults:
consumer.assignment.interval.ms, share.assignment.interval.ms, share.renew.acknowledge.enable,
errors.deadletterqueue.*, streams.* (odradek has no streams groups).

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
    synonym: str  # the broker setting (Kafka's name) DescribeConfigs names as the default's source
    default: str  # used when the broker has no such setting
    least: int | None = None  # Kafka's GroupConfig lower bound of an INT
    bounds: tuple[str, str] | tuple[int, int] | None = None  # broker keys, or fixed numbers
    allowed: tuple[str, ...] = ()


_I, _S, _B = ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN


def _ms(name: str, broker: str, default: str, least: int, kind: str) -> GroupConfigKey:
    prefix = ".".join(broker.split(".")[:2])  # group.consumer / group.share
    return GroupConfigKey(name, _I, broker, default, least, (f"{prefix}.min.{kind}", f"{prefix}.max.{kind}"))


KEYS: dict[str, GroupConfigKey] = {
    k.name: k
    for k in (
        GroupConfigKey(
            "consumer.assignment.interval.ms", _I, "group.consumer.assignment.interval.ms", "1000", 0
        ),
        _ms(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "5000",
            1,
            "heartbeat.interval.ms",
        ),
        _ms(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "45000",
            1,
            "session.timeout.ms",
        ),
        GroupConfigKey(
            "errors.deadletterqueue.copy.record.enable",
            _B,
            "errors.deadletterqueue.copy.record.enable",
            "false",
        ),
        GroupConfigKey("errors.deadletterqueue.topic.name", _S, "errors.deadletterqueue.topic.name", ""),
        GroupConfigKey("share.assignment.interval.ms", _I, "group.share.assignment.interval.ms", "1000", 0),
        GroupConfigKey("share.auto.offset.reset", _S, "share.auto.offset.reset", "latest"),
        GroupConfigKey("share.delivery.count.limit", _I, "group.share.delivery.count.limit", "5", 2, (2, 10)),
        _ms(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            "5000",
            1,
            "heartbeat.interval.ms",
        ),
        GroupConfigKey(
            "share.isolation.level",
            _S,
            "share.isolation.level",
            "read_uncommitted",
            allowed=("read_uncommitted", "read_committed"),
        ),  # fmt: skip
        GroupConfigKey(
            "share.partition.max.record.locks",
            _I,
            "group.share.partition.max.record.locks",
            "2000",
            100,
            (100, 10000),
        ),
        _ms(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            "30000",
            1000,
            "record.lock.duration.ms",
        ),
        GroupConfigKey("share.renew.acknowledge.enable", _B, "share.renew.acknowledge.enable", "true"),
        _ms("share.session.timeout.ms", "group.share.session.timeout.ms", "45000", 1, "session.timeout.ms"),
        GroupConfigKey(
            "streams.assignment.interval.ms", _I, "group.streams.assignment.interval.ms", "1000", 0
        ),
        GroupConfigKey("streams.assignor.name", _S, "group.streams.assignors", "sticky"),
        GroupConfigKey("streams.heartbeat.interval.ms", _I, "group.streams.heartbeat.interval.ms", "5000", 1),
        GroupConfigKey(
            "streams.initial.rebalance.delay.ms", _I, "group.streams.initial.rebalance.delay.ms", "3000", 0
        ),
        GroupConfigKey("streams.num.standby.replicas", _I, "group.streams.num.standby.replicas", "0", 0),
        GroupConfigKey(
            "streams.rack.aware.assignment.tags",
            ConfigType.LIST,
            "group.streams.rack.aware.assignment.tags",
            "",
        ),
        GroupConfigKey("streams.session.timeout.ms", _I, "group.streams.session.timeout.ms", "45000", 1),
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


def _invalid(key: GroupConfigKey, value: str, why: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key.name}: {why}")


def _check(key: GroupConfigKey, value: str, broker: BrokerValue) -> None:
    if key.name == "share.auto.offset.reset":
        if value not in ("latest", "earliest") and _DURATION.match(value) is None:
            raise _invalid(
                key,
                value,
                f"Invalid value `{value}` for configuration {key.name}. The value must be either 'earliest', "
                "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
            )
        return
    if key.allowed and value not in key.allowed:
        raise _invalid(key, value, "String must be one of: " + ", ".join(key.allowed))
    if key.config_type is _B and value.lower() not in ("true", "false"):
        raise _invalid(key, value, "Expected value to be either true or false")
    if key.config_type is not _I:
        return
    try:
        number = int(value)
    except ValueError:
        raise _invalid(key, value, "Not a number of type INT") from None
    if key.least is not None and number < key.least:
        raise _invalid(key, value, f"Value must be at least {key.least}")
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
    """The broker's setting of the key's meaning (its default where the broker has none)."""
    try:
        value = broker(key.synonym)
    except KeyError:
        return key.default
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe(configs: Mapping[str, str], broker: BrokerValue) -> list[ConfigEntry]:
    """Every group config of a group: its own value (GROUP_CONFIG) over the broker's (DEFAULT_CONFIG),
    both named in the synonyms as Kafka names them."""
    entries = []
    for name, key in sorted(KEYS.items()):
        own = configs.get(name)
        default = ConfigSynonym(key.synonym, default_value(key, broker), ConfigSource.DEFAULT_CONFIG)
        synonyms = (
            (ConfigSynonym(name, own, ConfigSource.GROUP_CONFIG), default) if own is not None else (default,)
        )
        entries.append(
            ConfigEntry(
                name=name,
                value=own if own is not None else default.value,
                source=ConfigSource.GROUP_CONFIG if own is not None else ConfigSource.DEFAULT_CONFIG,
                is_default=own is None,
                read_only=False,
                sensitive=False,
                config_type=key.config_type,
                synonyms=synonyms,
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
