"""The broker (`KafkaServer`, Kafka's KafkaServer of ZooKeeper mode): wires config, storage, the
metadata cache, the controller, replication, the group coordinator and the listeners.

Owns the broker's life cycle.
- Startup: set the interpreter's thread switch interval to 1 ms (THREAD_SWITCH_INTERVAL_S), so
  worker threads holding the GIL delay the event loop less (and `run_broker`, once started, moves
  the objects start-up made out of the cyclic collector's generations, `gc.freeze`, so its passes
  stay short, and raises the collector's young threshold, GC_THRESHOLDS, so that a many-partition
  request's objects do not set off its passes); read the metadata store (the local JSON file, or
  ZooKeeper: see Modes); lock and load the log dirs (LogManager: recovery, per-topic log configs,
  producer.id.expiration.ms; the partitions on disk the store does not assign here are reported and
  left out of the start-up progress lines); check or write meta.properties (broker.id, cluster.id);
  bind every listener (SSL ones with their TLS settings, loaded with the config; a SASL listener's
  connections each get a SASL gate, server/sasl_authenticator.py, its settings checked when the
  broker is built, SCRAM credentials read from the store of the moment); the broker's own
  connections to other brokers (controller channel, replica fetchers, to-controller, transaction
  markers and verification) secure and authenticate themselves as the inter-broker listener says
  (`inter_broker_security`); start the ReplicaManager and the group coordinator; become controller
  (local mode: the controller lives in this process and talks to this broker through a
  `LocalChannel`, with the same LeaderAndIsr / UpdateMetadata / StopReplica requests a
  ZooKeeper-mode controller sends).
  The controller's LeaderAndIsr only queues the partitions: their logs open in the scheduler's
  log-load lane (`partition_loader_threads`: the larger of num.io.threads and
  num.recovery.threads.per.data.dir per log dir) after the port is open, and each partition serves
  as soon as it is ready.
- Control plane (`control_plane`, server/control_plane.py): the in-process `LocalChannel` and, in
  ZooKeeper mode, the wire handlers (handlers/leader_and_isr.py, update_metadata.py,
  stop_replica.py) hand it the controller's requests; it fences each whole request by controller
  epoch (a newer one from the wire checked against ZooKeeper's /controller and /controller_epoch,
  `KafkaZkClient.synced_controller`) and broker epoch (`broker_epoch`, this broker's registration
  epoch, KIP-380), then gives LeaderAndIsr and StopReplica to the ReplicaManager and UpdateMetadata
  to the metadata cache.
  Topic config changes come from the store's watch (Kafka: /config/changes) and reach the metadata
  cache and the existing logs.
- Dynamic broker configs (Kafka's DynamicBrokerConfig): at start, after the store is read, and on
  every change the store reports for `<default>` or this broker's id, `config` becomes the static
  config under the stored dynamic layers (`KafkaConfig.with_dynamic`; stored values it refuses are
  logged and the previous config kept; a change heard while starting is applied once the broker
  watches) and is applied live: every topic's LogConfig is rebuilt (topic override > per-broker >
  cluster-wide default > static > code default), the log cleaner takes the new log.cleaner.*
  settings at its next run (and log.cleaner.backoff.ms at its next wait), the listeners the new
  connection limits (max.connections at most the share of file descriptors fixed at start), the
  ReplicaManager's replication quotas the leader/follower.replication.throttled.rate (KIP-73; the
  topics' throttled replica lists follow their configs) and its moves between log dirs
  replica.alter.log.dirs.io.max.bytes.per.second (KIP-113), and the controller, if here,
  unclean.leader.election.enable for its next election.
- Leadership: the ReplicaManager's leadership changes of `__consumer_offsets` and
  `__transaction_state` partitions load and unload the group and transaction coordinators' shards
  (Kafka's onLeadershipChange).
- The coordinators, the transaction-marker channel and the transaction verifier never see the
  KafkaServer: each takes small Protocols of its own layer, given here the objects that satisfy them (the
  metadata cache; the broker itself for `auto_create_topic` and `write_txn_markers`; the
  ReplicaManager through `ReplicaManagerLog`; the ProducerIdManager; the transaction coordinator as
  the verifier's coordinator locator).
- Authorization: `authorizer` is `AllowEverything` without `authorizer.class.name`, else an
  `AclAuthorizer` (security/acl_authorizer.py) fed, once the store is loaded, by `acl_store`: Kafka's
  ACL znodes in ZooKeeper mode (reloaded after a session expiry), `__acls.json` in the first log dir
  on a single node (security/acl_store.py). The handlers ask it (server/authz.py).
- Admin: `admin` (AdminManager) checks and writes topic changes to the store; the controller reacts.
  `wait_for_leaders` is the wait of Kafka's delayed admin operations: every partition is in the
  metadata cache with a live leader, and those this broker leads serve.
- Scheduling: the broker owns the one `Scheduler` (odradek/scheduler.py; lanes sized by
  `lane_threads`) and hands it to the components; it closes it last. Its own periodic jobs run
  their work in a lane: retention every log.retention.check.interval.ms (log-io); the log cleaner
  every log.cleaner.backoff.ms (cleaner; each run cleans until no log qualifies); flush by
  flush.ms / flush.messages checked every log.flush.scheduler.interval.ms but at least every second
  (log-io; rolled segments are flushed soon after the roll, as Kafka does on roll); recovery point
  and log start offset checkpoints every log.flush.offset.checkpoint.interval.ms (log-io). The
  high watermark checkpoint is the ReplicaManager's (replica.high.watermark.checkpoint.interval.ms).
- Shutdown (SIGTERM / SIGINT, or `shutdown()`): first, in ZooKeeper mode with
  controlled.shutdown.enable, the controlled shutdown (Kafka's): while the broker still serves (its
  followers catch up, clients get NOT_LEADER_OR_FOLLOWER and move), ControlledShutdown goes to the
  active controller through `to_controller` (in-process when this broker is controller: it moves
  its own partitions before resigning), which moves the leadership of its replicated partitions to
  other ISR members and takes it out of the ISRs it follows; while partitions remain (no other ISR
  member yet) or the controller cannot be reached, it is asked again after
  controlled.shutdown.retry.backoff.ms, controlled.shutdown.max.retries attempts in all (each
  bounded by controller.socket.timeout.ms), unless its metadata lists no other live broker (then
  there is nowhere to move leadership: no retry; deliberate deviation, Kafka retries all the same);
  one INFO line tells how many partitions moved and how many remain, and the shutdown goes on
  whatever the outcome. Then: stop accepting; release admin requests waiting for leaders; stop the
  group coordinator, which answers every JoinGroup / SyncGroup parked in a rebalance (and any group
  request still queued) with NOT_COORDINATOR, as Kafka does when a coordinator unloads its groups;
  let connections answer what they have already received; stop the controller, then the
  ReplicaManager (its loader finishes only the partitions in progress; final high watermark
  checkpoint) and the periodic jobs; then LogManager.shutdown (flush, checkpoints, clean shutdown
  marker), then the scheduler.

HTTP (`http.listeners`, none by default): bound with the Kafka listeners (a port in use stops the
start the same way), served once started: Prometheus `/metrics` from a registry of its own
(server/metrics.py; the network layer then times every request for it) and the web console at `/`
(odradek/console, reading this broker over its own listeners), one aiohttp server
(server/console_host.py); the HTTP listeners and the console close first at shutdown.

Listeners: every entry of `listeners` is bound (all PLAINTEXT; names mapped by
listener.security.protocol.map). The broker registers one advertised endpoint per entry of
`advertised.listeners` (else of `listeners`; a port 0 listener advertises the port it was bound to),
and handlers answer with the endpoints of the listener the request arrived on.

Modes: without `zookeeper.connect`, a single node: the store is the local JSON file and this broker
is always the controller. With it, a ZooKeeper-mode cluster member (Kafka's KafkaServer start-up):
- connect (zookeeper.session.timeout.ms, zookeeper.connection.timeout.ms; the chroot is created),
  take the cluster id from `/cluster/id` (written if absent) and check it against meta.properties;
- the store is a `ZkMetadataStore` (controller/zk/store.py), loaded before the logs;
- after binding the listeners (the registration carries their ports, a port 0 one's too), register
  `/brokers/ids/<id>` (ephemeral; the inter-broker listener's endpoint first, then the others;
  broker.rack), and only then accept connections, so that a port that accepts means a registered
  broker (a supervisor's port check means "up"). Deliberate deviation: Kafka's socket server
  accepts before the broker registers; here a controller that hears of the broker a moment before
  it accepts connects again after its channel's backoff. An id registered by another session (this
  broker's own, when it was killed and started again before that session expired) is waited on, with
  one WARNING line, for zookeeper.session.timeout.ms + REGISTRATION_EXPIRY_MARGIN_MS (Kafka exits
  at once, KAFKA-7165's report); still held after that, a live broker has it: the start-up stops
  with `BrokerIdInUseError` (`odradek serve` logs it and exits 1). A stop asked during the wait
  shuts the broker down without registering;
- race for `/controller`: the winner runs the `Controller` over the live brokers of `/brokers/ids`,
  talking to this broker through a `LocalChannel` and to the others through a `RemoteChannel`
  (one connection per live broker on its inter-broker listener, kept in step with `/brokers/ids`);
  membership changes reach it;
  a loser watches `/controller` and races again when it goes; a controller whose fenced write fails
  resigns and watches again;
- ZooKeeper session expiry: when the new session is up, the broker resigns if it was controller,
  reloads the store and the ACLs (their watches died with the session), registers again and races again;
- producer ids: the broker's `ProducerIdManager` claims its blocks in `/latest_producer_id_block`
  (cluster-wide), where a single node records them in `<first log dir>/producer-id-block`;
- shutdown closes the session after the controller stopped (registration and seat go at once).

Exposes to handlers (through `RequestContext.broker`): `config`, `broker_id`, `clock`,
`metadata_cache`, `admin`, `log_manager`, `replica_manager`, `control_plane`, `group_coordinator`,
`txn_coordinator`, `txn_verifier` (the leader's transaction verification),
`fetch_sessions` (the FetchSessionCache), `producer_id_manager`, `cluster_id`, `advertised_endpoints()`,
`auto_create_topic()` (Kafka's auto topic creation), `wait_for_leaders()` and `write_txn_markers()`.

Callers: `odradek serve` (cli/serve.py) through `run_broker`, and in-process tests.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.controller.admin import AdminManager
from odradek.controller.channel import ClusterChannel, LocalChannel
from odradek.controller.controller import Controller, known_brokers
from odradek.controller.elections import LeaderRebalance
from odradek.controller.local import LocalMetadataStore
from odradek.controller.meta_properties import MetaPropertiesError, ensure_meta_properties, new_cluster_id
from odradek.controller.metadata import BrokerInfo, Endpoint, TopicMetadata
from odradek.controller.producer_ids import (
    FileProducerIdBlockSource,
    ProducerIdBlockSource,
    ProducerIdManager,
    ZkProducerIdBlockSource,
)
from odradek.controller.remote_channel import ChannelSettings, RemoteChannel
from odradek.controller.store import DEFAULT_BROKER_ENTITY, MetadataStore, StoreEvent, StoreEventKind
from odradek.controller.waiters import wait_until
from odradek.controller.zk.errors import BrokerIdInUseError, ControllerMovedError
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.partitioning import OFFSETS_TOPIC, TXN_TOPIC
from odradek.coordinator.runtime import ReplicaManagerLog
from odradek.coordinator.share_coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from odradek.coordinator.txn_coordinator import TransactionCoordinator
from odradek.coordinator.txn_markers import TxnMarkerChannel
from odradek.network_client import ClientSecurity
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from odradek.repeated_failures import RepeatedFailures
from odradek.replication import fencing
from odradek.replication.alter_log_dirs import REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND
from odradek.replication.fetcher import FetcherSettings
from odradek.replication.quotas import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from odradek.replication.replica_manager import ReplicaManager
from odradek.replication.txn_verification import TxnVerifier
from odradek.replication.types import LeadershipChange, TopicPartition, TxnMarker
from odradek.scheduler import Job, Lane, Lanes, Scheduler
from odradek.security.acl_authorizer import AclAuthorizer, authorizer_for
from odradek.security.acl_store import AclStore, LocalAclStore, ZkAclStore
from odradek.security.client_config import BlockingClientSecurity
from odradek.security.sasl import credentials as scram_credentials
from odradek.security.sasl.scram import ScramCredential, ScramMechanism
from odradek.server import group_configs
from odradek.server.client_quotas import ClientQuotas, QuotaWindow
from odradek.server.config import ConfigError, KafkaConfig, parse_connection_overrides
from odradek.server.console_host import start_console
from odradek.server.control_plane import ControlPlane
from odradek.server.controller_contact import ControllerContact
from odradek.server.dispatcher import Dispatcher
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.limits import (
    ConnectionLimits,
    connection_limits,
    descriptor_budget_for_config,
    resolve_overrides,
)
from odradek.server.metadata_cache import MetadataCache
from odradek.server.metrics import RequestMetrics, broker_registry
from odradek.server.sasl_authenticator import authenticator_for
from odradek.server.sasl_listener import inter_broker_authenticate, inter_broker_client, sasl_listeners
from odradek.server.share_partitions import SharePartitionManager
from odradek.server.share_persister import SharePersister
from odradek.server.socket_server import SocketServer
from odradek.server.to_controller import BrokerToControllerChannel, ControllerUnavailable
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.manager import LogManager
from odradek.tasks import cancel_and_wait

if TYPE_CHECKING:
    from odradek.console.web import ConsoleServer
    from odradek.controller.zk.client import KafkaZkClient
    from odradek.controller.zk.store import ZkMetadataStore
    from odradek.controller.zk.znodes import BrokerRegistration

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_TIMEOUT_S = 30.0
ROLLED_SEGMENT_FLUSH_MS = 1000
# The interpreter's thread switch interval (Python's default is 5 ms): while worker threads create or
# load logs, the event loop waits for the GIL up to one interval per contending thread. Measured during
# a 3,000-partition creation (8 loader threads): ApiVersions p99 9-10 ms and worst 65 ms at 1 ms,
# against p99 15-29 ms and worst 99-109 ms at 5 ms, creation speed unchanged.
THREAD_SWITCH_INTERVAL_S = 0.001
# The cyclic collector's generation thresholds (Python's default is 700, 10, 10). A Fetch of 1,000
# partitions holds several thousand request and result objects alive at once: at 700 a young pass
# ran inside nearly every such request and moved its objects to the older generations, and full
# passes, which walk every partition's state made after start-up, followed. Measured at 10 MB/s over
# 1,000 partitions (bench/latency.py): 18,623 young and 137 full passes in 20 s, 3.2 s of the broker's
# 18.8 s of CPU, p99 44 ms; at 5,000-50,000 3 to 16 young passes and none full, 0.01-0.03 s, p99
# 8-12 ms. Over 100 partitions no request reaches 700 objects and nothing changes.
GC_THRESHOLDS = (20_000, 10, 10)
AUTO_CREATE_WAIT_S = 2.0  # how long Metadata / FindCoordinator wait for an auto-created topic's leaders
ZOOKEEPER_RETRY_S = 1.0  # between attempts of a background election or re-registration that failed
# How long past zookeeper.session.timeout.ms a broker waits for its id's registration by another session
# to go: ZooKeeper expires sessions on its tick (tickTime, 3 s by default), then notifies the watchers.
REGISTRATION_EXPIRY_MARGIN_MS = 5000

T = TypeVar("T")


def leader_rebalance(config: KafkaConfig) -> LeaderRebalance | None:
    """auto.leader.rebalance.enable's settings (None when off)."""
    if not config["auto.leader.rebalance.enable"]:
        return None
    return LeaderRebalance(
        config["leader.imbalance.check.interval.seconds"], config["leader.imbalance.per.broker.percentage"]
    )


def fetcher_settings(config: KafkaConfig) -> FetcherSettings:
    """The replica fetchers' settings: Kafka's replica.fetch.* keys."""
    return FetcherSettings(
        config.broker_id,
        max_wait_ms=config["replica.fetch.wait.max.ms"],
        min_bytes=config["replica.fetch.min.bytes"],
        max_bytes=config["replica.fetch.response.max.bytes"],
        partition_max_bytes=config["replica.fetch.max.bytes"],
        backoff_ms=config["replica.fetch.backoff.ms"],
        request_timeout_ms=config["replica.socket.timeout.ms"],
        num_fetchers=config["num.replica.fetchers"],
        security=inter_broker_security(config),
    )


def lane_threads(config: KafkaConfig) -> dict[Lane, int]:
    """The scheduler's lanes sized by Kafka's keys (the others have one thread): background.threads
    for flushes, checkpoints and retention, the partition loader threads for logs, num.io.threads for
    the heavy parts of requests."""
    return {
        Lane.LOG_IO: config["background.threads"],
        Lane.LOG_LOAD: partition_loader_threads(config),
        Lane.REQUEST: config["num.io.threads"],
    }


def partition_loader_threads(config: KafkaConfig) -> int:
    """Threads that create and open partition logs off the event loop: Kafka does this work on its
    request handler threads (num.io.threads) and at start-up recovery on
    num.recovery.threads.per.data.dir per log dir, so the pool takes the larger of the two."""
    return max(config["num.io.threads"], config["num.recovery.threads.per.data.dir"] * len(config.log_dirs))


class KafkaServer:
    """One broker process's state and components. Components exist once `start()` returned."""

    log_manager: LogManager
    replica_manager: ReplicaManager
    control_plane: ControlPlane
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    share_persister: SharePersister
    share_partitions: SharePartitionManager
    txn_verifier: TxnVerifier
    producer_id_manager: ProducerIdManager
    controller: Controller | None
    store: MetadataStore
    _zk_store: ZkMetadataStore  # ZooKeeper mode only

    def __init__(self, config: KafkaConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.clock = clock
        self.cluster_id = ""
        # The registration epoch (the czxid of /brokers/ids/<id>), set when the broker registers in
        # ZooKeeper mode; NO_EPOCH on a single node: controller requests' broker epochs go unchecked.
        self.broker_epoch = fencing.NO_EPOCH
        self.scheduler = Scheduler(clock, Lanes(lane_threads(config)))
        self.store = LocalMetadataStore(config.log_dirs[0], self.scheduler)
        self.authorizer = authorizer_for(config)
        self.acl_store: AclStore | None = None  # with an AclAuthorizer, once started
        self.metadata_cache = MetadataCache(config.broker_id)
        self.admin = AdminManager(
            self.store,
            self.metadata_cache.brokers,
            config["max.broker.partitions"],
        )
        self._shutting_down = False
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"], clock)
        self._bound: dict[str, tuple[str, int]] = {}
        self._start_limits = connection_limits(config)
        self.request_metrics = RequestMetrics()
        observer = self.request_metrics if config.http_listeners else None
        self.quotas = ClientQuotas(
            QuotaWindow(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)
        )
        self._dispatcher = Dispatcher(self, quotas=self.quotas)
        self._server = SocketServer(self._dispatcher, self.scheduler, self._start_limits, observer)
        self._sasl_listeners = sasl_listeners(config, self._scram_credential)  # ConfigError when invalid
        self._http: ConsoleServer | None = None  # http.listeners: /metrics and the console
        self._periodic_jobs: list[Job] = []
        self._started = False
        self._stop_requested = asyncio.Event()
        self.controller = None
        self.controller_contact: ControllerContact | None = None  # ZooKeeper mode only
        self._zk: KafkaZkClient | None = None  # ZooKeeper mode only (kazoo is imported only then)
        self._election_lock = asyncio.Lock()
        self._remote_channel: RemoteChannel | None = None  # while controller in ZooKeeper mode
        self._session_expired = False
        self._background: set[asyncio.Task[None]] = set()

    def _scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """A user's SCRAM credential, from the store of the moment (ZooKeeper's once connected)."""
        return scram_credentials.lookup(self.store, mechanism, user)

    def advertised_endpoints(self) -> tuple[Endpoint, ...]:
        """Where clients are told to connect, per listener (advertised.listeners, else listeners): an
        empty host is this machine's name, port 0 the port the listener was bound to."""
        return tuple(
            Endpoint(
                listener.name,
                listener.host or socket.getfqdn(),
                listener.port or self._bound.get(listener.name, ("", 0))[1],
            )
            for listener in self.config.advertised_listeners
        )

    # -- life cycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the store and log dirs, start the components, become controller, then accept."""
        sys.setswitchinterval(THREAD_SWITCH_INTERVAL_S)
        config = self.config
        zk_cluster_id = None
        if config.zookeeper_connect is not None:
            zk_cluster_id = await self._connect_zookeeper(config.zookeeper_connect)
        else:
            self.store.load()
        config = self.config = self._stored_dynamic_config()
        if config.dynamic_default or config.dynamic_broker:
            self._server.update_limits(self._connection_limits())
        topic_configs = {name: config.log_config(t.configs) for name, t in self.store.topics().items()}
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config(),
            self.clock,
            topic_configs,
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
            cleaner_config=config.cleaner_config(),
            max_open_files=descriptor_budget_for_config(config).max_open_files,
            lanes=self.scheduler.lanes,
        )
        self.log_manager.report_unknown(self._assigned_here())
        self.cluster_id = ensure_meta_properties(
            config.log_dirs, self.broker_id, zk_cluster_id or config.cluster_id
        )
        self.metadata_cache.cluster_id = self.cluster_id
        self.producer_id_manager = ProducerIdManager(self._producer_id_block_source())
        for listener in config.listeners:
            self._bound[listener.name] = await self._server.bind(
                listener.name,
                listener.host,
                listener.port,
                listener.security_protocol,
                config.listener_ssl.get(listener.name),
            )
        for name, sasl_listener in self._sasl_listeners.items():
            self._server.authenticate(name, authenticator_for(sasl_listener, self._dispatcher.handlers))
        if config.http_listeners:
            self._bind_http()
        self.to_controller = BrokerToControllerChannel(
            self.broker_id,
            self.metadata_cache,
            config.inter_broker_listener_name,
            lambda: self.controller,
            request_timeout_ms=config["request.timeout.ms"],
            security=inter_broker_security(config),
        )
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.metadata_cache,
            self.clock,
            scheduler=self.scheduler,
            topic_config=self._topic_log_config,
            log_dirs=config.log_dirs,
            checkpoint_interval_ms=config["replica.high.watermark.checkpoint.interval.ms"],
            fetcher_settings=fetcher_settings(config),
            replica_lag_time_max_ms=config["replica.lag.time.max.ms"],
            alter_partition=self.to_controller.alter_partition if self._zk is not None else None,
            broker_epoch=lambda: self.broker_epoch,
        )
        self.control_plane = ControlPlane(
            self.replica_manager,
            self.metadata_cache,
            lambda: self.broker_epoch,
            self._zk.synced_controller if self._zk is not None else None,
            config["zookeeper.session.timeout.ms"] / 1000,
        )
        if self._zk is not None:
            self.controller_contact = self._controller_contact(self._zk)
        self.replica_manager.start()
        self._set_replication_rates()
        for name, topic in self.store.topics().items():
            self.metadata_cache.update_topic_configs(name, topic.configs)
            self._set_throttled_replicas(name, topic.configs)
        await self._start_authorizer()
        self.store.watch(self._on_store_event)
        self.store.watch_broker_configs(self._on_broker_configs_changed)
        self.quotas.watch(self.store)
        if not self._dynamic_config_current():
            self._on_broker_configs_changed("a change during start-up")
        self.group_coordinator = GroupCoordinator(
            config,
            self.clock,
            self.metadata_cache,
            self,
            ReplicaManagerLog(self.replica_manager, OFFSETS_TOPIC),
            self.scheduler,
        )
        self.group_coordinator.group_configs = self.store.group_configs
        await self.group_coordinator.startup()
        self.txn_coordinator = TransactionCoordinator(
            config,
            self.clock,
            self.metadata_cache,
            self,
            ReplicaManagerLog(self.replica_manager, TXN_TOPIC),
            TxnMarkerChannel(
                self.broker_id,
                self.config.inter_broker_listener_name,
                self.metadata_cache,
                self,
                inter_broker_security(config),
            ),
            self.producer_id_manager,
            self.scheduler,
        )
        await self.txn_coordinator.startup()
        self.share_coordinator = ShareCoordinator(
            config,
            self.clock,
            self.metadata_cache,
            self,
            ReplicaManagerLog(self.replica_manager, SHARE_STATE_TOPIC),
            self.scheduler,
        )
        await self.share_coordinator.startup()
        self.share_persister = SharePersister(
            self.broker_id,
            self.config.inter_broker_listener_name,
            self.config["request.timeout.ms"],
            self.share_coordinator,
            inter_broker_security(config),
        )
        self.share_partitions = SharePartitionManager(
            config, self.clock, self.replica_manager, self.share_persister, self.scheduler
        )
        self.share_partitions.group_config = group_configs.share_group_config(
            self.store.group_configs, lambda name: self.config[name]
        )
        self.txn_verifier = TxnVerifier(
            self.broker_id,
            self.config.inter_broker_listener_name,
            self.config["request.timeout.ms"],
            self.metadata_cache,
            self.txn_coordinator,
            inter_broker_security(config),
        )
        self.replica_manager.add_leadership_listener(self._on_leadership_change)
        self._started = True  # every component is up: shutdown() stops them from here
        if self._zk is None:
            self.controller = Controller(
                self.broker_id,
                self.store,
                LocalChannel(self.broker_id, self.control_plane),
                config["unclean.leader.election.enable"],
                scheduler=self.scheduler,
            )
            broker_info = BrokerInfo(self.broker_id, self.advertised_endpoints(), config["broker.rack"])
            await self.controller.startup(known_brokers([broker_info]))
            self._server.listen()
        elif not await self._join_cluster():
            return  # asked to stop while it waited to register: serve_until_stopped() shuts it down
        self._start_periodic_jobs()
        if self._http is not None:
            await self._http.serve()
        log.info(
            "odradek broker %d started, listening on %s (cluster id %s, %d partitions loading)",
            self.broker_id,
            ", ".join(
                [f"{name}://{host}:{port}" for name, (host, port) in self._bound.items()]
                + (self._http.urls if self._http is not None else [])
            ),
            self.cluster_id,
            self.replica_manager.pending_count(),
        )

    def _bind_http(self) -> None:
        """Bind http.listeners with /metrics (the broker's own registry) and the web console (reading
        this broker through its own listeners: server/console_host.py); served once started."""
        registry = broker_registry(self, self._server, self.request_metrics)
        advertised = {e.listener: (e.host, e.port) for e in self.advertised_endpoints()}
        self._http = start_console(
            self.config,
            self.scheduler,
            registry,
            lambda name: advertised.get(name) or next(iter(advertised.values())),
            inter_broker_client_security(self.config),
        )

    def _producer_id_block_source(self) -> ProducerIdBlockSource:
        if self._zk is None:
            return FileProducerIdBlockSource(self.config.log_dirs[0], self.broker_id)
        return ZkProducerIdBlockSource(self._zk, self.broker_id)

    def _start_periodic_jobs(self) -> None:
        log_manager = self.log_manager

        def current(name: str) -> Callable[[], int]:
            return lambda: self.config[name]

        schedule: list[tuple[str, Callable[[], int], Lane, Callable[[int], object]]] = [
            (
                "log-retention",
                current("log.retention.check.interval.ms"),
                Lane.LOG_IO,
                log_manager.run_retention,
            ),
            ("log-flusher", self._flush_interval_ms, Lane.LOG_IO, log_manager.flush_dirty),
            (
                "log-cleaner",
                lambda: max(self.config["log.cleaner.backoff.ms"], 1),
                Lane.CLEANER,
                log_manager.run_cleaner,
            ),
            (
                "log-checkpoint",
                current("log.flush.offset.checkpoint.interval.ms"),
                Lane.LOG_IO,
                self._checkpoint,
            ),
        ]
        if self.controller_contact is not None:
            interval_ms = max(self.config["controller.socket.timeout.ms"] // 3, 1000)
            job = self.scheduler.every("controller-contact", interval_ms, self.controller_contact.check)
            self._periodic_jobs.append(job)
        failures = RepeatedFailures(log)  # a full or failing disk: once, no traceback
        for name, interval_ms, lane, job in schedule:
            if interval_ms() > 0:
                run = self._storage_job(name, lane, job, failures)
                self._periodic_jobs.append(self.scheduler.every(name, interval_ms, run))

    def _controller_contact(self, zk: KafkaZkClient) -> ControllerContact:
        plane = self.control_plane
        return ControllerContact(
            self.broker_id,
            zk.synced_controller,
            lambda: (plane.controller_epoch, plane.accepted_as),
            lambda: self.broker_epoch,
            lambda: self.config["controller.socket.timeout.ms"],
            self.clock.monotonic_ms,
        )

    def _checkpoint(self, now_ms: int) -> None:
        self.log_manager.checkpoint()

    def _flush_interval_ms(self) -> int:
        return min(self.config["log.flush.scheduler.interval.ms"], ROLLED_SEGMENT_FLUSH_MS)

    def _storage_job(
        self, name: str, lane: Lane, job: Callable[[int], object], failures: RepeatedFailures
    ) -> Callable[[], Awaitable[None]]:
        """`job(now_ms)` in `lane`; a failing disk is logged once (and once when it works again),
        anything else by the scheduler, with a traceback, at each failure."""

        async def run() -> None:
            try:
                await self.scheduler.run(lane, job, self.clock.time_ms())
            except (OSError, KafkaStorageError) as exc:
                failures.failed(
                    name, "Periodic task %s failed: %s (logged again only if the error changes)", name, exc
                )
            else:
                failures.succeeded(name, "Periodic task %s succeeds again", name)

        return run

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests, flush, checkpoint, mark the shutdown clean."""
        log.info("odradek broker %d shutting down", self.broker_id)
        registered = self._zk is not None and self.broker_epoch != fencing.NO_EPOCH
        if self._started and registered and self.config["controlled.shutdown.enable"]:
            await self._controlled_shutdown()
        if self._http is not None:
            await self._http.close()
        self._server.close()
        self._shutting_down = True
        self.metadata_cache.changed.notify()
        if self._started:
            await self.group_coordinator.shutdown()
            await self.txn_coordinator.shutdown()
            await self.share_partitions.close()
            await self.share_coordinator.shutdown()
            await self.share_persister.close()
        await self._server.drain(SHUTDOWN_DRAIN_TIMEOUT_S)
        if self._started:
            await self.txn_verifier.close()
            if self.controller is not None:
                await self.controller.shutdown()
            if self._remote_channel is not None:
                await self._remote_channel.close()
            await self._leave_cluster()
            await self.replica_manager.shutdown()
            await self.to_controller.close()
        await self.scheduler.cancel(*self._periodic_jobs)
        self._periodic_jobs.clear()
        self.log_manager.shutdown()
        await self.scheduler.close()
        log.info("odradek broker %d shut down", self.broker_id)

    async def _start_authorizer(self) -> None:
        """Load the ACLs of an AclAuthorizer: Kafka's znodes in ZooKeeper mode, else the local file."""
        if not isinstance(self.authorizer, AclAuthorizer):
            return
        if self._zk is not None:
            zk_store = ZkAclStore(self._zk)
            await zk_store.load()
            self.acl_store = zk_store
        else:
            local = LocalAclStore(self.config.log_dirs[0], self.scheduler)
            local.load()
            self.acl_store = local
        self.authorizer.attach(self.acl_store)

    # -- ZooKeeper mode (start-up, membership, election, shutdown) -------------------------------------

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's partitions; see the module docstring. The
        partitions that remain are the controller's answer: its UpdateMetadata may reach this
        broker's metadata cache only after that answer."""
        led = self._replicated_partitions_led()
        remaining: set[tuple[str, int]] | None = None
        attempts = max(self.config["controlled.shutdown.max.retries"], 1)
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        for attempt in range(1, attempts + 1):
            remaining = await self._ask_controlled_shutdown()
            if (remaining is not None and not remaining) or attempt == attempts:
                break
            if await wait_until(self._alone, backoff_s, self.metadata_cache.changed):
                log.info("Controlled shutdown of broker %d: no other live broker, no retry", self.broker_id)
                break
        if remaining is None:  # no answer at all: what the metadata cache says now
            remaining = self._replicated_partitions_led()
        log.info(
            "Controlled shutdown of broker %d: moved %d partitions, %d remain",
            self.broker_id,
            len(led - remaining),
            len(remaining),
        )

    async def _ask_controlled_shutdown(self) -> set[tuple[str, int]] | None:
        """One attempt: the partitions the controller says this broker still leads (empty when it
        leads none any more), or None when the controller could not be asked or refused."""
        request = ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch)
        timeout_s = self.config["controller.socket.timeout.ms"] / 1000
        try:
            response = await self.to_controller.controlled_shutdown(request, timeout_s)
        except ControllerUnavailable as exc:
            log.warning("Controlled shutdown of broker %d failed: %s", self.broker_id, exc)
            return None
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "Controlled shutdown of broker %d refused: %s",
                self.broker_id,
                ErrorCode(response.error_code).name,
            )
            return None
        remaining = {(p.topic_name, p.partition_index) for p in response.remaining_partitions}
        if remaining:
            log.info(
                "Controlled shutdown of broker %d: it still leads %s",
                self.broker_id,
                ", ".join(f"{topic}-{index}" for topic, index in sorted(remaining)),
            )
        return remaining

    def _alone(self) -> bool:
        """Whether this broker's metadata lists no other live broker."""
        return all(broker.broker_id == self.broker_id for broker in self.metadata_cache.brokers())

    def _replicated_partitions_led(self) -> set[tuple[str, int]]:
        """The partitions with more than one replica this broker leads, as its metadata cache says."""
        return {
            (name, index)
            for name, topic in self.metadata_cache.topics().items()
            for index, state in topic.partitions.items()
            if state.leader == self.broker_id and len(state.replicas) > 1
        }

    async def _connect_zookeeper(self, connect: str) -> str:
        """Open the session, load the ZooKeeper store (the admin manager writes to it), return the
        cluster id of `/cluster/id`."""
        from odradek.controller.zk.client import KafkaZkClient
        from odradek.controller.zk.store import ZkMetadataStore
        from odradek.controller.zk.znodes import ZooKeeperConnect

        config = self.config
        zk = await KafkaZkClient.connect(
            ZooKeeperConnect.parse(connect),
            config["zookeeper.session.timeout.ms"],
            config.zookeeper_connection_timeout_ms,
            self.scheduler,
        )
        try:
            cluster_id = await zk.get_or_create_cluster_id(config.cluster_id or new_cluster_id())
            if config.cluster_id is not None and config.cluster_id != cluster_id:
                raise MetaPropertiesError(
                    "cluster.id",
                    f"configured {config.cluster_id} but ZooKeeper's /cluster/id is {cluster_id}",
                )
            store = ZkMetadataStore(zk, self.broker_id)
            await store.load()
        except BaseException:
            await zk.close()
            raise
        self._zk, self.store, self._zk_store = zk, store, store
        self.admin = AdminManager(
            store, lambda: list(store.brokers().values()), config["max.broker.partitions"]
        )
        log.info("Connected to ZooKeeper at %s (cluster id %s)", connect, cluster_id)
        return cluster_id

    def _registration(self) -> BrokerRegistration:
        from odradek.controller.zk.znodes import BrokerRegistration

        inter_broker = self.config.inter_broker_listener_name
        endpoints = sorted(self.advertised_endpoints(), key=lambda e: e.listener != inter_broker)
        protocols = {listener.name: listener.security_protocol for listener in self.config.listeners}
        return BrokerRegistration(
            self.broker_id,
            tuple((e.listener, e.host, e.port) for e in endpoints),
            {e.listener: protocols.get(e.listener, "PLAINTEXT") for e in endpoints},
            self.config["broker.rack"],
            self.clock.time_ms(),
        )

    async def _join_cluster(self) -> bool:
        """Register, accept connections, then race for the controller seat; see the module docstring.
        False when asked to stop before it could register (it waited for a dead session's
        registration to expire)."""
        try:
            epoch = await self._unless_stopped(self._register())
        except BrokerIdInUseError:
            await self._zk_store.zk.close()
            raise
        if epoch is None:
            log.info("Broker %d stops before it registered in ZooKeeper", self.broker_id)
            return False
        self.broker_epoch = epoch
        self._server.listen()  # only now: a port that accepts means a registered broker
        log.info("Registered broker %d in ZooKeeper (broker epoch %d)", self.broker_id, epoch)
        self._zk_store.on_brokers_changed(self._on_brokers_changed)
        self._zk_store.zk.on_session_state(self._on_session_state)
        await self._elect()
        return True

    async def _register(self) -> int:
        """Create `/brokers/ids/<id>`; its broker epoch. A registration of another session is waited on
        for zookeeper.session.timeout.ms + REGISTRATION_EXPIRY_MARGIN_MS: this broker's own, from
        before a restart quicker than its session's expiry, goes by then; a live broker's stays."""
        wait_ms = self.config["zookeeper.session.timeout.ms"] + REGISTRATION_EXPIRY_MARGIN_MS
        return await self._zk_store.zk.register_broker(self._registration(), wait_ms / 1000)

    async def _unless_stopped(self, job: Awaitable[T]) -> T | None:
        """`job`'s result, or None (`job` cancelled) when the broker is asked to stop first."""
        running = asyncio.ensure_future(job)
        stopping = asyncio.ensure_future(self._stop_requested.wait())
        await asyncio.wait((running, stopping), return_when=asyncio.FIRST_COMPLETED)
        await cancel_and_wait(stopping, None if running.done() else running)
        return None if running.cancelled() else running.result()

    async def _elect(self) -> None:
        """Race for `/controller` until this broker holds it or another broker does (then watch it)."""
        async with self._election_lock:
            while self.controller is None and not self._shutting_down:
                remote = controller_channel(self.config)
                controller = Controller(
                    self.broker_id,
                    self.store,
                    ClusterChannel(LocalChannel(self.broker_id, self.control_plane), remote),
                    self.config["unclean.leader.election.enable"],
                    reelect_live_leaders=False,
                    scheduler=self.scheduler,
                    on_resign=self._on_resign,
                    rebalance=leader_rebalance(self.config),
                )
                try:
                    await controller.startup(self._read_live_brokers)
                except ControllerMovedError:
                    await controller.shutdown()
                    await remote.close()
                    current = await self._zk_store.zk.controller_id(watcher=self._on_controller_changed)
                    if current is not None:
                        log.info("Broker %d is the controller", current)
                        return
                    continue
                except Exception:
                    log.exception(
                        "Broker %d failed to start as controller: giving up the seat", self.broker_id
                    )
                    await controller.shutdown()
                    await remote.close()
                    await self._zk_store.give_up_seat()
                    raise
                self.controller, self._remote_channel = controller, remote
                # a registration or departure while it started (its watch found no controller yet)
                now = self._zk_store.broker_epochs()
                if now != controller.broker_epochs:
                    controller.brokers_changed(self._zk_store.brokers().values(), now)

    async def _read_live_brokers(self) -> tuple[Iterable[BrokerInfo], Mapping[int, int]]:
        """The registered brokers and their broker epochs, read from ZooKeeper now."""
        live = await self._zk_store.read_brokers()
        return live.values(), dict(self._zk_store.broker_epochs())

    def _in_background(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` (election, re-registration) as a task; on failure (ZooKeeper unreachable) try
        again every ZOOKEEPER_RETRY_S, unless the session expired (the rejoin starts over) or the
        broker stops."""

        async def run() -> None:
            while not self._shutting_down:
                try:
                    await job()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if self._session_expired:
                        log.info("%s abandoned: the ZooKeeper session expired", job.__name__)
                        return
                    log.warning("%s failed (%r): trying again", job.__name__, exc)
                    await asyncio.sleep(ZOOKEEPER_RETRY_S)

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_controller_changed(self) -> None:
        if self.controller is None and not self._shutting_down:
            self._in_background(self._elect)

    def _on_resign(self) -> None:
        self.controller = None
        self._close_remote_channel_later()
        self._zk_store.resign()
        self._on_controller_changed()

    def _on_brokers_changed(self, brokers: Mapping[int, BrokerInfo]) -> None:
        """The controller handles the new membership in turn with its other events (its channel
        follows: controller/context.py); a controller still starting compares when it is done."""
        if self.controller is not None:
            self.controller.brokers_changed(brokers.values(), self._zk_store.broker_epochs())

    def _close_remote_channel_later(self) -> None:
        remote, self._remote_channel = self._remote_channel, None
        if remote is not None:
            self._in_background(remote.close)

    def _on_session_state(self, state: str) -> None:
        if self._shutting_down:
            return  # this broker closes its session on the way out
        if state == "suspended":
            log.warning(
                "Broker %d lost its ZooKeeper connection: it keeps serving what it leads, but no ISR "
                "change or election can be made until it reconnects; past zookeeper.session.timeout.ms "
                "(%d ms) the controller moves its partitions",
                self.broker_id,
                self.config["zookeeper.session.timeout.ms"],
            )
        elif state == "expired":
            log.warning(
                "Broker %d lost its ZooKeeper session: registering again once reconnected", self.broker_id
            )
            self._session_expired = True
        elif state == "connected" and self._session_expired:
            self._session_expired = False
            self._in_background(self._rejoin_after_expiry)

    async def _rejoin_after_expiry(self) -> None:
        """A new session: resign, reload the store (its watches died), register and race again."""
        if self.controller is not None:
            log.warning("Broker %d resigns as controller: its ZooKeeper session expired", self.broker_id)
            controller, self.controller = self.controller, None
            await controller.shutdown()
        self._zk_store.resign()
        await self._zk_store.load()
        if isinstance(self.acl_store, ZkAclStore):
            await self.acl_store.load()
        epoch = self.broker_epoch = await self._register()
        log.info("Broker %d registered again after a session expiry (broker epoch %d)", self.broker_id, epoch)
        await self._elect()

    async def _leave_cluster(self) -> None:
        """Close the ZooKeeper session: this broker's registration and controller seat go at once."""
        if self._zk is None:
            return
        await cancel_and_wait(*self._background)
        if isinstance(self.acl_store, ZkAclStore):
            await self.acl_store.close()
        await self._zk_store.close()
        await self._zk.close()
        self._zk = None

    def request_stop(self) -> None:
        """Ask `serve_until_stopped` to shut down (safe from a signal handler)."""
        self._stop_requested.set()

    async def serve_until_stopped(self) -> None:
        await self._stop_requested.wait()
        await self.shutdown()

    def _on_store_event(self, event: StoreEvent) -> None:
        """Topic config changes (Kafka: /config/changes) reach the metadata cache and the logs."""
        topic = self.store.topics().get(event.topic)
        if event.kind is StoreEventKind.DELETION_REQUESTED or topic is None:
            return
        if event.kind in (StoreEventKind.TOPIC_CREATED, StoreEventKind.CONFIGS_CHANGED):
            self.metadata_cache.update_topic_configs(event.topic, topic.configs)
            self._set_throttled_replicas(event.topic, topic.configs)
        if event.kind is StoreEventKind.CONFIGS_CHANGED:
            self.log_manager.update_topic_config(event.topic, self.config.log_config(topic.configs))

    def _stored_dynamic_config(self) -> KafkaConfig:
        """The config under the store's dynamic broker configs; the current one if they are refused."""
        store = self.store
        try:
            return self.config.with_dynamic(
                store.broker_configs(DEFAULT_BROKER_ENTITY), store.broker_configs(str(self.broker_id))
            )
        except ConfigError as exc:
            log.error("Stored dynamic broker configs not applied: %s", exc)
            return self.config

    def _dynamic_config_current(self) -> bool:
        """Whether `config` holds the store's dynamic broker configs."""
        store, config = self.store, self.config
        stored = store.broker_configs(DEFAULT_BROKER_ENTITY), store.broker_configs(str(self.broker_id))
        return (config.dynamic_default, config.dynamic_broker) == (dict(stored[0]), dict(stored[1]))

    def _on_broker_configs_changed(self, entity: str) -> None:
        """Dynamic broker configs of `<default>` or this broker changed: apply them live."""
        self.config = config = self._stored_dynamic_config()
        log.info(
            "Dynamic broker configs of %s changed; now cluster-wide %s, broker %s",
            entity,
            config.dynamic_default,
            config.dynamic_broker,
        )
        self.log_manager.default_config = config.log_config()
        for name, topic in self.store.topics().items():
            self.log_manager.update_topic_config(name, config.log_config(topic.configs))
        self.log_manager.cleaner.config = config.cleaner_config()
        self._server.update_limits(self._connection_limits())
        self._set_replication_rates()
        if self.controller is not None:
            self.controller.unclean_default = config["unclean.leader.election.enable"]

    def _set_replication_rates(self) -> None:
        self.replica_manager.leader_quota.rate = self.config[LEADER_THROTTLED_RATE]
        self.replica_manager.follower_quota.rate = self.config[FOLLOWER_THROTTLED_RATE]
        self.replica_manager.alter_log_dirs.quota.rate = self.config[
            REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND
        ]

    def _set_throttled_replicas(self, topic: str, configs: Mapping[str, str]) -> None:
        manager = self.replica_manager
        manager.leader_quota.set_throttled_replicas(topic, configs.get(LEADER_THROTTLED_REPLICAS, ""))
        manager.follower_quota.set_throttled_replicas(topic, configs.get(FOLLOWER_THROTTLED_REPLICAS, ""))

    def _connection_limits(self) -> ConnectionLimits:
        """The start limits with the current (maybe dynamic) connection limits; max.connections
        stays within the file descriptors set aside for connections at start."""
        config = self.config
        return replace(
            self._start_limits,
            max_connections=min(config["max.connections"], self._start_limits.max_connections),
            max_connections_per_ip=config["max.connections.per.ip"],
            per_ip_overrides=resolve_overrides(
                parse_connection_overrides(config["max.connections.per.ip.overrides"])
            ),
        )

    def _assigned_here(self) -> list[tuple[str, int]]:
        """The partitions the store assigns a replica of to this broker."""
        return [
            (name, index)
            for name, topic in self.store.topics().items()
            for index, replicas in topic.assignment.items()
            if self.broker_id in replicas
        ]

    def _topic_log_config(self, topic: str) -> LogConfig:
        return self.config.log_config(self.metadata_cache.topic_configs(topic))

    def _on_leadership_change(self, change: LeadershipChange) -> None:
        """Kafka's onLeadershipChange: coordinator shards follow the leadership of `__consumer_offsets`
        (group coordinator) and `__transaction_state` (transaction coordinator) partitions."""
        coordinator: GroupCoordinator | TransactionCoordinator | ShareCoordinator
        if change.topic == OFFSETS_TOPIC:
            coordinator = self.group_coordinator
        elif change.topic == TXN_TOPIC:
            coordinator = self.txn_coordinator
        elif change.topic == SHARE_STATE_TOPIC:
            coordinator = self.share_coordinator
        else:
            return
        if change.is_leader:
            coordinator.on_partition_loaded(change.partition, change.leader_epoch)
        else:
            coordinator.on_partition_unloaded(change.partition)

    async def write_txn_markers(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        """Write a transaction's marker to each partition (the coordinator's markers, and the
        WriteTxnMarkers handler's): the error code per partition. A marker taken by a
        `__consumer_offsets` partition completes the producer's transactional offset commits there."""
        results = await self.replica_manager.write_txn_markers(marker, keys, timeout_ms)
        for (topic, partition), response in results.items():
            if topic == OFFSETS_TOPIC and response.error_code == ErrorCode.NONE:
                self.group_coordinator.complete_txn(partition, marker.producer_id, marker.commit)
        return {key: response.error_code for key, response in results.items()}

    # -- topics ---------------------------------------------------------------------------------------

    async def wait_for_leaders(self, name: str, partitions: Iterable[int], timeout_s: float) -> bool:
        """Wait (never blocking the loop) until every partition of `partitions` has a live leader in
        the metadata cache and, when this broker leads it, serves; False at the timeout. Returns at
        once (False unless done) when the broker shuts down."""
        remaining = sorted(set(partitions), reverse=True)

        def ready() -> bool:
            while remaining:
                if self._shutting_down:
                    return False
                index = remaining[-1]
                if not self.metadata_cache.has_leaders(name, (index,)):
                    return False
                state = self.metadata_cache.partition(name, index)
                if state is not None and state.leader == self.broker_id:
                    if not self.replica_manager.serves_as_leader(name, index):
                        return False
                remaining.pop()
            return True

        def done_or_stopping() -> bool:
            return ready() or self._shutting_down

        notifiers = (self.metadata_cache.changed, self.replica_manager.ready_changed)
        await wait_until(done_or_stopping, timeout_s, *notifiers)
        return not remaining

    async def wait_for_deletion(self, name: str, timeout_s: float) -> bool:
        """Wait until the metadata cache no longer has the topic; False at the timeout."""

        def gone() -> bool:
            return self.metadata_cache.topic(name) is None or self._shutting_down

        await wait_until(gone, timeout_s, self.metadata_cache.changed)
        return self.metadata_cache.topic(name) is None

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        """Create a topic with the broker defaults (`__consumer_offsets` with the settings the group
        coordinator gives it: offsets.topic.*, compacted), wait up to AUTO_CREATE_WAIT_S for its
        leaders, and return what the metadata cache then knows of it. Raises the creation's
        KafkaError (other than TOPIC_ALREADY_EXISTS)."""
        partitions, replication, configs = self._auto_create_settings(name)
        try:
            created = await self.admin.create_topic(name, partitions, replication, configs)
            indexes: Iterable[int] = created.assignment
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            stored = self.store.topics().get(name)
            indexes = stored.assignment if stored is not None else ()
        await self.wait_for_leaders(name, indexes, AUTO_CREATE_WAIT_S)
        return self.metadata_cache.topic(name)

    def _auto_create_settings(self, name: str) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, configs) of an auto-created topic: the broker defaults, or
        the internal topics' own settings (offsets.topic.*, transaction.state.log.*; compacted)."""
        if name == OFFSETS_TOPIC:
            prefix, configs = "offsets.topic", {}
        elif name == TXN_TOPIC:
            prefix = "transaction.state.log"
            configs = {"min.insync.replicas": str(self.config["transaction.state.log.min.isr"])}
        elif name == SHARE_STATE_TOPIC:
            prefix = "share.coordinator.state.topic"
            configs = {"min.insync.replicas": str(self.config["share.coordinator.state.topic.min.isr"])}
        else:
            return self.config["num.partitions"], self.config["default.replication.factor"], {}
        live = len(self.metadata_cache.brokers())
        replication = max(min(self.config[f"{prefix}.replication.factor"], live), 1)
        configs |= {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config[f"{prefix}.segment.bytes"]),
        }
        return self.config[f"{prefix}.num.partitions"], replication, configs


def settle_collector() -> None:
    """The cyclic collector's settings for a started broker: what start-up built lives on, so its
    passes no longer walk it (`gc.freeze`), and the young threshold is GC_THRESHOLDS."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def run_broker(config: KafkaConfig) -> None:
    """Start a broker, serve until SIGTERM or SIGINT, shut down gracefully."""
    broker = KafkaServer(config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, broker.request_stop)
    await broker.start()
    settle_collector()
    await broker.serve_until_stopped()


def controller_channel(config: KafkaConfig) -> RemoteChannel:
    """The channel of the controller on the broker configured by `config`: to every broker's
    inter-broker listener, each request bounded by controller.socket.timeout.ms."""
    settings = ChannelSettings(
        listener_name=config.inter_broker_listener_name,
        request_timeout_ms=config["controller.socket.timeout.ms"],
        security=inter_broker_security(config),
    )
    return RemoteChannel(config.broker_id, settings)


def inter_broker_client_security(config: KafkaConfig) -> BlockingClientSecurity | None:
    """The broker's own identity on its inter-broker listener for odradek's blocking client (the
    embedded web console): None when that listener is PLAINTEXT."""
    tls = config.inter_broker_ssl
    sasl = inter_broker_client(config)
    if tls is None and sasl is None:
        return None
    return BlockingClientSecurity(tls.client_context if tls is not None else None, sasl)


def inter_broker_security(config: KafkaConfig) -> ClientSecurity:
    """How this broker's own connections to other brokers are secured: the inter-broker listener's
    security protocol, its TLS client side when it is SSL, and its SASL authentication when it is
    SASL_PLAINTEXT or SASL_SSL."""
    tls = config.inter_broker_ssl
    protocol = next(
        (lis.security_protocol for lis in config.listeners if lis.name == config.inter_broker_listener_name),
        "PLAINTEXT",
    )
    return ClientSecurity(
        protocol, tls.client_context if tls is not None else None, inter_broker_authenticate(config)
    )
