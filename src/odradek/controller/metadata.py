"""Cluster metadata: the interface every metadata backend implements, and its values.

Owns the shape of cluster metadata the broker serves: live brokers, the controller, and per topic its
topic id, its config overrides and for each partition the `PartitionState` (leader, leader epoch,
replicas, ISR, controller epoch, partition epoch) — the state Kafka keeps in ZooKeeper under
`/brokers/topics/<t>/partitions/<p>/state`, carried even on a single node so that replication is an
extension rather than a rewrite.

Invariants: values are immutable snapshots; a backend changes metadata only through its methods and,
after each change is durable, calls every listener with a `TopicChange` (previous and current
snapshot of the topic). Failures are `KafkaError`s carrying Kafka's code (TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION), raised before anything changes.

Callers: the broker (wiring, listeners), the admin API handlers (create/delete topics, partitions,
configs), the Metadata handler and the coordinator (internal topics). Implementations: `LocalMetadata`
(controller/local.py, single node, a JSON file).
"""

from __future__ import annotations

import abc
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


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
    """Leader and ISR state of one partition (Kafka's LeaderAndIsr plus the assignment)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic: id, partitions by index, config overrides (topic-level names only)."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionState]
    configs: Mapping[str, str]
    is_internal: bool


@dataclass(frozen=True, slots=True)
class TopicChange:
    """What a listener hears: the topic before and after (None when created / deleted)."""

    name: str
    previous: TopicMetadata | None
    current: TopicMetadata | None


MetadataListener = Callable[[TopicChange], None]

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


class MetadataBackend(abc.ABC):
    """Brokers, controller and topics of the cluster; the single writer of that state."""

    def __init__(self) -> None:
        self._listeners: list[MetadataListener] = []

    def add_listener(self, callback: MetadataListener) -> None:
        """Call `callback(TopicChange)` after every durable topic change."""
        self._listeners.append(callback)

    def _notify(self, change: TopicChange) -> None:
        for callback in self._listeners:
            callback(change)

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str: ...

    @abc.abstractmethod
    def brokers(self) -> list[BrokerInfo]: ...

    @abc.abstractmethod
    def controller_id(self) -> int: ...

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.topics().values() if t.topic_id == topic_id), None)

    @abc.abstractmethod
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignments: Assignments | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        """Create a topic; with `validate_only` check everything and return it without storing."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> TopicMetadata:
        """Delete a topic; returns what was deleted."""

    @abc.abstractmethod
    def create_partitions(
        self,
        name: str,
        new_total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        """Grow a topic to `new_total` partitions (new ones optionally assigned explicitly)."""

    @abc.abstractmethod
    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's config overrides with `configs`."""
