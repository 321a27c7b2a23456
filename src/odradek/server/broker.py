"""The broker: wires config, metadata, storage, replication, the dispatcher and the listener.

Owns the broker's life cycle.
- Startup: create the log dirs, check or write meta.properties (broker.id, cluster.id), open the
  metadata backend (electing this broker controller and leader of its partitions), bind the
  listener, then start accepting. The port accepts connections only once the broker can serve.
- Running: serve requests; every change of topic metadata is applied to the ReplicaManager through
  a metadata listener (new partitions become led here, deleted ones are stopped and deleted).
- Shutdown (SIGTERM / SIGINT, or `shutdown()`): stop accepting, let connections answer what they
  already received, then close the listener.

Exposes to handlers (through `RequestContext.broker`): `config`, `broker_id`, `clock`, `metadata`,
`cluster_id`, `advertised_endpoint()`, and `auto_create_topic()` (Kafka's auto topic creation,
internal topics included).

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
from odradek.controller.metadata import BrokerInfo, TopicChange, TopicMetadata
from odradek.server.config import KafkaConfig
from odradek.server.dispatcher import Dispatcher
from odradek.server.network import KafkaServer
from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_TIMEOUT_S = 30.0
ROLLED_SEGMENT_FLUSH_MS = 1000
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"


class Broker:
    """One broker process's state and components."""

    def __init__(self, config: KafkaConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.clock = clock
        self.cluster_id = ""
        self.metadata = LocalMetadata(config.log_dirs[0], config.broker_id)
        self._log_manager: LogManager | None = None
        self._bound: tuple[str, int] | None = None
        self.dispatcher = Dispatcher(self)
        self._server = KafkaServer(self.dispatcher, config.socket_request_max_bytes)
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()

    @property
    def log_manager(self) -> LogManager:
        if self._log_manager is None:
            raise RuntimeError("the broker has not started")
        return self._log_manager

    def advertised_endpoint(self) -> tuple[str, int]:
        """Host and port clients are told to connect to (advertised.listeners, else listeners)."""
        listener = self.config.advertised_listeners[0]
        host = listener.host or socket.getfqdn()
        port = listener.port
        if port == 0 and self._bound is not None:
            port = self._bound[1]
        return host, port

    @property
    def listener_address(self) -> tuple[str, int]:
        """Where the listener is bound (after `start`)."""
        if self._bound is None:
            raise RuntimeError("the broker has not started")
        return self._bound

    # -- life cycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Lock and load the log dirs, elect this broker, bind and start serving."""
        config = self.config
        self.metadata.load()
        self._log_manager = LogManager(
            config.log_dirs,
            config.log_config(),
            self.clock,
            {name: config.log_config(t.configs) for name, t in self.metadata.topics().items()},
        )
        self.cluster_id = ensure_meta_properties(config.log_dirs, self.broker_id, config.cluster_id)
        listener = config.listeners[0]
        self._bound = await self._server.bind(listener.host, listener.port)
        host, port = self.advertised_endpoint()
        self.metadata.elect(BrokerInfo(self.broker_id, host, port, config["broker.rack"]), self.cluster_id)
        self.metadata.add_listener(self._on_topic_change)
        self._start_periodic_tasks()
        self._server.listen()
        log.info(
            "odradek broker %d started, listening on %s://%s:%d (cluster id %s)",
            self.broker_id,
            listener.name,
            self._bound[0],
            self._bound[1],
            self.cluster_id,
        )

    def _start_periodic_tasks(self) -> None:
        config, log_manager = self.config, self.log_manager
        schedule = [
            ("log-retention", config["log.retention.check.interval.ms"], log_manager.run_retention),
            ("log-flusher", self._flush_interval_ms(), log_manager.flush_dirty),
            (
                "checkpoint",
                config["log.flush.offset.checkpoint.interval.ms"],
                lambda _: log_manager.checkpoint(),
            ),
        ]
        for name, interval_ms, job in schedule:
            if interval_ms > 0:
                self._tasks.append(asyncio.create_task(self._every(interval_ms, job), name=name))

    def _checkpoint(self, now_ms: int) -> None:
        self.log_manager.checkpoint()

    def _flush_interval_ms(self) -> int:
        """How often flush_dirty runs: the flush scheduler interval, but at least every second so that
        rolled segments are flushed soon after the roll (Kafka flushes them on roll)."""
        return min(self.config["log.flush.scheduler.interval.ms"], ROLLED_SEGMENT_FLUSH_MS)

    async def _every(self, interval_ms: int, job: Callable[[int], object]) -> None:
        """Run `job(now_ms)` off the event loop every `interval_ms`; a failure is logged, not fatal."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await asyncio.to_thread(job, self.clock.time_ms())
            except Exception:
                log.exception("Periodic task %s failed", asyncio.current_task().get_name())

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests, flush, checkpoint, mark the shutdown clean."""
        log.info("odradek broker %d shutting down", self.broker_id)
        self._server.close()
        await self._server.drain(SHUTDOWN_DRAIN_TIMEOUT_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._log_manager is not None:
            self._log_manager.shutdown()
        log.info("odradek broker %d shut down", self.broker_id)

    def request_stop(self) -> None:
        """Ask `serve_until_stopped` to shut down (safe from a signal handler)."""
        self._stop_requested.set()

    async def serve_until_stopped(self) -> None:
        await self._stop_requested.wait()
        await self.shutdown()

    def _on_topic_change(self, change: TopicChange) -> None:
        """Apply a topic's new settings to its logs."""
        if change.current is not None and change.previous is not None:
            if change.current.configs != change.previous.configs:
                self.log_manager.update_topic_config(
                    change.name, self.config.log_config(change.current.configs)
                )

    # -- topics ---------------------------------------------------------------------------------------

    def auto_create_topic(self, name: str) -> TopicMetadata:
        """Create a topic with the broker defaults (internal topics with their own settings)."""
        if name == OFFSETS_TOPIC:
            return self.metadata.create_topic(
                name,
                self.config["offsets.topic.num.partitions"],
                self.config["offsets.topic.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
                },
            )
        if name == TRANSACTION_STATE_TOPIC:
            return self.metadata.create_topic(
                name,
                self.config["transaction.state.log.num.partitions"],
                self.config["transaction.state.log.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "compression.type": "uncompressed",
                    "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                    "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                },
            )
        return self.metadata.create_topic(
            name, self.config["num.partitions"], self.config["default.replication.factor"], {}
        )


async def run_broker(config: KafkaConfig) -> None:
    """Start a broker, serve until SIGTERM or SIGINT, shut down gracefully."""
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, broker.request_stop)
    await broker.serve_until_stopped()
