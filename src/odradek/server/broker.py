"""The broker: wires config, metadata, storage, replication, the group coordinator and the listener.

Owns the broker's life cycle.
- Startup: read the metadata file; lock and load the log dirs (LogManager: recovery, per-topic log
  configs, producer.id.expiration.ms); check or write meta.properties (broker.id, cluster.id); bind
  every listener; elect this broker controller and leader of its partitions (leader epochs move on);
  start the ReplicaManager (it takes up every partition in metadata and follows metadata changes
  from then on) and the group coordinator; start the periodic tasks; only then accept connections,
  so an open port means a broker that can serve.
- Periodic tasks, off the event loop: retention every log.retention.check.interval.ms; the log
  cleaner every log.cleaner.backoff.ms (each run cleans until no log qualifies); flush by
  flush.ms / flush.messages checked every log.flush.scheduler.interval.ms but at least every second
  (rolled segments are flushed soon after the roll, as Kafka does on roll); recovery point and log
  start offset checkpoints every log.flush.offset.checkpoint.interval.ms. The high watermark
  checkpoint is the ReplicaManager's (replica.high.watermark.checkpoint.interval.ms).
- Topic config changes reach existing logs through a metadata listener (LogManager.update_topic_config).
- Shutdown (SIGTERM / SIGINT, or `shutdown()`): stop accepting; stop the group coordinator, which
  answers every JoinGroup / SyncGroup parked in a rebalance (and any group request still queued)
  with NOT_COORDINATOR, as Kafka does when a coordinator unloads its groups, so the drain never waits
  out a rebalance or session timeout; let connections answer what they have already received; stop
  the ReplicaManager (final high watermark checkpoint) and the periodic tasks; then
  LogManager.shutdown (flush, checkpoints, clean shutdown marker).

Listeners: every entry of `listeners` is bound (all PLAINTEXT; names mapped by
listener.security.protocol.map). The broker registers one advertised endpoint per entry of
`advertised.listeners` (else of `listeners`; a port 0 listener advertises the port it was bound to),
and handlers answer with the endpoints of the listener the request arrived on.

Deliberate deviations: `zookeeper.connect` is ignored with a warning (the metadata is always the
local single-node backend).

Exposes to handlers (through `RequestContext.broker`): `config`, `broker_id`, `clock`, `metadata`,
`log_manager`, `replica_manager`, `group_coordinator`, `fetch_sessions` (the FetchSessionCache),
`cluster_id`, `advertised_endpoints()`, and `auto_create_topic()` (Kafka's auto topic creation).

Callers: `odradek serve` (cli/serve.py) through `run_broker`, and in-process tests.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.controller.local import LocalMetadata
from odradek.controller.meta_properties import ensure_meta_properties
from odradek.controller.metadata import BrokerInfo, Endpoint, TopicChange, TopicMetadata
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.limits import connection_limits
from odradek.server.network import KafkaServer
from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_TIMEOUT_S = 30.0
ROLLED_SEGMENT_FLUSH_MS = 1000
OFFSETS_TOPIC = "__consumer_offsets"


class Broker:
    """One broker process's state and components. Components exist once `start()` returned."""

    log_manager: LogManager
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator

    def __init__(self, config: KafkaConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.clock = clock
        self.cluster_id = ""
        self.metadata = LocalMetadata(config.log_dirs[0], config.broker_id)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"], clock)
        self._bound: dict[str, tuple[str, int]] = {}
        self._server = KafkaServer(Dispatcher(self), connection_limits(config))
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stop_requested = asyncio.Event()

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
        """Lock and load the log dirs, elect this broker, start the components, then accept."""
        config = self.config
        if config.zookeeper_connect is not None:
            log.warning("zookeeper.connect is set, but only single-node local metadata exists: ignoring it")
        self.metadata.load()
        topic_configs = {name: config.log_config(t.configs) for name, t in self.metadata.topics().items()}
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config(),
            self.clock,
            topic_configs,
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
            cleaner_config=config.cleaner_config(),
        )
        self.cluster_id = ensure_meta_properties(config.log_dirs, self.broker_id, config.cluster_id)
        for listener in config.listeners:
            self._bound[listener.name] = await self._server.bind(listener.name, listener.host, listener.port)
        broker_info = BrokerInfo(self.broker_id, self.advertised_endpoints(), config["broker.rack"])
        self.metadata.elect(broker_info, self.cluster_id)
        self.metadata.add_listener(self._on_topic_change)
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.metadata,
            self.clock,
            log_dirs=config.log_dirs,
            checkpoint_interval_ms=config["replica.high.watermark.checkpoint.interval.ms"],
        )
        self.replica_manager.start()
        self.group_coordinator = GroupCoordinator(self, config, self.clock)
        await self.group_coordinator.startup()
        self._start_periodic_tasks()
        self._started = True
        self._server.listen()
        log.info(
            "odradek broker %d started, listening on %s (cluster id %s)",
            self.broker_id,
            ", ".join(f"{name}://{host}:{port}" for name, (host, port) in self._bound.items()),
            self.cluster_id,
        )

    def _start_periodic_tasks(self) -> None:
        config, log_manager = self.config, self.log_manager
        schedule: list[tuple[str, int, Callable[[int], object]]] = [
            ("log-retention", config["log.retention.check.interval.ms"], log_manager.run_retention),
            ("log-flusher", self._flush_interval_ms(), log_manager.flush_dirty),
            ("log-cleaner", max(config["log.cleaner.backoff.ms"], 1), log_manager.run_cleaner),
            ("log-checkpoint", config["log.flush.offset.checkpoint.interval.ms"], self._checkpoint),
        ]
        for name, interval_ms, job in schedule:
            if interval_ms > 0:
                self._tasks.append(asyncio.create_task(self._every(interval_ms, job), name=name))

    def _checkpoint(self, now_ms: int) -> None:
        self.log_manager.checkpoint()

    def _flush_interval_ms(self) -> int:
        return min(self.config["log.flush.scheduler.interval.ms"], ROLLED_SEGMENT_FLUSH_MS)

    async def _every(self, interval_ms: int, job: Callable[[int], object]) -> None:
        """Run `job(now_ms)` in a worker thread every `interval_ms`; a failure is logged, not fatal."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await asyncio.to_thread(job, self.clock.time_ms())
            except Exception:
                log.exception("Periodic task %s failed", asyncio.current_task())

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests, flush, checkpoint, mark the shutdown clean."""
        log.info("odradek broker %d shutting down", self.broker_id)
        self._server.close()
        if self._started:
            await self.group_coordinator.shutdown()
        await self._server.drain(SHUTDOWN_DRAIN_TIMEOUT_S)
        if self._started:
            await self.replica_manager.shutdown()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.log_manager.shutdown()
        log.info("odradek broker %d shut down", self.broker_id)

    def request_stop(self) -> None:
        """Ask `serve_until_stopped` to shut down (safe from a signal handler)."""
        self._stop_requested.set()

    async def serve_until_stopped(self) -> None:
        await self._stop_requested.wait()
        await self.shutdown()

    def _on_topic_change(self, change: TopicChange) -> None:
        """Apply a topic's changed configs to its existing logs."""
        current, previous = change.current, change.previous
        if current is not None and previous is not None and current.configs != previous.configs:
            self.log_manager.update_topic_config(change.name, self.config.log_config(current.configs))

    # -- topics ---------------------------------------------------------------------------------------

    def auto_create_topic(self, name: str) -> TopicMetadata:
        """Create a topic with the broker defaults; `__consumer_offsets` with the settings the group
        coordinator gives it (offsets.topic.*, compacted)."""
        if name != OFFSETS_TOPIC:
            return self.metadata.create_topic(
                name, self.config["num.partitions"], self.config["default.replication.factor"], {}
            )
        replication = min(self.config["offsets.topic.replication.factor"], len(self.metadata.brokers()))
        return self.metadata.create_topic(
            name,
            self.config["offsets.topic.num.partitions"],
            max(replication, 1),
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
            },
        )


async def run_broker(config: KafkaConfig) -> None:
    """Start a broker, serve until SIGTERM or SIGINT, shut down gracefully."""
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, broker.request_stop)
    await broker.start()
    await broker.serve_until_stopped()
