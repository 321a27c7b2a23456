"""Dispatcher error mapping in-process, with stand-in handler modules."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages.metadata import MetadataRequest, MetadataResponse
from odradek.server.dispatcher import Dispatcher
from odradek.server.socket_server import ClientInfo, CloseConnection
from tests.server.raw_client import request_frame

CLIENT = ClientInfo("127.0.0.1", 5555, 1)
METADATA = ApiKey.METADATA
Topic = MetadataResponse.MetadataResponseTopic


def metadata_module(handle, *, with_error_response=True, max_version=12):
    module = SimpleNamespace(API_KEY=METADATA, MIN_VERSION=1, MAX_VERSION=max_version, handle=handle)
    if with_error_response:
        module.error_response = lambda request, version, code: MetadataResponse(
            topics=[
                MetadataResponse.MetadataResponseTopic(error_code=code, name=t.name) for t in request.topics
            ]
        )
    return module


def dispatch(module, version=9, correlation_id=7):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    frame = request_frame(METADATA, version, request, correlation_id)[4:]
    chunks = asyncio.run(Dispatcher(broker=None, handlers={METADATA: module})(frame, CLIENT))
    if chunks is None:
        return None
    data = b"".join(chunks)
    answered, offset = parse_response_header(data, 1 if version >= 9 else 0)
    assert answered == correlation_id
    return decode_response(METADATA, version, data[offset:])


def raising(exc):
    async def handle(ctx, request):
        raise exc

    return handle


def test_kafka_error_becomes_the_apis_error_response():
    response = dispatch(metadata_module(raising(KafkaError(ErrorCode.INVALID_REQUEST, "no"))))
    assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.INVALID_REQUEST)]


def test_unexpected_exception_becomes_unknown_server_error(caplog):
    response = dispatch(metadata_module(raising(ZeroDivisionError("bug"))))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "ZeroDivisionError" in caplog.text


def test_module_without_error_response_closes_on_failure():
    with pytest.raises(CloseConnection):
        dispatch(metadata_module(raising(KafkaError(ErrorCode.INVALID_REQUEST)), with_error_response=False))


def test_version_above_the_handlers_range_uses_error_response():
    async def never(ctx, request):
        raise AssertionError("must not be called")

    response = dispatch(metadata_module(never, max_version=5), version=7)
    assert response.topics[0].error_code == ErrorCode.UNSUPPORTED_VERSION


def test_handler_context_and_no_response():
    seen = {}

    async def handle(ctx, request):
        seen.update(version=ctx.api_version, correlation_id=ctx.header.correlation_id, host=ctx.client_host)
        seen["topics"] = [t.name for t in request.topics]
        return None

    assert dispatch(metadata_module(handle), version=4, correlation_id=99) is None
    assert seen == {"version": 4, "correlation_id": 99, "host": "127.0.0.1", "topics": ["t"]}


def test_handler_may_close_the_connection():
    with pytest.raises(CloseConnection):
        dispatch(metadata_module(raising(CloseConnection("acks=0 produce failed"))))


def test_unregistered_api_key_closes():
    frame = struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, -1) + b"\x00" * 8
    with pytest.raises(CloseConnection):
        asyncio.run(Dispatcher(broker=None, handlers={})(frame, CLIENT))
