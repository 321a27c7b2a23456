"""LocalMetadata: the single-node metadata backend, a JSON file in the first log dir.

Owns `<first log dir>/__cluster_metadata.json`:
`{"version": 1, "controller_epoch": N, "topics": {name: {"topic_id", "configs", "partitions":
{"<index>": {"leader", "leader_epoch", "replicas", "isr", "controller_epoch", "partition_epoch"}}}}}`.

Behaviour: this broker is the only broker and the controller. Topic ids are random UUIDs, kept for
the topic's life. `load()` only reads the file; `elect()` (at broker startup, once the log dirs are
locked) is a controller election: the controller epoch is bumped, and
every partition gets this broker as leader with its leader epoch and partition epoch bumped (as
Kafka's controller does when it brings a partition online at broker startup), so a restarted broker
never serves under a leader epoch clients have already seen from a previous run.

Invariants: every change is validated first, then written to a temp file, fsynced and renamed, and
only then applied in memory and announced to listeners; a crash leaves the old or the new file. One
writer: only the broker's event loop calls it.

Callers: the broker (startup), the admin handlers and the coordinator through `MetadataBackend`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.controller.metadata import (
    INTERNAL_TOPICS,
    Assignments,
    BrokerInfo,
    MetadataBackend,
    PartitionState,
    TopicChange,
    TopicMetadata,
    collision_key,
    validate_topic_name,
)
from odradek.durable_file import write_atomically
from odradek.protocol.errors import ErrorCode, KafkaError

METADATA_FILE = "__cluster_metadata.json"
FORMAT_VERSION = 1


class LocalMetadata(MetadataBackend):
    """Cluster metadata of a one-broker cluster, persisted as JSON."""

    def __init__(self, log_dir: Path, broker_id: int) -> None:
        super().__init__()
        self._path = Path(log_dir) / METADATA_FILE
        self._broker = BrokerInfo(broker_id, ())
        self._cluster_id = ""
        self._controller_epoch = 0
        self._topics: dict[str, TopicMetadata] = {}

    @classmethod
    def open(cls, log_dir: Path, broker: BrokerInfo, cluster_id: str) -> LocalMetadata:
        """Load the file (if any), elect this broker controller and leader of everything, persist."""
        backend = cls(log_dir, broker.broker_id)
        backend.load()
        backend.elect(broker, cluster_id)
        return backend

    # -- reads ----------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def brokers(self) -> list[BrokerInfo]:
        return [self._broker]

    def controller_id(self) -> int:
        return self._broker.broker_id

    def topics(self) -> dict[str, TopicMetadata]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    # -- writes ---------------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignments: Assignments | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        self._check_new_topic_name(name)
        if assignments:
            replicas_by_partition = self._check_assignments(assignments)
        else:
            replicas_by_partition = self._assign(0, num_partitions, replication_factor)
        topic = TopicMetadata(
            name=name,
            topic_id=uuid.uuid4(),
            partitions={p: self._new_partition(r) for p, r in replicas_by_partition.items()},
            configs=dict(configs),
            is_internal=name in INTERNAL_TOPICS,
        )
        if not validate_only:
            self._commit(name, topic)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._existing(name)
        self._commit(name, None)
        return topic

    def create_partitions(
        self,
        name: str,
        new_total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        topic = self._existing(name)
        current = len(topic.partitions)
        if new_total < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {new_total}.",
            )
        if new_total == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if assignments is not None:
            if len(assignments) != new_total - current:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {new_total - current} but "
                    f"{len(assignments)} assignments provided.",
                )
            new_replicas = self._check_assignments(dict(enumerate(assignments, start=current)), current)
        else:
            replication_factor = len(next(iter(topic.partitions.values())).replicas)
            new_replicas = self._assign(current, new_total - current, replication_factor)
        partitions = dict(topic.partitions)
        partitions.update((p, self._new_partition(r)) for p, r in new_replicas.items())
        grown = replace(topic, partitions=partitions)
        if not validate_only:
            self._commit(name, grown)
        return grown

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        altered = replace(self._existing(name), configs=dict(configs))
        self._commit(name, altered)
        return altered

    # -- validation and assignment --------------------------------------------------------------------

    def _existing(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        return topic

    def _check_new_topic_name(self, name: str) -> None:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        clash = next((t for t in self._topics if collision_key(t) == key), None)
        if clash is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {clash}",
            )

    def _broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers())

    def _assign(self, first: int, count: int, replication_factor: int) -> dict[int, tuple[int, ...]]:
        """Round-robin replicas over the brokers, the preferred leader rotating with the partition."""
        if count < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        brokers = self._broker_ids()
        if replication_factor < 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        if replication_factor > len(brokers):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            )
        return {
            p: tuple(brokers[(p + j) % len(brokers)] for j in range(replication_factor))
            for p in range(first, first + count)
        }

    def _check_assignments(self, assignments: Assignments, first: int = 0) -> dict[int, tuple[int, ...]]:
        indexes = sorted(assignments)
        if indexes != list(range(first, first + len(indexes))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        known = set(self._broker_ids())
        sizes = {len(assignments[p]) for p in indexes}
        for p in indexes:
            replicas = tuple(assignments[p])
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate or empty replica assignment for partition {p}: {list(replicas)}",
                )
            unknown = [b for b in replicas if b not in known]
            if unknown:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) {unknown} in partition {p}"
                )
        if len(sizes) > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas"
            )
        return {p: tuple(assignments[p]) for p in indexes}

    def _new_partition(self, replicas: tuple[int, ...]) -> PartitionState:
        return PartitionState(
            leader=replicas[0],
            leader_epoch=0,
            replicas=replicas,
            isr=replicas,
            controller_epoch=self._controller_epoch,
            partition_epoch=0,
        )

    # -- persistence ----------------------------------------------------------------------------------

    def _commit(self, name: str, topic: TopicMetadata | None) -> None:
        previous = self._topics.get(name)
        topics = dict(self._topics)
        if topic is None:
            topics.pop(name, None)
        else:
            topics[name] = topic
        self._write(self._controller_epoch, topics)
        self._topics = topics
        self._notify(TopicChange(name, previous, topic))

    def elect(self, broker: BrokerInfo, cluster_id: str) -> None:
        """Register the broker's endpoint, become controller (epoch + 1) and leader of every partition
        (leader epoch + 1), and persist that before anything is served."""
        self._broker, self._cluster_id = broker, cluster_id
        epoch = self._controller_epoch + 1
        me = self._broker.broker_id
        topics = {
            name: replace(
                topic,
                partitions={
                    p: replace(
                        s,
                        leader=me,
                        leader_epoch=s.leader_epoch + 1,
                        isr=(me,),
                        controller_epoch=epoch,
                        partition_epoch=s.partition_epoch + 1,
                    )
                    for p, s in topic.partitions.items()
                },
            )
            for name, topic in self._topics.items()
        }
        self._write(epoch, topics)
        self._controller_epoch, self._topics = epoch, topics

    def _write(self, controller_epoch: int, topics: Mapping[str, TopicMetadata]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "controller_epoch": controller_epoch,
            "topics": {name: _topic_to_json(t) for name, t in sorted(topics.items())},
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self._path, json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))

    def load(self) -> None:
        """Read the file, if there is one (changes nothing on disk)."""
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self._path}: unsupported metadata format version {document.get('version')}")
        self._controller_epoch = int(document["controller_epoch"])
        self._topics = {name: _topic_from_json(name, t) for name, t in document["topics"].items()}


def _topic_to_json(topic: TopicMetadata) -> dict[str, Any]:
    return {
        "topic_id": str(topic.topic_id),
        "configs": dict(topic.configs),
        "partitions": {
            str(p): {
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "replicas": list(s.replicas),
                "isr": list(s.isr),
                "controller_epoch": s.controller_epoch,
                "partition_epoch": s.partition_epoch,
            }
            for p, s in sorted(topic.partitions.items())
        },
    }


def _topic_from_json(name: str, data: Mapping[str, Any]) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id=uuid.UUID(data["topic_id"]),
        partitions={
            int(p): PartitionState(
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                replicas=tuple(s["replicas"]),
                isr=tuple(s["isr"]),
                controller_epoch=s["controller_epoch"],
                partition_epoch=s["partition_epoch"],
            )
            for p, s in data["partitions"].items()
        },
        configs=dict(data["configs"]),
        is_internal=name in INTERNAL_TOPICS,
    )
