"""Cluster metadata values: brokers, partition state and topics, and Kafka's topic name rules.

Owns the shape of the metadata the controller decides and the brokers cache: live brokers with their
endpoints and rack, and per topic its topic id, its config overrides and for each partition the
`PartitionState` (leader, leader epoch, replicas, ISR, controller epoch, partition epoch) — the state
Kafka keeps in ZooKeeper under `/brokers/topics/<t>/partitions/<p>/state`, carried even on a single
node so that replication is an extension rather than a rewrite.

Invariants: every value is an immutable snapshot. Nothing here writes or caches: the controller
(controller/controller.py) is the one writer of partition state, the metadata store
(controller/store.py) keeps it durable, and every broker's `MetadataCache` (server/metadata_cache.py)
holds what UpdateMetadata told it.

Callers: the controller, the admin manager, the metadata cache, the ReplicaManager and the handlers.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")

NO_LEADER = -1  # Kafka's LeaderAndIsr.NoLeader: the partition is offline
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete, in UpdateMetadata for a deleted topic
EPOCH_DURING_DELETE = -2  # StopReplica leader epoch meaning "stop whatever the epoch" (topic deletion)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener of a broker: listener name, host and port."""

    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as clients see it in Metadata: id, advertised endpoints (one per listener), rack."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> Endpoint | None:
        """The endpoint advertised for `listener` (the listener a request arrived on), if any."""
        return next((e for e in self.endpoints if e.listener == listener), None)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader and ISR state of one partition (Kafka's LeaderAndIsr plus the assignment). A broker's
    cache also knows the replicas that are offline (on dead brokers)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic: id, partitions by index, config overrides (topic-level names only)."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionState]
    configs: Mapping[str, str]
    is_internal: bool


# A replica assignment: partition index -> broker ids, preferred leader first.
Assignments = Mapping[int, Sequence[int]]


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not _LEGAL_TOPIC_CHARS.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def collision_key(name: str) -> str:
    """Kafka treats '.' and '_' as the same character when checking for colliding metric names."""
    return name.replace(".", "_")
