"""The partition log on disk: segments, indexes, recovery, retention, and the broker's LogManager.

Public interface: `LogManager` (all logs of a broker), `Log` (one partition), `LogConfig`,
`TOPIC_CONFIG_NAMES`, the result values and the exceptions (each with Kafka's `error_code`).
"""

from odradek.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from odradek.storage.log import FetchDataInfo, Log, LogAppendInfo, LogOffsetMetadata, TimestampAndOffset
from odradek.storage.manager import LogManager

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "FetchDataInfo",
    "KafkaStorageError",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "OffsetOutOfRangeError",
    "StorageError",
    "TimestampAndOffset",
]
