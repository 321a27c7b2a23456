"""The broker's channel to the active controller (Kafka's BrokerToControllerChannelManager).

Owns one `NodeConnection` to the controller this broker's metadata cache names (UpdateMetadata's
controller id), on that broker's endpoint of the inter-broker listener, and the retries of a request
until the controller answers it.

Behaviour:
- When this broker is the controller, a request is handed to its `Controller` in-process (no
  connection to itself), as the controller's own LocalChannel does the other way.
- Otherwise the request goes over the wire. No controller known yet, a connection that cannot be
  opened or is lost, a request that times out (request.timeout.ms of the connection), or an answer
  NOT_CONTROLLER (the seat moved): the connection is dropped and the request is sent again after
  `retry_backoff_ms` to whichever broker the cache names by then, until `timeout_s` passes
  (`ControllerUnavailable`). Any other answer, errors included, is returned as it is.
- `close()` closes the connection; calls in progress fail with `ControllerUnavailable`.

Invariants: never blocks the event loop; at most one connection open.

Requests: AlterPartition (v1) and ControlledShutdown (v3).

Callers: the ReplicaManager's ISR changes (AlterPartition) and the broker's controlled shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from odradek.controller.metadata import BrokerInfo
from odradek.network_client import (
    ClientSecurity,
    NodeConnection,
    NodeDisconnected,
    NodeUnreachable,
    RequestTimedOut,
    ReusedConnection,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from odradek.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from odradek.protocol.primitives import ProtocolDecodeError

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 1  # topics by name, the ISR as broker ids
CONTROLLED_SHUTDOWN_VERSION = 3  # with the broker epoch
DEFAULT_RETRY_BACKOFF_MS = 100
_LOST = (NodeUnreachable, NodeDisconnected, RequestTimedOut, ProtocolDecodeError)


class ControllerUnavailable(ConnectionError):
    """No controller answered within the call's time."""


class ControllerDirectory(Protocol):
    """What the channel reads from the broker's metadata cache."""

    def controller_id(self) -> int: ...

    def brokers(self) -> list[BrokerInfo]: ...


class LocalController(Protocol):
    """The in-process controller, when this broker holds the seat."""

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse: ...

    async def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse: ...


class BrokerToControllerChannel:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        metadata: ControllerDirectory,
        listener_name: str,
        local_controller: Callable[[], LocalController | None],
        *,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._metadata = metadata
        self._listener_name = listener_name
        self._local_controller = local_controller
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._connection = ReusedConnection(
            f"broker-{broker_id}-to-controller", request_timeout_ms, security=security
        )
        self._closed = False

    async def alter_partition(
        self, request: AlterPartitionRequest, timeout_s: float
    ) -> AlterPartitionResponse:
        return await self._send(
            ApiKey.ALTER_PARTITION,
            ALTER_PARTITION_VERSION,
            request,
            lambda controller: controller.alter_partition(request),
            timeout_s,
        )

    async def controlled_shutdown(
        self, request: ControlledShutdownRequest, timeout_s: float
    ) -> ControlledShutdownResponse:
        return await self._send(
            ApiKey.CONTROLLED_SHUTDOWN,
            CONTROLLED_SHUTDOWN_VERSION,
            request,
            lambda controller: controller.controlled_shutdown(request),
            timeout_s,
        )

    async def close(self) -> None:
        self._closed = True
        await self._connection.close()

    async def _send(
        self,
        api_key: int,
        version: int,
        request: Any,
        in_process: Callable[[LocalController], Awaitable[Any]],
        timeout_s: float,
    ) -> Any:
        deadline = time.monotonic() + timeout_s
        while not self._closed:
            local = self._local_controller()
            if local is not None:
                response = await in_process(local)
            else:
                response = await self._send_remote(api_key, version, request)
            if response is not None and response.error_code != ErrorCode.NOT_CONTROLLER:
                return response
            if time.monotonic() + self._retry_backoff_s > deadline:
                break
            await asyncio.sleep(self._retry_backoff_s)
        raise ControllerUnavailable(f"no controller answered {ApiKey(api_key).name} within {timeout_s} s")

    async def _send_remote(self, api_key: int, version: int, request: Any) -> Any | None:
        """The controller's answer, or None when it could not be had this time."""
        try:
            connection = await self._connected()
            if connection is None:
                return None
            response = await connection.send(api_key, version, request)
        except _LOST as exc:
            log.debug("Request %s to the controller failed: %s", ApiKey(api_key).name, exc)
            await self._connection.close()
            return None
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            await self._connection.close()
        return response

    async def _connected(self) -> NodeConnection | None:
        controller_id = self._metadata.controller_id()
        for broker in self._metadata.brokers():
            endpoint = broker.endpoint(self._listener_name) if broker.broker_id == controller_id else None
            if endpoint is not None:
                return await self._connection.to(controller_id, endpoint.host, endpoint.port)
        return None
