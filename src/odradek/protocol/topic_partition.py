"""`TopicPartition`: the one name of a partition, used by every layer of the project.

A `NamedTuple` of (topic, partition): ordered (by topic, then partition), hashable, picklable (Spark
ships it to executors) and equal to the plain `(topic, partition)` tuple, so a key built either way
finds the same dict entry. `str()` gives Kafka's `topic-partition` form, as in log dir names and
tool output.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
