"""KafkaZkClient: Kafka's ZooKeeper operations over one kazoo session, as coroutines on the event loop.

Owns the broker's ZooKeeper session and the bridge between kazoo's threads and asyncio. Every operation
is issued with kazoo's `*_async` call and awaited as an asyncio future, so the event loop never blocks
on ZooKeeper; watch callbacks and session-state changes fire on kazoo's threads and are handed to the
loop with `call_soon_threadsafe`, so listeners run on the loop like everything else (DESIGN.md, one
writer per state).

Operations are Kafka's (KafkaZkClient in Kafka's ZooKeeper mode), with its znodes and JSON
(`znodes.py`):
- the chroot of `zookeeper.connect` is created if missing, then Kafka's persistent paths;
- `register_broker` creates the ephemeral `/brokers/ids/<id>` and returns the **broker epoch**, the
  znode's czxid. A registration this session already holds is its own (Kafka's checked ephemeral
  create); one of another session is waited on, up to the time the caller gives, for its session
  to expire (a broker restarted at once finds its dead session's registration); still there after
  that, another live broker has the id (`BrokerIdInUseError`);
- `synced_controller` reads the controller's id and epoch after a `sync` (the brokers' check of a
  controller request with a newer epoch, server/control_plane.py);
- `elect_controller` creates the ephemeral `/controller` and bumps `/controller_epoch` in one `multi`
  conditional on the epoch's zkVersion, returning the new epoch and its zkVersion;
  `ControllerMovedError` when another broker holds the seat or the epoch moved meanwhile;
- controller writes (`create_partition_states`, `update_partition_states`, `reassign_topic`,
  `delete_topic_znodes`)
  are `multi`s that start with a check of `/controller_epoch`'s zkVersion, so a controller that lost
  its seat cannot write (Kafka 2.2+); a partition state update is also conditional on the state
  znode's zkVersion (the partition epoch) and reports per partition whether it applied;
- a producer id block is claimed by a write of `/latest_producer_id_block` conditional on the
  zkVersion read with the previous block (a create when the znode is missing), so two brokers never
  claim the same block;
- reads return decoded values with the zkVersion where a later conditional write needs it.

Session: `on_session_state(callback)` hears "connected", "suspended" (connection lost, session may
survive) and "expired" (ephemeral znodes gone: the broker must re-register and, if it was controller,
resign). Kazoo reconnects by itself, retrying at most `RECONNECT_MAX_DELAY_S` apart as ZooKeeper's
own client does (kazoo's default backoff doubles up to an hour, so a broker cut from ZooKeeper for
a minute would dial again only about a minute after the link came back).

Callers: the ZooKeeper-mode controller and broker start-up, the producer id manager's ZooKeeper block
source; tests against a real ZooKeeper server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from odradek.controller.zk import znodes
from odradek.controller.zk.errors import BrokerIdInUseError, ControllerMovedError
from odradek.controller.zk.znodes import (
    BrokerRegistration,
    LeaderAndIsrZNode,
    ProducerIdBlock,
    TopicAssignment,
    ZooKeeperConnect,
)
from odradek.scheduler import Lane, Scheduler

__all__ = ["BrokerIdInUseError", "ControllerMovedError", "ControllerSeat", "KafkaZkClient", "VersionedState"]

log = logging.getLogger(__name__)

RECONNECT_MAX_DELAY_S = 1.0

SessionListener = Callable[[str], None]
Watcher = Callable[[], None]
TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ControllerSeat:
    """What winning the election gives: the controller epoch and the zkVersion of `/controller_epoch`
    that every later controller write is conditional on."""

    epoch: int
    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class VersionedState:
    """A partition state as read, with its zkVersion (the partition epoch)."""

    state: LeaderAndIsrZNode
    zk_version: int


class KafkaZkClient:
    """One ZooKeeper session of a broker; create with `connect()`."""

    def __init__(self, connect: ZooKeeperConnect, session_timeout_ms: int, scheduler: Scheduler) -> None:
        self._loop = asyncio.get_running_loop()
        self._scheduler = scheduler
        self._connect = connect
        self._session_timeout_s = session_timeout_ms / 1000
        self._kazoo = KazooClient(
            hosts=connect.hosts + connect.chroot,
            timeout=self._session_timeout_s,
            connection_retry={"max_tries": -1, "max_delay": RECONNECT_MAX_DELAY_S},
        )
        self._session_listeners: list[SessionListener] = []
        self._kazoo.add_listener(self._on_kazoo_state)

    @classmethod
    async def connect(
        cls,
        connect: ZooKeeperConnect,
        session_timeout_ms: int,
        connection_timeout_ms: int,
        scheduler: Scheduler,
    ) -> KafkaZkClient:
        """Open the session (waiting at most `connection_timeout_ms`), create the chroot and Kafka's
        persistent paths; kazoo's blocking start and stop run in the scheduler's metadata-store lane."""
        client = cls(connect, session_timeout_ms, scheduler)
        await client._start(connection_timeout_ms, connect.chroot)
        return client

    async def _start(self, connection_timeout_ms: int, chroot: str) -> None:
        if chroot:
            bootstrap = KazooClient(hosts=self._connect.hosts, timeout=self._session_timeout_s)
            await self._wait_started(bootstrap, connection_timeout_ms)
            try:
                await self._bridge(bootstrap.ensure_path_async(chroot))
            finally:
                await self._scheduler.run(Lane.METADATA_STORE, _stop_and_close, bootstrap)
        await self._wait_started(self._kazoo, connection_timeout_ms)
        for path in znodes.PERSISTENT_PATHS:
            await self._bridge(self._kazoo.ensure_path_async(path))

    async def _wait_started(self, kazoo: KazooClient, connection_timeout_ms: int) -> None:
        event = kazoo.start_async()
        if not await self._scheduler.run(Lane.METADATA_STORE, event.wait, connection_timeout_ms / 1000):
            await self._scheduler.run(Lane.METADATA_STORE, _stop_and_close, kazoo)
            raise TimeoutError(
                f"could not connect to ZooKeeper at {self._connect.hosts} within {connection_timeout_ms} ms"
            )

    async def close(self) -> None:
        """End the session: this broker's ephemeral znodes (registration, controller seat) go at once."""
        await self._scheduler.run(Lane.METADATA_STORE, _stop_and_close, self._kazoo)

    # -- the thread bridge ------------------------------------------------------------------------------

    def _bridge(self, result: Any) -> asyncio.Future[Any]:
        """An asyncio future completed (on the loop) by a kazoo IAsyncResult."""
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle(done: Any) -> None:
            try:
                value = done.get_nowait()
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine as is
                self._loop.call_soon_threadsafe(_fail, future, exc)
            else:
                self._loop.call_soon_threadsafe(_succeed, future, value)

        result.rawlink(settle)
        return future

    def _watch(self, watcher: Watcher) -> Callable[[WatchedEvent], None]:
        return lambda _event: self._loop.call_soon_threadsafe(watcher)

    def on_session_state(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    def _on_kazoo_state(self, state: str) -> None:
        name = {KazooState.CONNECTED: "connected", KazooState.SUSPENDED: "suspended"}.get(state, "expired")
        for listener in self._session_listeners:
            self._loop.call_soon_threadsafe(listener, name)

    # -- generic reads ----------------------------------------------------------------------------------

    async def get(self, path: str, watcher: Watcher | None = None) -> tuple[bytes, Any] | None:
        """Data and stat of `path`, or None when it does not exist (a watcher then fires on creation)."""
        try:
            return await self._bridge(self._kazoo.get_async(path, self._watch(watcher) if watcher else None))
        except NoNodeError:
            if watcher is not None:
                await self._bridge(self._kazoo.exists_async(path, self._watch(watcher)))
            return None

    async def children(self, path: str, watcher: Watcher | None = None) -> list[str]:
        try:
            found = await self._bridge(
                self._kazoo.get_children_async(path, self._watch(watcher) if watcher else None)
            )
        except NoNodeError:
            return []
        return sorted(found)

    # -- cluster id and brokers -------------------------------------------------------------------------

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: the existing one, or `proposed` written first (Kafka's /cluster/id)."""
        try:
            await self._bridge(
                self._kazoo.create_async(
                    znodes.CLUSTER_ID_PATH, znodes.encode_cluster_id(proposed), makepath=True
                )
            )
        except NodeExistsError:
            pass
        found = await self.get(znodes.CLUSTER_ID_PATH)
        assert found is not None
        return znodes.decode_cluster_id(found[0])

    async def register_broker(self, registration: BrokerRegistration, expiry_wait_s: float = 0.0) -> int:
        """Create this broker's ephemeral registration; returns the broker epoch (its czxid). One this
        session already holds (a create whose answer a lost connection swallowed) is taken as is; one
        another session holds is waited on for up to `expiry_wait_s` (the session of this broker
        before a quick restart expires within the session timeout), then BrokerIdInUseError."""
        path = znodes.broker_path(registration.broker_id)
        data = znodes.encode_broker_registration(registration)
        deadline = self._loop.time() + expiry_wait_s
        announced = False
        while True:
            try:
                _, stat = await self._bridge(
                    self._kazoo.create_async(path, data, ephemeral=True, include_data=True)
                )
                return int(stat.czxid)
            except NodeExistsError:
                pass
            holder = await self._bridge(self._kazoo.exists_async(path))
            if holder is None:
                continue  # gone since: create it again
            if holder.ephemeralOwner == self.session_id:
                return int(holder.czxid)
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                raise BrokerIdInUseError(
                    f"broker id {registration.broker_id} is already registered in ZooKeeper by a live broker"
                )
            if not announced:
                announced = True
                log.warning(
                    "Broker id %d is registered in ZooKeeper by another session (0x%x): waiting up to %.1f s "
                    "for it to expire (a broker restarted before its old session ended) before registering",
                    registration.broker_id,
                    holder.ephemeralOwner,
                    remaining,
                )
            await self._until_deleted(path, remaining)

    @property
    def session_id(self) -> int | None:
        """The ZooKeeper session id (an ephemeral znode's ephemeralOwner), None while not connected."""
        client_id = self._kazoo.client_id
        return client_id[0] if client_id else None

    async def _until_deleted(self, path: str, timeout_s: float) -> None:
        """Return once `path` is gone or changed (its watch fired), or after `timeout_s`."""
        changed = asyncio.Event()
        if await self._bridge(self._kazoo.exists_async(path, self._watch(changed.set))) is None:
            return
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
        except TimeoutError:
            pass

    async def live_brokers(self, watcher: Watcher | None = None) -> dict[int, tuple[BrokerRegistration, int]]:
        """Every registered broker with its broker epoch; `watcher` fires when the set changes."""
        brokers: dict[int, tuple[BrokerRegistration, int]] = {}
        for child in await self.children(znodes.BROKER_IDS_PATH, watcher):
            found = await self.get(znodes.broker_path(int(child)))
            if found is not None:
                brokers[int(child)] = (
                    znodes.decode_broker_registration(int(child), found[0]),
                    found[1].czxid,
                )
        return brokers

    # -- controller -------------------------------------------------------------------------------------

    async def controller_id(self, watcher: Watcher | None = None) -> int | None:
        found = await self.get(znodes.CONTROLLER_PATH, watcher)
        return znodes.decode_controller(found[0]) if found is not None else None

    async def synced_controller(self) -> tuple[int | None, int | None]:
        """The controller's broker id and epoch (/controller, /controller_epoch; None when missing), read
        after a `sync`, so a session behind the ZooKeeper leader still sees a controller elected just now."""
        await self._bridge(self._kazoo.sync_async(znodes.CONTROLLER_EPOCH_PATH))
        epoch = await self.get(znodes.CONTROLLER_EPOCH_PATH)
        return await self.controller_id(), znodes.decode_controller_epoch(epoch[0]) if epoch else None

    async def delete_controller(self, broker_id: int) -> None:
        """Give up the controller seat if `broker_id` holds it (Kafka's triggerControllerMove), so the
        other brokers race again."""
        found = await self.get(znodes.CONTROLLER_PATH)
        if found is None or znodes.decode_controller(found[0]) != broker_id:
            return
        try:
            await self._bridge(self._kazoo.delete_async(znodes.CONTROLLER_PATH, found[1].version))
        except (NoNodeError, BadVersionError):
            pass

    async def elect_controller(self, broker_id: int, now_ms: int) -> ControllerSeat:
        """Take the controller seat and bump the controller epoch in one conditional multi."""
        epoch, version = await self._controller_epoch()
        transaction = self._kazoo.transaction()
        transaction.create(
            znodes.CONTROLLER_PATH, znodes.encode_controller(broker_id, now_ms), ephemeral=True
        )
        transaction.set_data(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(epoch + 1), version)
        results = await self._bridge(transaction.commit_async())
        if any(isinstance(result, Exception) for result in results):
            raise ControllerMovedError(f"broker {broker_id} lost the controller election: {results}")
        return ControllerSeat(epoch + 1, version + 1)

    async def _controller_epoch(self) -> tuple[int, int]:
        found = await self.get(znodes.CONTROLLER_EPOCH_PATH)
        if found is None:
            try:
                await self._bridge(
                    self._kazoo.create_async(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(0))
                )
            except NodeExistsError:
                pass
            found = await self.get(znodes.CONTROLLER_EPOCH_PATH)
            assert found is not None
        return znodes.decode_controller_epoch(found[0]), found[1].version

    async def _fenced_multi(self, seat: ControllerSeat, build: Callable[[Any], None]) -> list[Any]:
        """Commit a multi that first checks the controller epoch's zkVersion; ControllerMovedError when
        that check fails (another controller was elected since)."""
        transaction = self._kazoo.transaction()
        transaction.check(znodes.CONTROLLER_EPOCH_PATH, seat.epoch_zk_version)
        build(transaction)
        results = await self._bridge(transaction.commit_async())
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(f"controller epoch {seat.epoch} is no longer current")
        return list(results[1:])

    # -- topics -----------------------------------------------------------------------------------------

    async def create_topic(self, name: str, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """Kafka's topic creation by any broker: the config znode, then the assignment the controller
        watches for. TOPIC_ALREADY_EXISTS is the caller's to map from NodeExistsError."""
        await self._bridge(
            self._kazoo.create_async(
                znodes.entity_config_path("topics", name), znodes.encode_entity_config(configs), makepath=True
            )
        )
        await self._bridge(
            self._kazoo.create_async(znodes.topic_path(name), znodes.encode_topic_assignment(assignment))
        )

    async def topics(self, watcher: Watcher | None = None) -> list[str]:
        return await self.children(znodes.TOPICS_PATH, watcher)

    async def topic_assignment(self, name: str, watcher: Watcher | None = None) -> TopicAssignment | None:
        found = await self.get(znodes.topic_path(name), watcher)
        return znodes.decode_topic_assignment(found[0]) if found is not None else None

    async def topic_configs(self, name: str) -> dict[str, str]:
        return await self.entity_configs("topics", name)

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        """The configs of `/config/<type>/<name>` (none when the znode is absent, or empty: a user's
        znode made only as the parent of its `/clients/<c>`)."""
        found = await self.get(znodes.entity_config_path(entity_type, name))
        return znodes.decode_entity_config(found[0]) if found is not None and found[0] else {}

    async def client_entity_names(self) -> list[tuple[str, str]]:
        """Every client entity znode: (`users`, `<u>`), (`users`, `<u>/clients/<c>`), (`clients`, `<c>`)."""
        users = await self.children(f"{znodes.CONFIG_PATH}/users")
        names = [("users", user) for user in users]
        for user in users:
            clients = await self.children(f"{znodes.CONFIG_PATH}/users/{user}/clients")
            names.extend(("users", f"{user}/clients/{client}") for client in clients)
        names.extend(("clients", client) for client in await self.children(f"{znodes.CONFIG_PATH}/clients"))
        return names

    async def add_partitions(self, name: str, assignment: TopicAssignment) -> None:
        """Rewrite a topic's assignment with its added partitions (Kafka's AdminZkClient.addPartitions);
        NoNodeError when the topic is gone."""
        await self._bridge(
            self._kazoo.set_async(znodes.topic_path(name), znodes.encode_topic_assignment(assignment))
        )

    async def reassign_topic(self, seat: ControllerSeat, name: str, assignment: TopicAssignment) -> None:
        """Rewrite a topic's znode with a reassignment's replicas, adding and removing replicas
        (controller only, as Kafka's controller writes them for AlterPartitionReassignments)."""
        data = znodes.encode_topic_assignment(assignment)
        results = await self._fenced_multi(seat, lambda t: t.set_data(znodes.topic_path(name), data))
        if isinstance(results[0], Exception):
            raise results[0]

    async def change_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Write `/config/<type>/<name>`, then the `/config/changes/config_change_<seq>` notification
        every broker watches (Kafka's AdminZkClient.changeConfigs)."""
        path = znodes.entity_config_path(entity_type, name)
        data = znodes.encode_entity_config(configs)
        try:
            await self._bridge(self._kazoo.set_async(path, data))
        except NoNodeError:
            await self._bridge(self._kazoo.create_async(path, data, makepath=True))
        await self._bridge(
            self._kazoo.create_async(
                f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
                znodes.encode_config_change(entity_type, name),
                sequence=True,
            )
        )

    async def config_changes(self, watcher: Watcher | None = None) -> list[str]:
        """The notification znodes under `/config/changes` (sorted: by sequence)."""
        return await self.children(znodes.CONFIG_CHANGES_PATH, watcher)

    async def config_change(self, child: str) -> tuple[str, str] | None:
        """The (entity type, name) of one notification, or None when it was purged meanwhile."""
        found = await self.get(f"{znodes.CONFIG_CHANGES_PATH}/{child}")
        return znodes.decode_config_change(found[0]) if found is not None else None

    async def mark_topic_for_deletion(self, name: str) -> None:
        """Create `/admin/delete_topics/<t>` (the controller deletes the topic); already marked is fine."""
        try:
            await self._bridge(self._kazoo.create_async(znodes.delete_topic_path(name), b"", makepath=True))
        except NodeExistsError:
            pass

    async def topics_marked_for_deletion(self, watcher: Watcher | None = None) -> list[str]:
        return await self.children(znodes.DELETE_TOPICS_PATH, watcher)

    async def partition_state(self, topic: str, partition: int) -> VersionedState | None:
        found = await self.get(znodes.partition_state_path(topic, partition))
        if found is None:
            return None
        return VersionedState(znodes.decode_partition_state(found[0]), found[1].version)

    async def create_partition_states(
        self, seat: ControllerSeat, states: Mapping[TopicPartitionKey, LeaderAndIsrZNode]
    ) -> dict[TopicPartitionKey, int | None]:
        """Create new partitions' state znodes (controller only), pipelined; per partition the zkVersion
        (0), or None when it already existed."""

        async def create(topic: str, partition: int, state: LeaderAndIsrZNode) -> int | None:
            await self._bridge(self._kazoo.ensure_path_async(znodes.partition_path(topic, partition)))
            data = znodes.encode_partition_state(state)
            path = znodes.partition_state_path(topic, partition)
            results = await self._fenced_multi(seat, lambda t: t.create(path, data))
            return None if isinstance(results[0], Exception) else 0

        keys = list(states)
        created = await asyncio.gather(*(create(t, p, states[(t, p)]) for t, p in keys))
        return dict(zip(keys, created, strict=True))

    async def update_partition_states(
        self, seat: ControllerSeat, updates: Mapping[TopicPartitionKey, tuple[LeaderAndIsrZNode, int]]
    ) -> dict[TopicPartitionKey, int | None]:
        """Write each partition's new state conditionally on its zkVersion (controller only); per
        partition the new zkVersion (partition epoch), or None when the version moved (stale)."""

        async def update(topic: str, partition: int, state: LeaderAndIsrZNode, expected: int) -> int | None:
            data = znodes.encode_partition_state(state)
            path = znodes.partition_state_path(topic, partition)
            results = await self._fenced_multi(seat, lambda t: t.set_data(path, data, expected))
            return None if isinstance(results[0], Exception) else results[0].version

        keys = list(updates)
        written = await asyncio.gather(*(update(t, p, *updates[(t, p)]) for t, p in keys))
        return dict(zip(keys, written, strict=True))

    async def delete_topic_znodes(self, seat: ControllerSeat, name: str, partitions: Iterable[int]) -> None:
        """Remove a deleted topic's znodes (controller only): states, the assignment, its config and the
        deletion marker."""
        paths = [znodes.partition_state_path(name, p) for p in partitions]
        paths += [znodes.partition_path(name, p) for p in partitions]
        paths += [znodes.partitions_path(name), znodes.topic_path(name)]
        for path in paths:
            await self._fenced_multi(seat, lambda t, p=path: t.delete(p))
        for path in (znodes.entity_config_path("topics", name), znodes.delete_topic_path(name)):
            try:
                await self._bridge(self._kazoo.delete_async(path))
            except NoNodeError:
                pass

    # -- producer id blocks -----------------------------------------------------------------------------

    async def latest_producer_id_block(self) -> tuple[ProducerIdBlock | None, int]:
        """The last block claimed by any broker (None when none was: the znode is empty or missing) and
        the zkVersion the next claim is conditional on (-1 when the znode is missing)."""
        found = await self.get(znodes.PRODUCER_ID_BLOCK_PATH)
        if found is None:
            return None, -1
        data, stat = found
        return (znodes.decode_producer_id_block(data) if data else None), stat.version

    async def conditional_update_producer_id_block(self, block: ProducerIdBlock, zk_version: int) -> bool:
        """Write `block` if `/latest_producer_id_block` is still at `zk_version` (-1: create it); False
        when another broker claimed a block since it was read."""
        data = znodes.encode_producer_id_block(block)
        path = znodes.PRODUCER_ID_BLOCK_PATH
        try:
            if zk_version < 0:
                await self._bridge(self._kazoo.create_async(path, data))
            else:
                await self._bridge(self._kazoo.set_async(path, data, zk_version))
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        return True


def _succeed(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _stop_and_close(kazoo: KazooClient) -> None:
    kazoo.stop()
    kazoo.close()
