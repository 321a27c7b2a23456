"""NodeConnection, the broker's connection to another broker: requests against a real broker process,
pipelining in order, and Kafka's behaviour on a silent or vanished peer."""

from __future__ import annotations

import asyncio
import socket

import pytest

from odradek.network_client import NodeConnection, NodeDisconnected, NodeUnreachable, RequestTimedOut
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.broker import BrokerProcess, free_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as process:
        yield process


def _connection(port: int, request_timeout_ms: int = 5000) -> NodeConnection:
    return NodeConnection(0, "127.0.0.1", port, client_id="test", request_timeout_ms=request_timeout_ms)


def test_pipelined_requests_are_answered_in_order(broker):
    async def scenario() -> None:
        connection = _connection(broker.port)
        await connection.connect()
        try:
            versions, metadata = await asyncio.gather(
                connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1")),
                connection.send(ApiKey.METADATA, 12, MetadataRequest(topics=[])),
            )
            assert versions.error_code == 0 and any(k.api_key == ApiKey.FETCH for k in versions.api_keys)
            assert [b.node_id for b in metadata.brokers] == [0]
        finally:
            await connection.close()

    asyncio.run(scenario())


def test_unreachable_node():
    async def scenario() -> None:
        with pytest.raises(NodeUnreachable):
            await _connection(free_port()).connect()

    asyncio.run(scenario())


def test_silent_peer_times_out_and_the_connection_closes():
    server = socket.create_server(("127.0.0.1", 0))

    async def scenario() -> None:
        connection = _connection(server.getsockname()[1], request_timeout_ms=200)
        await connection.connect()
        first = asyncio.ensure_future(connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1")))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1")))
        with pytest.raises(RequestTimedOut):
            await first
        with pytest.raises((RequestTimedOut, NodeDisconnected)):
            await second
        assert not connection.connected
        with pytest.raises(NodeDisconnected):
            await connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
        await connection.close()

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_peer_closing_fails_pending_requests():
    server = socket.create_server(("127.0.0.1", 0))

    async def scenario() -> None:
        connection = _connection(server.getsockname()[1])
        await connection.connect()
        accepted, _ = await asyncio.get_running_loop().run_in_executor(None, server.accept)
        pending = asyncio.ensure_future(connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1")))
        await asyncio.sleep(0.05)
        accepted.close()
        with pytest.raises(NodeDisconnected):
            await pending
        await connection.close()

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_a_timed_out_connection_is_reset_so_its_request_is_not_delivered_late():
    """A graceful close would leave the unanswered request to the kernel, retransmitted until the
    peer takes it (after a partition heals: after requests sent later on a new connection); the
    timed-out connection is reset instead, which the peer reads as a reset, not an orderly end."""
    server = socket.create_server(("127.0.0.1", 0))

    async def scenario() -> None:
        connection = _connection(server.getsockname()[1], request_timeout_ms=200)
        await connection.connect()
        accepted, _ = await asyncio.get_running_loop().run_in_executor(None, server.accept)
        with pytest.raises(RequestTimedOut):
            await connection.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
        await connection.close()
        accepted.settimeout(5)
        with pytest.raises(ConnectionResetError):
            while accepted.recv(65536):
                pass
        accepted.close()

    try:
        asyncio.run(scenario())
    finally:
        server.close()
