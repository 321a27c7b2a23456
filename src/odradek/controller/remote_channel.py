"""RemoteChannel: the controller's channel to other brokers over the wire (Kafka's
ControllerChannelManager).

Owns, per broker the controller knows: one `NodeConnection` to the broker's endpoint on the
inter-broker listener (`KafkaConfig.inter_broker_listener_name`: `inter.broker.listener.name`, else
the first listener speaking security.inter.broker.protocol, the one every broker registers first;
secured as `ChannelSettings.security` says: TLS when that listener is SSL), a queue of requests and one
sender task (Kafka's RequestSendThread) that delivers them one at a time, in the order sent, each
awaiting its response before the next goes out.

Behaviour:
- `leader_and_isr` / `update_metadata` / `stop_replica` queue the request for the broker and return
  the future of its response (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, the versions
  `channel.py` builds). A broker the channel does not know (never added, or removed) fails the
  future with BROKER_NOT_AVAILABLE at once.
- A connection that cannot be opened (within 10 s, Kafka's socket.connection.setup.timeout.ms
  default), closes, or does not answer within the request timeout (`controller.socket.timeout.ms`,
  Kafka's timeout of the controller's requests) is closed, and the sender reconnects after a
  backoff (100 ms doubling up to 1 s) and sends the same request again, until it is answered or
  the broker is removed, as Kafka's RequestSendThread retries. A response that cannot be decoded
  is treated the same way. A response carrying an error code is returned to the caller as is.
- `sync_brokers` (the controller's live brokers changed: controller/context.py calls it whenever it
  changes them) adds and removes senders to match (a broker that registered again is removed, then
  added: controller/membership.py); `add_broker` (a broker joined) starts its sender; adding a known
  broker again with a new endpoint replaces the sender; `remove_broker` (a broker left) stops it and
  fails its queued and in-flight calls with BROKER_NOT_AVAILABLE; `close()` does that for every broker.
- A caller that cancels the future leaves its request to the sender if it is in flight; a request
  still queued is skipped.

Invariants: at most one request in flight per broker, so a broker sees requests in the order the
controller sent them; never blocks the event loop; after `close()` no task or connection remains.

Deliberate deviations: the reconnect backoff doubles up to 1 s (Kafka's send thread waits a fixed
100 ms); the client id is `controller-<id>-to-broker-<id>`.

Callers: the ZooKeeper-mode controller wiring (server/kafka_server.py's `controller_channel`), then
the controller itself through `sync_brokers` as broker registrations come and go (controller/context.py),
`close()` on resignation or shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.controller.channel import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    ControllerChannel,
)
from odradek.controller.metadata import BrokerInfo, Endpoint
from odradek.network_client import (
    ClientSecurity,
    NodeDisconnected,
    NodeUnreachable,
    RequestTimedOut,
    ReusedConnection,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from odradek.protocol.primitives import ProtocolDecodeError
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_INTER_BROKER_LISTENER = "PLAINTEXT"
RECONNECT_BACKOFF_MS = 100
RECONNECT_BACKOFF_MAX_MS = 1000
_DELIVERY_FAILURES = (NodeUnreachable, NodeDisconnected, RequestTimedOut, ProtocolDecodeError)


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """How the channel connects: which listener, and its timeouts and backoff."""

    listener_name: str = DEFAULT_INTER_BROKER_LISTENER
    request_timeout_ms: int = 30_000  # controller.socket.timeout.ms
    connect_timeout_ms: int = 10_000  # Kafka's socket.connection.setup.timeout.ms default
    reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS
    reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS
    security: ClientSecurity | None = None  # the inter-broker listener's TLS, if any


@dataclass(slots=True)
class _Call:
    api_key: int
    version: int
    request: Any
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class _BrokerSender:
    """One broker's connection, queue and sender task."""

    def __init__(self, controller_id: int, broker_id: int, endpoint: Endpoint, settings: ChannelSettings):
        self.broker_id = broker_id
        self.endpoint = endpoint
        self._controller_id = controller_id
        self._settings = settings
        self._queue: asyncio.Queue[_Call] = asyncio.Queue()
        self._in_flight: _Call | None = None
        self._connection = ReusedConnection(
            f"controller-{controller_id}-to-broker-{broker_id}",
            settings.request_timeout_ms,
            settings.connect_timeout_ms,
            settings.security,
        )
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-to-broker-{broker_id}"
        )

    def submit(self, call: _Call) -> None:
        self._queue.put_nowait(call)

    async def _run(self) -> None:
        while True:
            call = await self._queue.get()
            if call.future.done():
                continue  # the caller stopped waiting before the request went out
            self._in_flight = call
            response = await self._deliver(call)
            self._in_flight = None
            if not call.future.done():
                call.future.set_result(response)

    async def _deliver(self, call: _Call) -> Any:
        """Send `call` until it is answered, reconnecting with backoff after each failure."""
        backoff_ms = self._settings.reconnect_backoff_ms
        while True:
            try:
                connection = await self._connection.to(self.broker_id, self.endpoint.host, self.endpoint.port)
                return await connection.send(call.api_key, call.version, call.request)
            except _DELIVERY_FAILURES as exc:
                log.warning(
                    "Controller's %s to broker %d at %s:%d failed (%s); retrying in %d ms",
                    ApiKey(call.api_key).name,
                    self.broker_id,
                    self.endpoint.host,
                    self.endpoint.port,
                    exc,
                    backoff_ms,
                )
                await self._connection.close()
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, self._settings.reconnect_backoff_max_ms)

    async def stop(self, reason: str) -> None:
        """Stop the sender and close the connection; every call not answered fails."""
        await cancel_and_wait(self._task)
        await self._connection.close()
        unanswered = [self._in_flight] if self._in_flight is not None else []
        while not self._queue.empty():
            unanswered.append(self._queue.get_nowait())
        for call in unanswered:
            if not call.future.done():
                call.future.set_exception(KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, reason))


class RemoteChannel(ControllerChannel):
    """See the module docstring."""

    def __init__(self, controller_id: int, settings: ChannelSettings = ChannelSettings()) -> None:
        self.controller_id = controller_id
        self.settings = settings
        self._senders: dict[int, _BrokerSender] = {}

    def reached(self) -> frozenset[int]:
        return frozenset(self._senders)

    async def add_broker(self, broker: BrokerInfo) -> None:
        """Start sending to `broker` (a broker joined, or its endpoint changed)."""
        endpoint = broker.endpoint(self.settings.listener_name)
        if endpoint is None:
            log.error(
                "Broker %d has no endpoint on the inter-broker listener %s (it has %s): not sending to it",
                broker.broker_id,
                self.settings.listener_name,
                ", ".join(e.listener for e in broker.endpoints) or "none",
            )
            await self.remove_broker(broker.broker_id)
            return
        current = self._senders.get(broker.broker_id)
        if current is not None:
            if current.endpoint == endpoint:
                return
            await self.remove_broker(broker.broker_id)
        self._senders[broker.broker_id] = _BrokerSender(
            self.controller_id, broker.broker_id, endpoint, self.settings
        )
        log.info(
            "Controller %d sends to broker %d at %s:%d",
            self.controller_id,
            broker.broker_id,
            endpoint.host,
            endpoint.port,
        )

    async def remove_broker(self, broker_id: int) -> None:
        """Stop sending to `broker_id` (it left); its unanswered requests fail."""
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await sender.stop(f"broker {broker_id} left the controller's channel")

    async def sync_brokers(self, live: Iterable[BrokerInfo]) -> None:
        """Send to exactly these live brokers (the controller's own broker is reached in-process)."""
        brokers = {b.broker_id: b for b in live if b.broker_id != self.controller_id}
        for broker_id in self.reached() - brokers.keys():
            await self.remove_broker(broker_id)
        for broker in brokers.values():
            await self.add_broker(broker)

    async def close(self) -> None:
        """Stop every sender and close every connection."""
        for broker_id in list(self._senders):
            await self.remove_broker(broker_id)

    def _send(self, broker_id: int, api_key: int, version: int, request: Any) -> asyncio.Future[Any]:
        call = _Call(api_key, version, request)
        sender = self._senders.get(broker_id)
        if sender is None:
            call.future.set_exception(
                KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the channel")
            )
        else:
            sender.submit(call)
        return call.future

    def leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest
    ) -> asyncio.Future[LeaderAndIsrResponse]:
        return self._send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)

    def update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest
    ) -> asyncio.Future[UpdateMetadataResponse]:
        return self._send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, request)

    def stop_replica(
        self, broker_id: int, request: StopReplicaRequest
    ) -> asyncio.Future[StopReplicaResponse]:
        return self._send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, request)
