"""ZkMetadataStore: the `MetadataStore` of a cluster, kept in ZooKeeper with Kafka's znodes.

Owns this broker's view of what ZooKeeper holds about topics and live brokers: an in-memory snapshot
(`topics()`, `brokers()`) kept current by watches, and the translation of the store's writes into
Kafka's znode operations (`KafkaZkClient`):
- admin writes, by any broker: a topic is `/config/topics/<t>` then `/brokers/topics/<t>` (Kafka JSON,
  topic_id); added partitions rewrite the topic znode; config changes write `/config/topics/<t>` and
  a `/config/changes/config_change_<seq>` notification; a deletion request is `/admin/delete_topics/<t>`;
  dynamic broker configs write `/config/brokers/<default>` or `/config/brokers/<id>` and a
  notification the same way (Kafka's AdminZkClient.changeBrokerConfig); client entity configs
  (quotas, SCRAM credentials) are read, altered and written back to `/config/users/<u>`,
  `/config/users/<u>/clients/<c>` or `/config/clients/<c>` with a notification whose entity_path is
  e.g. `users/u/clients/c` (Kafka's AdminZkClient.changeConfigs; as there, two brokers altering
  one entity at the same instant may each overwrite the other's keys);
- controller writes, fenced by the controller epoch's zkVersion (`ControllerSeat`): the election
  (`/controller` + `/controller_epoch`), partition state znodes (created for a new partition, else
  conditional on their zkVersion, which is the partition epoch), a reassignment's replicas with
  `adding_replicas` / `removing_replicas` in the topic znode (KIP-455), and the removal of a
  deleted topic.

Watches: the children of `/brokers/topics` (a topic appears or goes), each topic's znode (partitions
added), the children of `/config/changes` (config changes, any broker's) and of
`/admin/delete_topics`, and the children of `/brokers/ids` (membership). A watch or one of this
broker's own writes re-reads the topic (`_refresh_topic`), and the difference against the snapshot
becomes the store events (TOPIC_CREATED, PARTITIONS_ADDED, CONFIGS_CHANGED, DELETION_REQUESTED),
delivered on the event loop after the change is in ZooKeeper. A notification for `brokers/<default>`
or `brokers/<this broker's id>` re-reads that znode; a difference reaches the broker config
watchers (other brokers' per-broker configs are not kept). A notification for a `users/...` or
`clients/...` entity re-reads its znode, and a difference reaches the client entity watchers: every
broker hears every client entity change (Kafka's ConfigChangeListener on the user and client
config handlers). Refreshes run one at a time, so a
slower older read never overwrites a newer one, and the second reader of one change sees no
difference (no duplicate events).

A partition's state carries the replicas of the topic znode as last read (the state znode holds
none). Partition states are read when a topic is first seen and again when this broker becomes controller
(a new controller reloads everything); afterwards only the controller writes them, and its writes
update the snapshot with the new zkVersion. A refresh that was reading while the controller wrote
keeps the written states (a refresh does not hold the controller's writes back, so without this a
topic's first refresh could drop the states its creation wrote). A reassignment's topic znode write
takes the refresh lock instead: a refresh that read the znode before it would put the old replicas
back.

Invariants: a controller write with an epoch other than the seat's is refused
(STALE_CONTROLLER_EPOCH); a write rejected by ZooKeeper's epoch check raises `ControllerMovedError`
(the controller resigns); a state znode whose zkVersion moved is logged and re-read, never forced.

Callers: the broker (construction, `load()`, membership listener), the admin manager and the
controller through `MetadataStore`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any

from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError

from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.controller.store import (
    CLIENTS,
    DEFAULT_BROKER_ENTITY,
    GROUPS,
    USERS,
    MetadataStore,
    ReplicaAssignment,
    StoredTopic,
    StoreEvent,
    StoreEventKind,
    altered_configs,
    client_entity_of,
    desanitize,
    sanitize,
    with_replica_assignments,
)
from odradek.controller.zk import znodes
from odradek.controller.zk.client import ControllerMovedError, ControllerSeat, KafkaZkClient
from odradek.controller.zk.znodes import LeaderAndIsrZNode, TopicAssignment
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

RETRY_AFTER_CONNECTION_LOSS_S = 0.5
BrokersListener = Callable[[Mapping[int, BrokerInfo]], None]


class ZkMetadataStore(MetadataStore):
    """See the module docstring."""

    def __init__(self, client: KafkaZkClient, broker_id: int) -> None:
        super().__init__()
        self.zk = client  # the session, shared with the broker's registration and election
        self._broker_id = broker_id
        self._topics: dict[str, StoredTopic] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._client_configs: dict[tuple[str, str], dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}  # group id -> its configs
        self._brokers: dict[int, BrokerInfo] = {}
        self._broker_epochs: dict[int, int] = {}
        self._brokers_listeners: list[BrokersListener] = []
        self._seat: ControllerSeat | None = None
        self._controller_epoch = 0
        self._refresh_lock = asyncio.Lock()
        self._last_config_change = ""
        self._tasks: set[asyncio.Task[None]] = set()

    # -- start-up and watches ---------------------------------------------------------------------

    async def load(self) -> None:
        """Read every topic and live broker and set the watches (again after a session expiry: the
        watches died with the old session, and what changed meanwhile becomes events)."""
        changes = await self.zk.config_changes(self._spawner(self._on_config_changes))
        self._last_config_change = changes[-1] if changes else ""
        for entity in self._broker_entities():
            await self._refresh_broker_configs(entity)
        names = await self.zk.client_entity_names()
        for entity_type, name in sorted(set(names) | self._client_configs.keys()):  # gone ones too
            await self._refresh_client_entity(entity_type, name)
        self._group_configs = {}
        for sanitized in await self.zk.children(f"{znodes.CONFIG_PATH}/{GROUPS}"):
            await self._refresh_group_configs(sanitized)
        await self._on_topic_children(rewatch=True)
        await self._on_deletion_markers()
        await self._on_broker_children()

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)

    def _spawner(self, job: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
        """A watcher (called on the loop) that runs `job` as a task, logging its failure."""

        def spawn() -> None:
            task = asyncio.get_running_loop().create_task(self._logged(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return spawn

    async def _logged(self, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a watch's read: again after a lost connection (the session lives on, and so must the
        watch); not after a session expiry (the broker reloads everything in the new session)."""
        while True:
            try:
                await job()
                return
            except asyncio.CancelledError:
                raise
            except ConnectionLoss:
                await asyncio.sleep(RETRY_AFTER_CONNECTION_LOSS_S)
            except SessionExpiredError:
                log.debug("A watch's read was abandoned: the ZooKeeper session expired")
                return
            except Exception:
                log.exception("Reading ZooKeeper after a watch fired failed")
                return

    async def _on_topic_children(self, rewatch: bool = False) -> None:
        names = set(await self.zk.topics(self._spawner(self._on_topic_children)))
        for name in sorted(names if rewatch else names - self._topics.keys()):
            await self._refresh_topic(name, watch=True)
        for name in sorted(self._topics.keys() - names):
            await self._refresh_topic(name)  # forgets it only if its znode is really gone

    async def _on_deletion_markers(self) -> None:
        for name in await self.zk.topics_marked_for_deletion(self._spawner(self._on_deletion_markers)):
            known = self._topics.get(name)
            if known is not None and not known.marked_for_deletion:
                await self._refresh_topic(name)

    async def _on_config_changes(self) -> None:
        children = await self.zk.config_changes(self._spawner(self._on_config_changes))
        for child in (c for c in children if c > self._last_config_change):
            self._last_config_change = child
            entity = await self.zk.config_change(child)
            if entity is not None and entity[0] == "topics" and entity[1] in self._topics:
                await self._refresh_topic(entity[1])
            elif entity is not None and entity[0] == "brokers" and entity[1] in self._broker_entities():
                await self._refresh_broker_configs(entity[1])
            elif entity is not None and entity[0] in (USERS, CLIENTS):
                await self._refresh_client_entity(*entity)
            elif entity is not None and entity[0] == GROUPS:
                await self._refresh_group_configs(entity[1])

    async def _refresh_group_configs(self, sanitized: str) -> None:
        configs = await self.zk.entity_configs(GROUPS, sanitized)
        group_id = desanitize(sanitized)
        if configs:
            self._group_configs[group_id] = configs
        else:
            self._group_configs.pop(group_id, None)

    def _broker_entities(self) -> tuple[str, str]:
        return DEFAULT_BROKER_ENTITY, str(self._broker_id)

    async def _refresh_broker_configs(self, entity: str) -> None:
        """Re-read one entity's dynamic broker configs; tell the watchers when they changed."""
        async with self._refresh_lock:
            configs = await self.zk.entity_configs("brokers", entity)
            if configs == self._broker_configs.get(entity, {}):
                return
            self._broker_configs[entity] = configs
        self._notify_broker_configs(entity)

    async def _refresh_client_entity(self, entity_type: str, name: str) -> None:
        """Re-read one client entity's configs; tell the watchers when they changed."""
        try:
            client_entity_of(entity_type, name)
        except ValueError:
            log.warning("Ignoring a config change of %s/%s: not a client entity", entity_type, name)
            return
        async with self._refresh_lock:
            configs = await self.zk.entity_configs(entity_type, name)
            if configs == self._client_configs.get((entity_type, name), {}):
                return
            if configs:
                self._client_configs[(entity_type, name)] = configs
            else:
                self._client_configs.pop((entity_type, name), None)
        self._notify_client_entity_configs(entity_type, name)

    async def _refresh_topic(self, name: str, watch: bool = False) -> None:
        """Re-read one topic and turn the difference against the snapshot into store events."""
        async with self._refresh_lock:
            watcher = self._spawner(lambda: self._refresh_topic(name, watch=True)) if watch else None
            assignment = await self.zk.topic_assignment(name, watcher)
            if assignment is None:
                self._topics.pop(name, None)
                return
            old = self._topics.get(name)
            configs = await self.zk.topic_configs(name)
            marked = name in await self.zk.topics_marked_for_deletion()
            states = dict(old.states) if old is not None else {}
            for index in assignment.partitions.keys() - states.keys():
                state = await self._read_state(name, index, assignment.partitions[index])
                if state is not None:
                    states[index] = state
            if assignment.topic_id is None:
                raise ValueError(f"topic znode of {name} has no topic_id (written before Kafka 2.8)")
            states.update(_newer_states(self._topics.get(name), states))
            topic = StoredTopic(
                name,
                assignment.topic_id,
                dict(assignment.partitions),
                configs,
                {
                    i: replace(s, replicas=assignment.partitions[i])
                    for i, s in states.items()
                    if i in assignment.partitions
                },
                marked,
                dict(assignment.adding_replicas),
                dict(assignment.removing_replicas),
            )
            self._topics[name] = topic
            for kind in _differences(old, topic):
                self._notify(StoreEvent(kind, name))

    async def _read_state(self, topic: str, index: int, replicas: tuple[int, ...]) -> PartitionState | None:
        found = await self.zk.partition_state(topic, index)
        if found is None:
            return None
        s = found.state
        return PartitionState(s.leader, s.leader_epoch, replicas, s.isr, s.controller_epoch, found.zk_version)

    # -- membership -------------------------------------------------------------------------------

    def brokers(self) -> Mapping[int, BrokerInfo]:
        """The registered (live) brokers, as last read."""
        return self._brokers

    def broker_epochs(self) -> Mapping[int, int]:
        """Each live broker's epoch (its registration's czxid)."""
        return self._broker_epochs

    def on_brokers_changed(self, listener: BrokersListener) -> None:
        """Call `listener(brokers)` on the loop whenever the set of live brokers changed."""
        self._brokers_listeners.append(listener)

    async def read_brokers(self) -> Mapping[int, BrokerInfo]:
        """Read the live brokers now (no watch), updating the snapshot."""
        self._set_brokers(await self.zk.live_brokers())
        return self._brokers

    async def _on_broker_children(self) -> None:
        found = await self.zk.live_brokers(self._spawner(self._on_broker_children))
        before = dict(self._broker_epochs)
        self._set_brokers(found)
        if before != self._broker_epochs:
            for listener in self._brokers_listeners:
                listener(self._brokers)

    def _set_brokers(self, found: Mapping[int, tuple[znodes.BrokerRegistration, int]]) -> None:
        self._brokers = {broker_id: _broker_info(reg) for broker_id, (reg, _) in sorted(found.items())}
        self._broker_epochs = {broker_id: epoch for broker_id, (_, epoch) in found.items()}

    # -- reads ------------------------------------------------------------------------------------

    def topics(self) -> Mapping[str, StoredTopic]:
        return self._topics

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def broker_configs(self, entity: str) -> Mapping[str, str]:
        return self._broker_configs.get(entity, {})

    def client_entity_configs(self, entity_type: str, name: str) -> Mapping[str, str]:
        return self._client_configs.get((entity_type, name), {})

    def client_entities(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        return self._client_configs

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        return self._group_configs.get(group_id, {})

    # -- admin writes -----------------------------------------------------------------------------

    async def create_topic(self, topic: StoredTopic) -> None:
        assignment = TopicAssignment(dict(topic.assignment), topic.topic_id)
        try:
            await self.zk.create_topic(topic.name, assignment, topic.configs)
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
            ) from None
        await self._refresh_topic(topic.name)

    async def add_partitions(self, name: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
        topic = self._existing(name)
        grown = TopicAssignment(
            {**topic.assignment, **assignment},
            topic.topic_id,
            topic.adding_replicas,
            topic.removing_replicas,
        )
        try:
            await self.zk.add_partitions(name, grown)
        except NoNodeError:
            raise _unknown_topic() from None
        await self._refresh_topic(name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._existing(name)
        await self.zk.change_entity_config("topics", name, configs)
        await self._refresh_topic(name)

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        await self.zk.change_entity_config("brokers", entity, configs)
        await self._refresh_broker_configs(entity)

    async def alter_client_entity_configs(
        self, entity_type: str, name: str, set: Mapping[str, str], delete: Iterable[str]
    ) -> None:
        client_entity_of(entity_type, name)
        current = await self.zk.entity_configs(entity_type, name)
        await self.zk.change_entity_config(entity_type, name, altered_configs(current, set, delete))
        await self._refresh_client_entity(entity_type, name)

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        await self.zk.change_entity_config(GROUPS, sanitize(group_id), configs)
        await self._refresh_group_configs(sanitize(group_id))

    async def request_deletion(self, name: str) -> None:
        self._existing(name)
        await self.zk.mark_topic_for_deletion(name)
        await self._refresh_topic(name)

    def _existing(self, name: str) -> StoredTopic:
        topic = self._topics.get(name)
        if topic is None or topic.marked_for_deletion:
            raise _unknown_topic()
        return topic

    # -- controller writes ------------------------------------------------------------------------

    async def elect_controller(self) -> int:
        """Take `/controller` and bump `/controller_epoch`; ControllerMovedError when another broker
        holds the seat. The new controller re-reads every partition state (Kafka's failover reload)."""
        self._seat = await self.zk.elect_controller(self._broker_id, int(time.time() * 1000))
        self._controller_epoch = self._seat.epoch
        async with self._refresh_lock:
            for name, topic in list(self._topics.items()):
                indexes = list(topic.assignment)
                read = await asyncio.gather(
                    *(self._read_state(name, index, topic.assignment[index]) for index in indexes)
                )
                states = {
                    index: state for index, state in zip(indexes, read, strict=True) if state is not None
                }
                self._topics[name] = replace(topic, states=states)
        return self._seat.epoch

    def resign(self) -> None:
        """Forget the seat: no controller write passes this store's check any more."""
        self._seat = None

    async def give_up_seat(self) -> None:
        """Forget the seat and delete `/controller` if this broker holds it (a controller that could
        not start hands the cluster to the next one)."""
        if self._seat is not None:
            self._seat = None
            await self.zk.delete_controller(self._broker_id)

    async def write_partition_states(
        self, states: Mapping[str, Mapping[int, PartitionState]], controller_epoch: int
    ) -> None:
        seat = self._check_seat(controller_epoch)
        creates: dict[tuple[str, int], LeaderAndIsrZNode] = {}
        updates: dict[tuple[str, int], tuple[LeaderAndIsrZNode, int]] = {}
        for name, by_partition in states.items():
            topic = self._topics.get(name)
            for index, state in by_partition.items():
                znode = LeaderAndIsrZNode(state.leader, state.leader_epoch, state.isr, state.controller_epoch)
                current = topic.states.get(index) if topic is not None else None
                if current is None:
                    creates[(name, index)] = znode
                else:
                    updates[(name, index)] = (znode, current.partition_epoch)
        written = await self.zk.create_partition_states(seat, creates)
        written.update(await self.zk.update_partition_states(seat, updates))
        for (name, index), version in written.items():
            topic = self._topics.get(name)
            if topic is None:
                continue
            if version is None:
                log.warning("Partition %s-%d state moved under the controller: re-reading it", name, index)
                fresh = await self._read_state(name, index, topic.assignment[index])
                stored = {index: fresh} if fresh is not None else {}
            else:
                stored = {index: replace(states[name][index], partition_epoch=version)}
            topic = self._topics.get(name)
            if topic is not None:
                self._topics[name] = replace(topic, states={**topic.states, **stored})

    async def write_replica_assignments(
        self, name: str, assignments: Mapping[int, ReplicaAssignment], controller_epoch: int
    ) -> None:
        seat = self._check_seat(controller_epoch)
        async with self._refresh_lock:  # a refresh reading the topic znode meanwhile would undo it
            topic = self._topics.get(name)
            if topic is None:
                return
            reassigned = with_replica_assignments(topic, assignments)
            znode = TopicAssignment(
                dict(reassigned.assignment),
                reassigned.topic_id,
                reassigned.adding_replicas,
                reassigned.removing_replicas,
            )
            await self.zk.reassign_topic(seat, name, znode)
            self._topics[name] = reassigned

    async def remove_topic(self, name: str, controller_epoch: int) -> None:
        seat = self._check_seat(controller_epoch)
        topic = self._topics.get(name)
        partitions = topic.assignment.keys() if topic is not None else ()
        await self.zk.delete_topic_znodes(seat, name, sorted(partitions))
        self._topics.pop(name, None)

    def _check_seat(self, controller_epoch: int) -> ControllerSeat:
        if self._seat is None:
            raise ControllerMovedError(f"broker {self._broker_id} is not the controller")
        if controller_epoch != self._seat.epoch:
            raise KafkaError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is not the current {self._seat.epoch}",
            )
        return self._seat


def _differences(old: StoredTopic | None, new: StoredTopic) -> Iterable[StoreEventKind]:
    if old is None:
        yield StoreEventKind.TOPIC_CREATED
        if new.marked_for_deletion:
            yield StoreEventKind.DELETION_REQUESTED
        return
    if new.assignment.keys() - old.assignment.keys():
        yield StoreEventKind.PARTITIONS_ADDED
    if dict(new.configs) != dict(old.configs):
        yield StoreEventKind.CONFIGS_CHANGED
    if new.marked_for_deletion and not old.marked_for_deletion:
        yield StoreEventKind.DELETION_REQUESTED


def _broker_info(registration: znodes.BrokerRegistration) -> BrokerInfo:
    endpoints = tuple(Endpoint(listener, host, port) for listener, host, port in registration.endpoints)
    return BrokerInfo(registration.broker_id, endpoints, registration.rack)


def _unknown_topic() -> KafkaError:
    return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")


def _newer_states(
    latest: StoredTopic | None, read: Mapping[int, PartitionState]
) -> dict[int, PartitionState]:
    """The states the controller wrote while a refresh was reading (they are not older than the
    refresh's reads: a higher partition epoch, or a partition the read did not find yet)."""
    if latest is None:
        return {}
    return {
        index: state
        for index, state in latest.states.items()
        if index not in read or state.partition_epoch > read[index].partition_epoch
    }
