"""The request path's stages in-process (server/dispatcher.py): a real connection's context carries
its listener, security protocol and principal; the quota hook is asked once per request (a test
double); a throttle goes into the response's throttle_time_ms and mutes the connection.
Authorization is the handlers' (tests/security/)."""

from __future__ import annotations

import asyncio
import struct
import time
from types import SimpleNamespace
from typing import Any

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages.metadata import MetadataRequest, MetadataResponse
from odradek.scheduler import Scheduler
from odradek.security.authorizer import CLUSTER, AclOperation, AllowEverything
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.client_quotas import NoQuotas
from odradek.server.context import RequestContext
from odradek.server.dispatcher import Dispatcher
from odradek.server.socket_server import ClientInfo, SocketServer
from tests.server.raw_client import request_frame

METADATA = ApiKey.METADATA
CLIENT = ClientInfo("127.0.0.1", 5555, 1)


class Recording:
    """A Metadata handler module that records the contexts it is handed."""

    API_KEY = METADATA
    MIN_VERSION = 1
    MAX_VERSION = 12

    def __init__(self) -> None:
        self.contexts: list[RequestContext] = []
        self.handled: list[float] = []

    async def handle(self, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
        self.contexts.append(ctx)
        self.handled.append(time.monotonic())
        return MetadataResponse(
            topics=[MetadataResponse.MetadataResponseTopic(name=t.name) for t in request.topics or ()]
        )

    @staticmethod
    def error_response(request: MetadataRequest, version: int, code: int) -> MetadataResponse:
        return MetadataResponse(
            topics=[
                MetadataResponse.MetadataResponseTopic(error_code=code, name=t.name)
                for t in request.topics or ()
            ]
        )


class Quotas:
    request_quota_enabled = True

    def __init__(self, throttle_ms: int = 0) -> None:
        self.throttle_ms = throttle_ms
        self.recorded: list[tuple[str | None, int, int]] = []

    def record_request(self, ctx: Any, produce_bytes: int, handling_ns: int) -> int:
        self.recorded.append((ctx.header.client_id, produce_bytes, handling_ns))
        return self.throttle_ms


def metadata_frame(correlation_id: int) -> bytes:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    return request_frame(METADATA, 9, request, correlation_id)


def decode(data: bytes) -> tuple[int, MetadataResponse]:
    correlation_id, offset = parse_response_header(data, 1)
    return correlation_id, decode_response(METADATA, 9, memoryview(data)[offset:])


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def exchange(dispatcher: Dispatcher, listener: str, count: int) -> list[tuple[int, MetadataResponse]]:
    """`count` Metadata requests on one real connection to a server listening as `listener`."""
    server = SocketServer(dispatcher, Scheduler(SYSTEM_CLOCK))
    _, port = await server.bind(listener, "127.0.0.1", 0)
    server.listen()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(metadata_frame(n) for n in range(count)))
        return [decode(await read_frame(reader)) for _ in range(count)]
    finally:
        writer.close()
        server.close()
        await server.drain(1)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_real_connection_carries_its_listener_security_protocol_and_anonymous_principal():
    handler = Recording()
    dispatcher = Dispatcher(broker=None, handlers={METADATA: handler})  # type: ignore[arg-type]
    answers = run(exchange(dispatcher, "CLIENTS", 2))
    assert [correlation_id for correlation_id, _ in answers] == [0, 1]
    for ctx in handler.contexts:
        assert (ctx.listener, ctx.security_protocol, ctx.client_host) == ("CLIENTS", "PLAINTEXT", "127.0.0.1")
        assert ctx.principal == ANONYMOUS == KafkaPrincipal("User", "ANONYMOUS")
        assert str(ctx.principal) == "User:ANONYMOUS"


def test_the_quota_hook_is_asked_once_per_request():
    handler, quotas = Recording(), Quotas()
    dispatcher = Dispatcher(
        broker=None,  # type: ignore[arg-type]
        handlers={METADATA: handler},
        quotas=quotas,
    )
    answers = run(exchange(dispatcher, "PLAINTEXT", 3))
    assert len(answers) == len(handler.contexts) == 3
    assert [(client_id, produce_bytes) for client_id, produce_bytes, _ in quotas.recorded] == [
        ("tests", 0)
    ] * 3
    assert all(handling_ns > 0 for _, _, handling_ns in quotas.recorded)  # request quotas time the handling


def test_a_throttled_connection_handles_its_next_request_after_the_mute():
    handler, quotas = Recording(), Quotas(throttle_ms=300)
    dispatcher = Dispatcher(broker=None, handlers={METADATA: handler}, quotas=quotas)  # type: ignore[arg-type]
    answers = run(exchange(dispatcher, "PLAINTEXT", 2))
    assert [correlation_id for correlation_id, _ in answers] == [0, 1]
    assert [response.throttle_time_ms for _, response in answers] == [300, 300]
    first, second = handler.handled
    assert second - first >= 0.3


def test_a_shutdown_does_not_wait_out_a_throttled_connections_mute():
    async def answered_then_drained() -> float:
        dispatcher = Dispatcher(
            broker=None,  # type: ignore[arg-type]
            handlers={METADATA: Recording()},
            quotas=Quotas(throttle_ms=60_000),
        )
        server = SocketServer(dispatcher, Scheduler(SYSTEM_CLOCK))
        _, port = await server.bind("PLAINTEXT", "127.0.0.1", 0)
        server.listen()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(metadata_frame(0))
        assert decode(await read_frame(reader))[1].throttle_time_ms == 60_000  # now muted for a minute
        started = time.monotonic()
        server.close()
        await server.drain(30)
        writer.close()
        return time.monotonic() - started

    assert run(answered_then_drained()) < 5


def test_the_defaults_allow_everything_and_never_throttle():
    ctx = SimpleNamespace(principal=ANONYMOUS, header=None)
    assert AllowEverything().authorize(ctx, AclOperation.WRITE, CLUSTER)  # type: ignore[arg-type]
    assert NoQuotas().record_request(ctx, 1 << 20, 1000) == 0  # type: ignore[arg-type]
