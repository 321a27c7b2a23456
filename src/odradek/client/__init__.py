"""odradek.client: a small blocking Kafka client (no threads, no consumer groups).

`KafkaClient` talks to a cluster (metadata, list offsets, fetch, produce, topic administration);
`read_range` reads one offset range of one partition as `RecordColumns`; `Producer` batches records
per partition and produces them. Used by the Spark source and sink, the pipeline, tests and
benchmarks; the broker never imports it.
"""

from odradek.client.client import FetchResult, KafkaClient, parse_bootstrap
from odradek.client.consumer import decode_range, read_range
from odradek.client.types import BrokerAddress, ClusterMetadata, PartitionMetadata, TopicPartition

__all__ = [
    "BrokerAddress",
    "ClusterMetadata",
    "FetchResult",
    "KafkaClient",
    "PartitionMetadata",
    "TopicPartition",
    "decode_range",
    "parse_bootstrap",
    "read_range",
]
