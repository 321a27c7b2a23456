"""Values the blocking client hands out: topic-partitions, brokers, partition metadata.

`TopicPartition` is the project's one (protocol/topic_partition.py), re-exported here; the rest are frozen
dataclasses. All are hashable and picklable so Spark can ship them to executors. Kafka's names:
leader, leader epoch, high watermark, log start offset.

Callers: odradek.client, odradek.spark, odradek.pipeline, tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.topic_partition import TopicPartition

__all__ = ["BrokerAddress", "PartitionMetadata", "TopicPartition"]


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as Metadata reports it; `error_code` is Kafka's (0 = NONE)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    error_code: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """Brokers by node id, partitions by topic (sorted by partition), per-topic error codes, and
    the topics the broker marks internal (such as __consumer_offsets)."""

    brokers: dict[int, BrokerAddress]
    topics: dict[str, tuple[PartitionMetadata, ...]]
    topic_errors: dict[str, int]
    internal_topics: frozenset[str] = frozenset()

    def partitions_of(self, topic: str) -> tuple[PartitionMetadata, ...]:
        return self.topics.get(topic, ())

    def leader_of(self, tp: TopicPartition) -> BrokerAddress | None:
        for meta in self.partitions_of(tp.topic):
            if meta.partition == tp.partition:
                return self.brokers.get(meta.leader)
        return None
