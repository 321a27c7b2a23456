"""odradek.client: a small blocking Kafka client (no threads, no consumer groups).

`KafkaClient` talks to a cluster (metadata, list offsets, fetch, produce, topic administration);
`bootstrap` parses bootstrap strings and reaches a cluster with bounded, announced retries;
`read_range` reads one offset range of one partition as `RecordColumns`; `Producer` batches records
per partition and produces them; `TransactionalProducer` (odradek.client.transactions) writes them
in transactions of one transactional id. Used by the Spark source and sink, the pipeline, tests and
benchmarks; the broker never imports it.
"""

from odradek.client.bootstrap import (
    BootstrapSyntaxError,
    BrokerUnreachable,
    bootstrap_option,
    parse_bootstrap,
)
from odradek.client.client import FetchResult, KafkaClient
from odradek.client.connection import AuthenticationFailed, ConnectFailed, ConnectionSecurity
from odradek.client.consumer import decode_range, read_range
from odradek.client.types import BrokerAddress, ClusterMetadata, PartitionMetadata, TopicPartition

__all__ = [
    "AuthenticationFailed",
    "BootstrapSyntaxError",
    "BrokerAddress",
    "BrokerUnreachable",
    "ConnectFailed",
    "ConnectionSecurity",
    "ClusterMetadata",
    "FetchResult",
    "KafkaClient",
    "PartitionMetadata",
    "TopicPartition",
    "bootstrap_option",
    "decode_range",
    "parse_bootstrap",
    "read_range",
]
