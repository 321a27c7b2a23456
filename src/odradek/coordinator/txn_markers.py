"""Delivery of transaction markers to the partitions' leaders (Kafka's TransactionMarkerChannelManager).

Owns one connection per leader broker, on the inter-broker listener. `write` splits a marker's
partitions by leader as the metadata cache (`ClusterMetadata`) knows it: the partitions this broker
leads (or that have no known leader, so the local append answers why) are written through the
`MarkerWriter` (the broker's `write_txn_markers`, which also completes the transactional offset
commits of `__consumer_offsets` partitions); the others are sent to their leaders as a
WriteTxnMarkers v1 request, one per leader, concurrently.
A leader that cannot be reached answers its partitions COORDINATOR_NOT_AVAILABLE, a retriable code:
the coordinator retries after a backoff, with the leaders known then.

Callers: the transaction coordinator's shards (txn_shard.py, through their `MarkerChannel`); the
broker builds it and the transaction coordinator closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from odradek.controller.metadata import Endpoint
from odradek.coordinator.coordinator import ClusterMetadata
from odradek.network_client import ClientSecurity, ReusedConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from odradek.replication.types import TopicPartition, TxnMarker

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


class MarkerWriter(Protocol):
    """Writes a marker to partitions led here: the error code per partition."""

    async def write_txn_markers(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]: ...


class TxnMarkerChannel:
    def __init__(
        self,
        broker_id: int,
        listener: str,
        metadata: ClusterMetadata,
        local: MarkerWriter,
        security: ClientSecurity | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._security = security  # the inter-broker listener's TLS, if any
        self._listener = listener  # inter.broker.listener.name
        self._metadata = metadata
        self._local = local
        self._connections: dict[int, ReusedConnection] = {}

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    async def write(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        """The error code per partition of writing `marker` to each of `keys` through its leader."""
        by_leader: dict[int, list[TopicPartition]] = {}
        local: list[TopicPartition] = []
        for key in keys:
            state = self._metadata.partition(*key)
            if state is None or state.leader < 0 or state.leader == self._broker_id:
                local.append(key)
            else:
                by_leader.setdefault(state.leader, []).append(key)
        sends = [self._send(leader, marker, remote, timeout_ms) for leader, remote in by_leader.items()]
        results: dict[TopicPartition, int] = {}
        for answered in await asyncio.gather(
            self._local.write_txn_markers(marker, local, timeout_ms), *sends
        ):
            results.update(answered)
        return results

    async def _send(
        self, leader: int, marker: TxnMarker, keys: list[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        endpoint = self._endpoint(leader)
        if endpoint is None:
            return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            connection = await self._connection(leader, timeout_ms).to(leader, endpoint.host, endpoint.port)
            response = await connection.send(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, _request(marker, keys)
            )
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.debug("Cannot send transaction markers to broker %d: %s", leader, exc)
            return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        answered = {
            (topic.name, p.partition_index): p.error_code
            for result in response.markers
            for topic in result.topics
            for p in topic.partitions
        }
        return {key: answered.get(key, ErrorCode.UNKNOWN_SERVER_ERROR) for key in keys}

    def _endpoint(self, broker_id: int) -> Endpoint | None:
        node = next((b for b in self._metadata.brokers() if b.broker_id == broker_id), None)
        return node.endpoint(self._listener) if node is not None else None

    def _connection(self, leader: int, timeout_ms: int) -> ReusedConnection:
        connection = self._connections.get(leader)
        if connection is None:
            client_id = f"broker-{self._broker_id}-txn-markers"
            connection = self._connections[leader] = ReusedConnection(
                client_id, timeout_ms + 5000, security=self._security
            )
        return connection


def _request(marker: TxnMarker, keys: list[TopicPartition]) -> WriteTxnMarkersRequest:
    topics: dict[str, list[int]] = {}
    for topic, partition in keys:
        topics.setdefault(topic, []).append(partition)
    return WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.commit,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(t, ps) for t, ps in topics.items()],
                coordinator_epoch=marker.coordinator_epoch,
            )
        ]
    )
