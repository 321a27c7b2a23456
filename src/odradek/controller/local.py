"""LocalMetadataStore: the single-node metadata store, a JSON file in the first log dir.

Owns `<first log dir>/__cluster_metadata.json`:
`{"version": 1, "controller_epoch": N, "topics": {name: {"topic_id", "configs", "partitions":
{"<index>": {"replicas", and once the controller brought it online: "leader", "leader_epoch", "isr",
"controller_epoch", "partition_epoch"; while it is reassigned: "adding_replicas", "removing_replicas"}},
"marked_for_deletion" (only when true)}}, "broker_configs":
{"<default>" (cluster-wide) or "<broker id>": {name: value}} (only entities with configs),
"client_configs": {"users/<u>", "users/<u>/clients/<c>" or "clients/<c>" (Kafka's entity paths): {name:
value}} (only entities with configs), "group_configs": {group id: {name: value}} (only groups with
configs)}` — a file written by earlier versions (every partition with a
state, no broker or client configs) reads unchanged.

Behaviour: the `MetadataStore` of a one-broker cluster: what ZooKeeper keeps in several znodes lives
in one document. Every write builds the new document, writes it to a temp file, fsyncs and renames it
in the scheduler's metadata-store lane (never on the event loop), and only then shows it in
`topics()` and tells the watchers. Writes are serialised (one at a time, in call order). A write that
fails (ENOSPC...) raises KafkaStorageError (KAFKA_STORAGE_ERROR) with the previous document still
current, on disk and here.

Invariants: a crash leaves the old or the new file; a controller write with an epoch older than the
stored one is refused with STALE_CONTROLLER_EPOCH; admin writes check the topic exists (or not)
against the latest durable document.

Callers: the broker (construction, `load()` at start-up), the admin manager and the controller
through `MetadataStore`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.controller.metadata import PartitionState
from odradek.controller.store import (
    MetadataStore,
    ReplicaAssignment,
    StoredTopic,
    StoreEvent,
    StoreEventKind,
    altered_configs,
    client_entity_of,
    with_replica_assignments,
)
from odradek.durable_file import write_atomically
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.scheduler import Lane, Scheduler
from odradek.storage.errors import KafkaStorageError

BrokerConfigs = Mapping[str, Mapping[str, str]]
ClientConfigs = Mapping[tuple[str, str], Mapping[str, str]]
GroupConfigs = Mapping[str, Mapping[str, str]]

METADATA_FILE = "__cluster_metadata.json"
FORMAT_VERSION = 1


class LocalMetadataStore(MetadataStore):
    """Cluster metadata of a one-broker cluster, persisted as JSON."""

    def __init__(self, log_dir: Path, scheduler: Scheduler) -> None:
        super().__init__()
        self._scheduler = scheduler
        self._path = Path(log_dir) / METADATA_FILE
        self._controller_epoch = 0
        self._topics: dict[str, StoredTopic] = {}
        self._broker_configs: BrokerConfigs = {}
        self._client_configs: ClientConfigs = {}
        self._group_configs: GroupConfigs = {}
        self._write_lock = asyncio.Lock()

    # -- reads ----------------------------------------------------------------------------------

    def topics(self) -> Mapping[str, StoredTopic]:
        return self._topics

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def broker_configs(self, entity: str) -> Mapping[str, str]:
        return self._broker_configs.get(entity, {})

    def client_entity_configs(self, entity_type: str, name: str) -> Mapping[str, str]:
        return self._client_configs.get((entity_type, name), {})

    def client_entities(self) -> ClientConfigs:
        return self._client_configs

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        return self._group_configs.get(group_id, {})

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
        self._broker_configs = {e: dict(c) for e, c in document.get("broker_configs", {}).items()}
        self._client_configs = {
            _client_entity_key(path): dict(c) for path, c in document.get("client_configs", {}).items()
        }
        self._group_configs = {g: dict(c) for g, c in document.get("group_configs", {}).items()}

    # -- admin writes ---------------------------------------------------------------------------

    async def create_topic(self, topic: StoredTopic) -> None:
        async with self._write_lock:
            if topic.name in self._topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
            await self._commit(self._controller_epoch, {**self._topics, topic.name: topic})
        self._notify(StoreEvent(StoreEventKind.TOPIC_CREATED, topic.name))

    async def add_partitions(self, name: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
        async with self._write_lock:
            topic = self._existing(name)
            grown = replace(topic, assignment={**topic.assignment, **assignment})
            await self._commit(self._controller_epoch, {**self._topics, name: grown})
        self._notify(StoreEvent(StoreEventKind.PARTITIONS_ADDED, name))

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        async with self._write_lock:
            altered = replace(self._existing(name), configs=dict(configs))
            await self._commit(self._controller_epoch, {**self._topics, name: altered})
        self._notify(StoreEvent(StoreEventKind.CONFIGS_CHANGED, name))

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        async with self._write_lock:
            altered = {e: c for e, c in self._broker_configs.items() if e != entity}
            if configs:
                altered[entity] = dict(configs)
            await self._commit(self._controller_epoch, self._topics, altered)
        self._notify_broker_configs(entity)

    async def alter_client_entity_configs(
        self, entity_type: str, name: str, set: Mapping[str, str], delete: Iterable[str]
    ) -> None:
        client_entity_of(entity_type, name)
        async with self._write_lock:
            configs = altered_configs(self.client_entity_configs(entity_type, name), set, delete)
            altered = {e: c for e, c in self._client_configs.items() if e != (entity_type, name)}
            if configs:
                altered[(entity_type, name)] = configs
            await self._commit(self._controller_epoch, self._topics, client_configs=altered)
        self._notify_client_entity_configs(entity_type, name)

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        async with self._write_lock:
            altered = {g: c for g, c in self._group_configs.items() if g != group_id}
            if configs:
                altered[group_id] = dict(configs)
            await self._commit(self._controller_epoch, self._topics, group_configs=altered)

    async def request_deletion(self, name: str) -> None:
        async with self._write_lock:
            marked = replace(self._existing(name), marked_for_deletion=True)
            await self._commit(self._controller_epoch, {**self._topics, name: marked})
        self._notify(StoreEvent(StoreEventKind.DELETION_REQUESTED, name))

    # -- controller writes ----------------------------------------------------------------------

    async def elect_controller(self) -> int:
        async with self._write_lock:
            epoch = self._controller_epoch + 1
            await self._commit(epoch, self._topics)
            return epoch

    async def write_partition_states(
        self, states: Mapping[str, Mapping[int, PartitionState]], controller_epoch: int
    ) -> None:
        async with self._write_lock:
            self._check_epoch(controller_epoch)
            topics = dict(self._topics)
            for name, by_partition in states.items():
                topic = topics.get(name)
                if topic is not None:
                    topics[name] = replace(topic, states={**topic.states, **by_partition})
            await self._commit(self._controller_epoch, topics)

    async def write_replica_assignments(
        self, name: str, assignments: Mapping[int, ReplicaAssignment], controller_epoch: int
    ) -> None:
        async with self._write_lock:
            self._check_epoch(controller_epoch)
            topic = self._topics.get(name)
            if topic is not None:
                reassigned = with_replica_assignments(topic, assignments)
                await self._commit(self._controller_epoch, {**self._topics, name: reassigned})

    async def remove_topic(self, name: str, controller_epoch: int) -> None:
        async with self._write_lock:
            self._check_epoch(controller_epoch)
            topics = dict(self._topics)
            topics.pop(name, None)
            await self._commit(self._controller_epoch, topics)

    # -- helpers --------------------------------------------------------------------------------

    def _existing(self, name: str) -> StoredTopic:
        topic = self._topics.get(name)
        if topic is None or topic.marked_for_deletion:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        return topic

    def _check_epoch(self, controller_epoch: int) -> None:
        if controller_epoch < self._controller_epoch:
            raise KafkaError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is older than the stored {self._controller_epoch}",
            )

    async def _commit(
        self,
        controller_epoch: int,
        topics: Mapping[str, StoredTopic],
        broker_configs: BrokerConfigs | None = None,
        client_configs: ClientConfigs | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        """Write the document in the metadata-store lane, then make it current."""
        snapshot = dict(topics)
        configs = self._broker_configs if broker_configs is None else broker_configs
        clients = self._client_configs if client_configs is None else client_configs
        groups = self._group_configs if group_configs is None else group_configs
        try:
            await self._scheduler.run(
                Lane.METADATA_STORE,
                _write_document,
                self._path,
                controller_epoch,
                snapshot,
                configs,
                clients,
                groups,
            )
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self._path}: {exc}") from exc
        self._controller_epoch, self._topics, self._broker_configs = controller_epoch, snapshot, configs
        self._client_configs, self._group_configs = clients, groups


def _client_entity_key(path: str) -> tuple[str, str]:
    entity_type, _, name = path.partition("/")
    client_entity_of(entity_type, name)
    return entity_type, name


def _write_document(
    path: Path,
    controller_epoch: int,
    topics: Mapping[str, StoredTopic],
    broker_configs: BrokerConfigs,
    client_configs: ClientConfigs,
    group_configs: GroupConfigs | None = None,
) -> None:
    document: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "controller_epoch": controller_epoch,
        "topics": {name: _topic_to_json(t) for name, t in sorted(topics.items())},
    }
    if broker_configs:
        document["broker_configs"] = {e: dict(c) for e, c in sorted(broker_configs.items())}
    if client_configs:
        document["client_configs"] = {f"{t}/{n}": dict(c) for (t, n), c in sorted(client_configs.items())}
    if group_configs:
        document["group_configs"] = {g: dict(c) for g, c in sorted(group_configs.items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))


def _topic_to_json(topic: StoredTopic) -> dict[str, Any]:
    data: dict[str, Any] = {
        "topic_id": str(topic.topic_id),
        "configs": dict(topic.configs),
        "partitions": {
            str(p): _partition_to_json(r, topic.states.get(p)) | _reassignment_to_json(topic, p)
            for p, r in topic.assignment.items()
        },
    }
    if topic.marked_for_deletion:
        data["marked_for_deletion"] = True
    return data


def _partition_to_json(replicas: tuple[int, ...], state: PartitionState | None) -> dict[str, Any]:
    if state is None:
        return {"replicas": list(replicas)}
    return {
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "replicas": list(state.replicas),
        "isr": list(state.isr),
        "controller_epoch": state.controller_epoch,
        "partition_epoch": state.partition_epoch,
    }


def _reassignment_to_json(topic: StoredTopic, index: int) -> dict[str, Any]:
    assigned = topic.replica_assignment(index)
    if not assigned.being_reassigned:
        return {}
    return {"adding_replicas": list(assigned.adding), "removing_replicas": list(assigned.removing)}


def _topic_from_json(name: str, data: Mapping[str, Any]) -> StoredTopic:
    partitions = {int(p): s for p, s in data["partitions"].items()}
    return StoredTopic(
        name=name,
        topic_id=uuid.UUID(data["topic_id"]),
        assignment={p: tuple(s["replicas"]) for p, s in partitions.items()},
        configs=dict(data["configs"]),
        states={
            p: PartitionState(
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                replicas=tuple(s["replicas"]),
                isr=tuple(s["isr"]),
                controller_epoch=s["controller_epoch"],
                partition_epoch=s["partition_epoch"],
            )
            for p, s in partitions.items()
            if "leader" in s
        },
        marked_for_deletion=bool(data.get("marked_for_deletion", False)),
        adding_replicas={
            p: tuple(s["adding_replicas"]) for p, s in partitions.items() if s.get("adding_replicas")
        },
        removing_replicas={
            p: tuple(s["removing_replicas"]) for p, s in partitions.items() if s.get("removing_replicas")
        },
    )
