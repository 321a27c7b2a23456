"""The metadata store: the durable home of topics, assignments, configs and partition state.

Owns the interface both modes implement, shaped after Kafka's ZooKeeper layout
(/work/shared/kafka-zk-layout.md): admin writes that any broker may make — a topic's configs and
assignment (`/config/topics/<t>`, `/brokers/topics/<t>`), added partitions, config changes
(`/config/changes`), a deletion request (`/admin/delete_topics/<t>`), dynamic broker configs
(`/config/brokers/<id>`, `/config/brokers/<default>`), client entity configs (quotas, SCRAM
credentials: `/config/users/<u>`, `/config/users/<u>/clients/<c>`, `/config/clients/<c>`) — and the
controller's writes,
fenced by its controller epoch: its election (`/controller_epoch`), partition state
(`.../partitions/<p>/state`), a partition reassignment's replica assignment (KIP-455: the full
replicas with the adding and removing ones, in the topic znode) and the removal of a deleted
topic. Watchers hear a `StoreEvent` after each change is durable (ZooKeeper watches; in-process
calls for the local file); broker config watchers hear the entity (`DEFAULT_BROKER_ENTITY` or a
broker id) whose dynamic configs changed; client entity watchers hear the (entity type, name) whose
configs changed.

Client entities are named as Kafka's ZooKeeper layout names them: entity type `users` or `clients`,
and a name of sanitized components (Kafka's Sanitizer: URL-encoded) with `<default>` for a default:
`users`/`alice`, `users`/`alice/clients/app`, `users`/`<default>/clients/<default>`,
`clients`/`app`. `client_entity_path` and `client_entity_of` translate to and from Kafka's
ClientQuotaEntity form (user and client-id components, a None name for a default).

Implementations: `LocalMetadataStore` (controller/local.py, one JSON file, single node) and
`ZkMetadataStore` (controller/zk/store.py, Kafka's znodes, cluster mode).

Invariants: values are immutable snapshots; a write is durable before `topics()` shows it and before
any watcher hears of it; a controller write carrying an epoch older than the store's is refused
(STALE_CONTROLLER_EPOCH) and changes nothing.

Callers: the admin manager (admin writes), the controller (its writes, watches), the broker
(start-up load, config watches).
"""

from __future__ import annotations

import abc
import enum
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from odradek.controller.metadata import PartitionState


@dataclass(frozen=True, slots=True)
class StoredTopic:
    """A topic as stored: id, assignment, config overrides, the controller's partition states (a
    partition without one is new: the controller has not brought it online yet), deletion mark, and
    for the partitions being reassigned the replicas being added and removed (the assignment then
    holds every replica, target and original: Kafka's RS = TRS + (ORS - TRS))."""

    name: str
    topic_id: uuid.UUID
    assignment: Mapping[int, tuple[int, ...]]
    configs: Mapping[str, str] = field(default_factory=dict)
    states: Mapping[int, PartitionState] = field(default_factory=dict)
    marked_for_deletion: bool = False
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def replica_assignment(self, index: int) -> ReplicaAssignment:
        """Partition `index`'s replicas with its reassignment in progress, if any."""
        return ReplicaAssignment(
            self.assignment[index],
            self.adding_replicas.get(index, ()),
            self.removing_replicas.get(index, ()),
        )


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas (RS) and, while it is reassigned, the replicas being added (AR = TRS -
    ORS) and removed (RR = ORS - TRS), as Kafka's ReplicaAssignment."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas after it."""
        return tuple(r for r in self.replicas if r not in self.removing)


def with_replica_assignments(topic: StoredTopic, assignments: Mapping[int, ReplicaAssignment]) -> StoredTopic:
    """`topic` with partitions' new replicas and reassignments in progress (its states follow)."""
    adding, removing = dict(topic.adding_replicas), dict(topic.removing_replicas)
    for index, assigned in assignments.items():
        adding.pop(index, None)
        removing.pop(index, None)
        if assigned.adding:
            adding[index] = assigned.adding
        if assigned.removing:
            removing[index] = assigned.removing
    return replace(
        topic,
        assignment={**topic.assignment, **{i: a.replicas for i, a in assignments.items()}},
        states={
            i: replace(s, replicas=assignments[i].replicas) if i in assignments else s
            for i, s in topic.states.items()
        },
        adding_replicas=adding,
        removing_replicas=removing,
    )


class StoreEventKind(enum.Enum):
    TOPIC_CREATED = "topic_created"
    PARTITIONS_ADDED = "partitions_added"
    CONFIGS_CHANGED = "configs_changed"
    DELETION_REQUESTED = "deletion_requested"


@dataclass(frozen=True, slots=True)
class StoreEvent:
    kind: StoreEventKind
    topic: str


StoreWatcher = Callable[[StoreEvent], None]
BrokerConfigsWatcher = Callable[[str], None]

# Kafka's entity name of the cluster-wide default broker configs (`/config/brokers/<default>`).
DEFAULT_BROKER_ENTITY = "<default>"

# -- client entities (Kafka's ConfigType.User / ConfigType.Client, ClientQuotaEntity) ----------------

USERS, CLIENTS = "users", "clients"
GROUPS = "groups"  # group configs: `/config/groups/<sanitized group id>`
USER, CLIENT_ID = "user", "client-id"
DEFAULT_CLIENT_ENTITY = "<default>"

# Kafka's ClientQuotaEntity: (component type, name) pairs, the user's first; a None name is the
# component's default: (("user", "alice"), ("client-id", None)) is `users/alice/clients/<default>`.
ClientEntity = tuple[tuple[str, str | None], ...]
ClientEntityWatcher = Callable[[str, str], None]


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a znode name (URL-encoded; `*` and `~` too)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def _component(name: str | None) -> str:
    return DEFAULT_CLIENT_ENTITY if name is None else sanitize(name)


def _named(component: str) -> str | None:
    return None if component == DEFAULT_CLIENT_ENTITY else desanitize(component)


def client_entity_path(entity: ClientEntity) -> tuple[str, str]:
    """The store's (entity type, name) of a ClientQuotaEntity; ValueError for another shape."""
    parts = dict(entity)
    if len(parts) != len(entity) or not parts or parts.keys() - {USER, CLIENT_ID}:
        raise ValueError(f"not a client entity: {entity!r}")
    if USER not in parts:
        return CLIENTS, _component(parts[CLIENT_ID])
    if CLIENT_ID not in parts:
        return USERS, _component(parts[USER])
    return USERS, f"{_component(parts[USER])}/{CLIENTS}/{_component(parts[CLIENT_ID])}"


def client_entity_of(entity_type: str, name: str) -> ClientEntity:
    """The ClientQuotaEntity of a store (entity type, name); ValueError when it names none."""
    components = name.split("/")
    if entity_type == CLIENTS and len(components) == 1 and name:
        return ((CLIENT_ID, _named(name)),)
    if entity_type == USERS and len(components) == 1 and name:
        return ((USER, _named(name)),)
    if entity_type == USERS and len(components) == 3 and components[1] == CLIENTS and all(components):
        return ((USER, _named(components[0])), (CLIENT_ID, _named(components[2])))
    raise ValueError(f"not a client entity: {entity_type}/{name}")


def altered_configs(
    current: Mapping[str, str], set: Mapping[str, str], delete: Iterable[str]
) -> dict[str, str]:
    """`current` with `delete` removed and `set` applied; the keys named in neither are kept."""
    removed = frozenset(delete)
    return {k: v for k, v in current.items() if k not in removed} | dict(set)


class MetadataStore(abc.ABC):
    """See the module docstring."""

    def __init__(self) -> None:
        self._watchers: list[StoreWatcher] = []
        self._broker_config_watchers: list[BrokerConfigsWatcher] = []
        self._client_entity_watchers: list[ClientEntityWatcher] = []

    def watch(self, watcher: StoreWatcher) -> None:
        """Call `watcher(event)` after every durable admin change."""
        self._watchers.append(watcher)

    def _notify(self, event: StoreEvent) -> None:
        for watcher in self._watchers:
            watcher(event)

    def watch_broker_configs(self, watcher: BrokerConfigsWatcher) -> None:
        """Call `watcher(entity)` after an entity's dynamic broker configs changed durably."""
        self._broker_config_watchers.append(watcher)

    def _notify_broker_configs(self, entity: str) -> None:
        for watcher in self._broker_config_watchers:
            watcher(entity)

    def watch_client_entity_configs(self, watcher: ClientEntityWatcher) -> None:
        """Call `watcher(entity_type, name)` after a client entity's configs changed durably (on
        every broker: a ZooKeeper notification is heard by all)."""
        self._client_entity_watchers.append(watcher)

    def _notify_client_entity_configs(self, entity_type: str, name: str) -> None:
        for watcher in self._client_entity_watchers:
            watcher(entity_type, name)

    # -- reads ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def topics(self) -> Mapping[str, StoredTopic]:
        """Every stored topic, as last read or written."""

    @property
    @abc.abstractmethod
    def controller_epoch(self) -> int: ...

    @abc.abstractmethod
    def broker_configs(self, entity: str) -> Mapping[str, str]:
        """The dynamic configs of `entity`: DEFAULT_BROKER_ENTITY (cluster-wide) or a broker id
        (this broker's own; other brokers' are not kept)."""

    @abc.abstractmethod
    def client_entity_configs(self, entity_type: str, name: str) -> Mapping[str, str]:
        """The configs of a client entity (`users`/`alice/clients/app`...); empty when it has none."""

    @abc.abstractmethod
    def client_entities(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        """Every client entity with configs: (entity type, name) -> its configs."""

    @abc.abstractmethod
    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's configs (Kafka 4's GROUP config resources: `/config/groups/<group>`); empty when
        it has none."""

    def broker_epochs(self) -> Mapping[int, int]:
        """Each registered broker's epoch (ZooKeeper mode); empty where brokers do not register."""
        return {}

    # -- admin writes (any broker) --------------------------------------------------------------

    @abc.abstractmethod
    async def create_topic(self, topic: StoredTopic) -> None:
        """Store a new topic's configs and assignment (no partition state); TOPIC_ALREADY_EXISTS if
        the name is taken."""

    @abc.abstractmethod
    async def add_partitions(self, name: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
        """Extend a topic's assignment with new partitions."""

    @abc.abstractmethod
    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides."""

    @abc.abstractmethod
    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of `entity` (DEFAULT_BROKER_ENTITY or a broker id)."""

    @abc.abstractmethod
    async def alter_client_entity_configs(
        self, entity_type: str, name: str, set: Mapping[str, str], delete: Iterable[str]
    ) -> None:
        """Set and delete keys of a client entity's configs, keeping the keys named in neither;
        ValueError when (entity_type, name) is not a client entity."""

    @abc.abstractmethod
    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace a group's configs (none: the group has no configs any more)."""

    @abc.abstractmethod
    async def request_deletion(self, name: str) -> None:
        """Mark a topic for deletion; the controller deletes it."""

    # -- controller writes (fenced by controller epoch) -----------------------------------------

    @abc.abstractmethod
    async def elect_controller(self) -> int:
        """Become controller: the controller epoch moves by one; returns it."""

    @abc.abstractmethod
    async def write_partition_states(
        self, states: Mapping[str, Mapping[int, PartitionState]], controller_epoch: int
    ) -> None:
        """Write partition states of one or more topics at once."""

    @abc.abstractmethod
    async def write_replica_assignments(
        self, name: str, assignments: Mapping[int, ReplicaAssignment], controller_epoch: int
    ) -> None:
        """Write partitions' replicas and reassignment in progress (none: empty adding and removing);
        their stored states take the new replicas."""

    @abc.abstractmethod
    async def remove_topic(self, name: str, controller_epoch: int) -> None:
        """Forget a deleted topic (its replicas were stopped and deleted)."""
