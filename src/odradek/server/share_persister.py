"""How a share-partition leader reaches the durable state of its share-partitions (Kafka's
DefaultStatePersister, KIP-932).

Owns the routing of each state operation to the share coordinator of its key
(`group:topicId:partition`): the leader of the key's `__share_group_state` partition, as the share
coordinator's `find_coordinator` finds it (the topic created on first use). When that leader is
this broker the share coordinator is called in process; otherwise the request goes to that broker
on the inter-broker listener: InitializeShareGroupState v0, ReadShareGroupState v0,
WriteShareGroupState v0, DeleteShareGroupState v0 (one connection per broker, one request on it at
a time). A request that cannot be sent or answered is NETWORK_EXCEPTION, a coordinator without a
leader COORDINATOR_NOT_AVAILABLE; the coordinator's own errors (NOT_COORDINATOR while leadership
moves, COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH) come back as they are;
a read answered INVALID_REQUEST (Kafka's answer for an uninitialized share-partition) is no state.

Retries (Kafka's persister retries the same errors): an operation answered NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or NETWORK_EXCEPTION is routed and sent
again after 50, 100, 200, 400 and 800 ms, and the last answer is the caller's. Kafka backs off from
1 s up to 30 s behind a delayed share fetch; a ShareFetch here waits for its partitions' state, so
the retries are shorter (1.55 s in all: a state topic partition loading after a restart or a
leadership move, not a lasting outage).

Same API as the share coordinator's (coordinator/share_coordinator.py): `read_state`,
`initialize_state`, `write_state`, `delete_state`, `has_state`, `local_states`.
Callers: server/share_partitions.py (`SharePartitionManager`), the broker.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from odradek.controller.metadata import Endpoint
from odradek.coordinator.share_coordinator import ShareCoordinator
from odradek.coordinator.share_partition import StateBatch
from odradek.coordinator.share_records import ShareState, StateKey
from odradek.network_client import ClientSecurity, ReusedConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from odradek.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from odradek.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from odradek.protocol.messages.write_share_group_state import WriteShareGroupStateRequest

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
RETRIED = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
RETRY_BACKOFF_MS = (50, 100, 200, 400, 800)


def error_of_read(answer: tuple[int, ShareState | None]) -> int:
    return answer[0]


def error_code(answer: int) -> int:
    return answer


def retried(
    error_of: Callable[[T], int],
) -> Callable[
    [Callable[Concatenate[SharePersister, P], Awaitable[T]]],
    Callable[Concatenate[SharePersister, P], Awaitable[T]],
]:
    """An operation made again after each backoff of RETRY_BACKOFF_MS while `error_of` its answer is
    one of RETRIED; the last answer is the caller's."""

    def wrap(
        operation: Callable[Concatenate[SharePersister, P], Awaitable[T]],
    ) -> Callable[Concatenate[SharePersister, P], Awaitable[T]]:
        @functools.wraps(operation)
        async def attempts(persister: SharePersister, *args: P.args, **kwargs: P.kwargs) -> T:
            for backoff_ms in RETRY_BACKOFF_MS:
                answer = await operation(persister, *args, **kwargs)
                if error_of(answer) not in RETRIED:
                    return answer
                await asyncio.sleep(backoff_ms / 1000)
            return await operation(persister, *args, **kwargs)

        return attempts

    return wrap


class SharePersister:
    def __init__(
        self,
        broker_id: int,
        listener: str,
        request_timeout_ms: int,
        coordinator: ShareCoordinator,
        security: ClientSecurity | None,
    ) -> None:
        self._broker_id = broker_id
        self._listener = listener
        self._timeout_ms = request_timeout_ms
        self.local = coordinator
        self._security = security
        self._connections: dict[int, tuple[ReusedConnection, asyncio.Lock]] = {}

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection, _ in connections:
            await connection.close()

    # -- the API ----------------------------------------------------------------------------------

    @retried(error_of_read)
    async def read_state(self, key: StateKey, leader_epoch: int = -1) -> tuple[int, ShareState | None]:
        target = await self._target(key)
        if isinstance(target, int):
            return target, None
        if target is None:
            return await self.local.read_state(key)
        request = ReadShareGroupStateRequest(
            key.group_id,
            [
                ReadShareGroupStateRequest.ReadStateData(
                    key.topic_id, [ReadShareGroupStateRequest.PartitionData(key.partition, leader_epoch)]
                )
            ],
        )
        error, result = await self._send(target, ApiKey.READ_SHARE_GROUP_STATE, request)
        if error or result is None:
            return error, None
        if result.error_code == ErrorCode.INVALID_REQUEST:  # an uninitialized share-partition
            return ErrorCode.NONE, None
        if result.error_code:
            return result.error_code, None
        batches = tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in result.state_batches
        )
        return ErrorCode.NONE, ShareState(result.state_epoch, leader_epoch, result.start_offset, batches)

    async def has_state(self, key: StateKey) -> bool:
        return (await self.read_state(key))[1] is not None

    @retried(error_code)
    async def initialize_state(self, key: StateKey, state_epoch: int, start_offset: int) -> int:
        target = await self._target(key)
        if isinstance(target, int):
            return target
        if target is None:
            return await self.local.initialize_state(key, state_epoch, start_offset)
        partition = InitializeShareGroupStateRequest.PartitionData(key.partition, state_epoch, start_offset)
        request = InitializeShareGroupStateRequest(
            key.group_id, [InitializeShareGroupStateRequest.InitializeStateData(key.topic_id, [partition])]
        )
        return await self._send_for_error(target, ApiKey.INITIALIZE_SHARE_GROUP_STATE, request)

    @retried(error_code)
    async def write_state(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> int:
        target = await self._target(key)
        if isinstance(target, int):
            return target
        if target is None:
            return await self.local.write_state(key, state_epoch, leader_epoch, start_offset, batches)
        partition = WriteShareGroupStateRequest.PartitionData(
            key.partition,
            state_epoch,
            leader_epoch,
            start_offset,
            state_batches=[
                WriteShareGroupStateRequest.StateBatch(
                    b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                )
                for b in batches
            ],
        )
        request = WriteShareGroupStateRequest(
            key.group_id, [WriteShareGroupStateRequest.WriteStateData(key.topic_id, [partition])]
        )
        return await self._send_for_error(target, ApiKey.WRITE_SHARE_GROUP_STATE, request)

    @retried(error_code)
    async def delete_state(self, key: StateKey) -> int:
        target = await self._target(key)
        if isinstance(target, int):
            return target
        if target is None:
            return await self.local.delete_state(key)
        request = DeleteShareGroupStateRequest(
            key.group_id,
            [
                DeleteShareGroupStateRequest.DeleteStateData(
                    key.topic_id, [DeleteShareGroupStateRequest.PartitionData(key.partition)]
                )
            ],
        )
        return await self._send_for_error(target, ApiKey.DELETE_SHARE_GROUP_STATE, request)

    def local_states(self, group_id: str) -> dict[StateKey, ShareState]:
        return self.local.local_states(group_id)

    # -- routing ----------------------------------------------------------------------------------

    async def _target(self, key: StateKey) -> int | tuple[int, Endpoint] | None:
        """None: this broker coordinates the key; (broker id, endpoint): another one does; an int:
        the error."""
        location = await self.local.find_coordinator(key.coordinator_key())
        if location.node is None:
            return int(location.error_code) or ErrorCode.COORDINATOR_NOT_AVAILABLE
        if location.node.broker_id == self._broker_id:
            return None
        endpoint = location.node.endpoint(self._listener)
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return location.node.broker_id, endpoint

    async def _send_for_error(self, target: tuple[int, Endpoint], api_key: int, request: object) -> int:
        error, result = await self._send(target, api_key, request)
        return error or (result.error_code if result is not None else ErrorCode.UNKNOWN_SERVER_ERROR)

    async def _send(self, target: tuple[int, Endpoint], api_key: int, request: object) -> tuple[int, Any]:
        """(error, the one partition result) of `request` sent to the broker of `target`."""
        broker_id, endpoint = target
        connection, lock = self._connection(broker_id)
        try:
            async with lock:
                node = await connection.to(broker_id, endpoint.host, endpoint.port)
                response = await node.send(api_key, 0, request)
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.warning("Share state request %d to broker %d failed: %s", api_key, broker_id, exc)
            return ErrorCode.NETWORK_EXCEPTION, None
        results = [p for topic in response.results for p in topic.partitions]
        if len(results) != 1:
            return ErrorCode.UNKNOWN_SERVER_ERROR, None
        return ErrorCode.NONE, results[0]

    def _connection(self, broker_id: int) -> tuple[ReusedConnection, asyncio.Lock]:
        found = self._connections.get(broker_id)
        if found is None:
            client_id = f"broker-{self._broker_id}-share-persister"
            found = (ReusedConnection(client_id, self._timeout_ms, security=self._security), asyncio.Lock())
            self._connections[broker_id] = found
        return found
