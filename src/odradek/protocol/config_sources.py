"""Kafka's names of DescribeConfigs' `config_source` values (as its admin client and tools print
them), for odradek's tools and console.

Callers: cli/configs.py, console/configs.py.
"""

from __future__ import annotations

CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}


def source_name(source: int) -> str:
    return CONFIG_SOURCES.get(source, "UNKNOWN")
