"""The dispatcher: one request frame in, the response chunks out (or a closed connection).

The request path, from bytes to handler and back, in named stages (Kafka's SocketServer, then
RequestChannel and KafkaApis):
1. frame (socket_server.py): a connection cuts size-prefixed frames out of what it receives, within the
   connection limits, and queues them; one request per connection is in the path at a time;
2. header (here): the API key and version route to the handler module; the request header (api
   key, version, correlation id, client id) is parsed;
3. principal: the `RequestContext` is built with the connection's listener, security protocol and
   principal (set by the network layer at accept: User:ANONYMOUS on PLAINTEXT);
4. authorize: the `Authorizer` (security/authorizer.py; default `AllowEverything`) is asked once
   whether the principal may use the cluster; a refusal is answered with the request's error
   response carrying CLUSTER_AUTHORIZATION_FAILED, without handling it;
5. decode: the body is decoded by the codec (records stay a memoryview of the frame);
6. handle: `handle(ctx, request)` of the handler module (timed step by step while request quotas
   are set: `HandlingTimer`);
7. quota: the `QuotaManager` (server/client_quotas.py; `ClientQuotas` in a broker) records a
   Produce's size against producer_byte_rate and the handling time against request_percentage
   (not for the cluster's own APIs and follower fetches, as Kafka exempts them); the throttle time
   is the largest of those and of the one a handler answered for its own quota (Fetch's
   consumer_byte_rate, the controller mutation quota) in the response's throttle_time_ms. A
   positive one goes into throttle_time_ms, mutes the connection until then
   (`ClientInfo.throttle`, KIP-219: even an acks=0 producer, which gets no response, is held)
   and is logged as Kafka's request logger line (`kafka.request.logger`, INFO here);
8. encode: the response header (v0 or v1, as the API version demands) and body become chunks;
9. send (socket_server.py): the chunks go out in request order (bytes with sendmsg, file ranges with
   sendfile); a muted connection then waits out its mute before its next request.
It is the network layer's `RequestHandler`.

Behaviour, following Kafka:
- Unknown API key (including one the broker's mode does not enable: the ZooKeeper-only controller
  APIs on a single node, see handlers/__init__.py), a frame too short for a header, an undecodable
  header or body: log a line with the client address and API key, close the connection
  (`CloseConnection`).
- A version outside the handler's range: ApiVersions answers UNSUPPORTED_VERSION (35) in a v0 body
  listing the supported ranges, so a client newer than the broker retries with a version it finds
  there. Other APIs answer with their `error_response(request, version, UNSUPPORTED_VERSION)` when
  the module has one and the codec can read that version; otherwise the connection closes.
- A handler raising `KafkaError` is answered with `error_response(request, version, code)`; any other
  exception is logged with its traceback and answered with UNKNOWN_SERVER_ERROR the same way. A
  module without `error_response` closes the connection instead. Either way the broker and other
  connections carry on, and so does this connection after an error response.
- `handle` returning None sends nothing (Produce with acks=0); `handle` raising `CloseConnection`
  drops the client without an answer (Kafka closes the connection of a failed acks=0 produce).

Callers: the broker builds one `Dispatcher` and gives it to `SocketServer`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from odradek.protocol.api_keys import API_SPECS, ApiKey
from odradek.protocol.codec import Chunk, decode_request, encode_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    peek_api_key_version,
    response_header_version,
)
from odradek.protocol.messages.api_versions import ApiVersionsResponse
from odradek.protocol.primitives import INT32, ProtocolDecodeError, ProtocolEncodeError
from odradek.security.authorizer import CLUSTER, AclOperation, AllowEverything, Authorizer
from odradek.server.client_quotas import REQUEST_QUOTA_EXEMPT_APIS, HandlingTimer, NoQuotas, QuotaManager
from odradek.server.context import BrokerServices, RequestContext
from odradek.server.handlers import registry_for
from odradek.server.handlers.api_versions import supported_versions
from odradek.server.socket_server import ClientInfo, CloseConnection

log = logging.getLogger(__name__)
request_log = logging.getLogger("kafka.request.logger")

_MIN_HEADER_SIZE = 8  # api_key, api_version, correlation_id


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN({api_key})"


def _quota_exempt(module: ModuleType, request: Any) -> bool:
    """Whether a handler exempts this request from the request quota (Fetch: a follower's)."""
    exempt = getattr(module, "quota_exempt", None)
    return exempt is not None and bool(exempt(request))


class Dispatcher:
    """Routes request frames to handler modules; see the module docstring for the error rules."""

    def __init__(
        self,
        broker: BrokerServices,
        handlers: Mapping[int, ModuleType] | None = None,
        authorizer: Authorizer | None = None,
        quotas: QuotaManager | None = None,
    ) -> None:
        self._broker = broker
        self._handlers = registry_for(broker.config) if handlers is None else handlers
        self._authorizer = authorizer or AllowEverything()
        self._quotas = quotas or NoQuotas()

    @property
    def handlers(self) -> Mapping[int, ModuleType]:
        return self._handlers

    async def __call__(self, frame: bytes | bytearray, client: ClientInfo) -> list[Chunk] | None:
        # header: route by API key and version, then parse the request header
        if len(frame) < _MIN_HEADER_SIZE:
            raise self._reject(client, None, f"frame of {len(frame)} bytes is too short for a request header")
        api_key, api_version = peek_api_key_version(frame)
        module = self._handlers.get(api_key)
        if module is None:
            reason = "API not enabled on this broker" if api_key in API_SPECS else "unknown API key"
            raise self._reject(client, api_key, reason)
        if not module.MIN_VERSION <= api_version <= module.MAX_VERSION:
            return self._unsupported_version(module, frame, client, api_key, api_version)
        header, body_offset = self._header(frame, client)
        # principal: the connection's listener, security protocol and principal
        ctx = RequestContext(
            header, self._broker, client.host, client.listener, client.security_protocol, client.principal
        )
        # authorize
        allowed = self._authorizer.authorize(ctx, AclOperation.ANY, CLUSTER)
        # decode
        timed = self._quotas.request_quota_enabled and header.api_key not in REQUEST_QUOTA_EXEMPT_APIS
        started_ns = time.perf_counter_ns() if timed else 0
        request = self._decode(header, frame, body_offset, client)
        handling_ns = time.perf_counter_ns() - started_ns if timed else 0
        # handle
        if not allowed:
            response = self._refused(module, request, ctx, client)
        else:
            try:
                if timed:
                    timer = HandlingTimer(module.handle(ctx, request))
                    response = await timer
                    handling_ns += timer.elapsed_ns
                else:
                    response = await module.handle(ctx, request)
            except CloseConnection:
                raise
            except Exception as exc:
                response = self._failed(module, request, header, exc, client)
        # quota
        if timed and _quota_exempt(module, request):
            handling_ns = 0
        produce_bytes = len(frame) if header.api_key == ApiKey.PRODUCE else 0
        self._throttle(ctx, client, produce_bytes, handling_ns, response)
        if response is None:
            return None
        # encode
        return self._encode(header.api_key, header.api_version, header.correlation_id, response, client)

    def _throttle(
        self, ctx: RequestContext, client: ClientInfo, produce_bytes: int, handling_ns: int, response: Any
    ) -> None:
        """The quota stage (see the module docstring)."""
        throttle_ms = self._quotas.record_request(ctx, produce_bytes, handling_ns)
        throttle_ms = max(throttle_ms, getattr(response, "throttle_time_ms", 0))
        if throttle_ms <= 0:
            return
        if response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = throttle_ms
        client.throttle(throttle_ms)
        header = ctx.header
        request_log.info(
            "Completed request:RequestHeader(apiKey=%s, apiVersion=%d, clientId=%s, correlationId=%d) "
            "from connection %s;throttleTime:%d,securityProtocol:%s,principal:%s,listener:%s",
            _api_name(header.api_key),
            header.api_version,
            header.client_id,
            header.correlation_id,
            client,
            throttle_ms,
            ctx.security_protocol,
            ctx.principal,
            ctx.listener,
        )

    def _refused(self, module: ModuleType, request: Any, ctx: RequestContext, client: ClientInfo) -> Any:
        header = ctx.header
        log.info(
            "%s v%d from %s (%s) not authorized",
            _api_name(header.api_key),
            header.api_version,
            client,
            ctx.principal,
        )
        return self._error_response(module, request, header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, client)

    def _failed(
        self, module: ModuleType, request: Any, header: RequestHeader, exc: Exception, client: ClientInfo
    ) -> Any:
        """The error response to a handler that raised `exc` (see the module docstring)."""
        api = _api_name(header.api_key)
        if isinstance(exc, KafkaError):
            log.info("%s v%d from %s failed: %s", api, header.api_version, client, exc)
            return self._error_response(module, request, header, exc.code, client)
        log.error("%s v%d from %s failed unexpectedly", api, header.api_version, client, exc_info=exc)
        return self._error_response(module, request, header, ErrorCode.UNKNOWN_SERVER_ERROR, client)

    def _header(self, frame: bytes | bytearray, client: ClientInfo) -> tuple[RequestHeader, int]:
        try:
            return parse_request_header(frame)
        except ProtocolDecodeError as exc:
            api_key, _ = peek_api_key_version(frame)
            raise self._reject(client, api_key, f"malformed request: {exc}") from None

    def _decode(
        self, header: RequestHeader, frame: bytes | bytearray, body_offset: int, client: ClientInfo
    ) -> Any:
        try:
            return decode_request(header.api_key, header.api_version, memoryview(frame)[body_offset:])
        except ProtocolDecodeError as exc:
            raise self._reject(client, header.api_key, f"malformed request: {exc}") from None

    def _unsupported_version(
        self, module: ModuleType, frame: bytes | bytearray, client: ClientInfo, api_key: int, api_version: int
    ) -> list[Chunk]:
        log.info(
            "%s v%d from %s is outside the supported v%d-v%d",
            _api_name(api_key),
            api_version,
            client,
            module.MIN_VERSION,
            module.MAX_VERSION,
        )
        if api_key == ApiKey.API_VERSIONS:
            correlation_id = INT32.unpack_from(frame, 4)[0]
            response = ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=supported_versions(self._handlers)
            )
            return self._encode(api_key, 0, correlation_id, response, client)
        spec = API_SPECS.get(api_key)
        if not hasattr(module, "error_response") or spec is None or api_version not in spec.request_versions:
            raise self._reject(client, api_key, f"unsupported version {api_version}")
        header, body_offset = self._header(frame, client)
        request = self._decode(header, frame, body_offset, client)
        response = module.error_response(request, api_version, ErrorCode.UNSUPPORTED_VERSION)
        return self._encode(api_key, api_version, header.correlation_id, response, client)

    def _error_response(
        self, module: ModuleType, request: Any, header: RequestHeader, code: ErrorCode, client: ClientInfo
    ) -> Any:
        if not hasattr(module, "error_response"):
            raise self._reject(client, header.api_key, f"failed with {code.name} and has no error response")
        return module.error_response(request, header.api_version, code)

    def _encode(
        self, api_key: int, api_version: int, correlation_id: int, response: Any, client: ClientInfo
    ) -> list[Chunk]:
        try:
            body = encode_response(api_key, api_version, response)
        except ProtocolEncodeError:
            log.exception("Cannot encode the %s v%d response for %s", _api_name(api_key), api_version, client)
            raise CloseConnection("response encoding failed") from None
        header = encode_response_header(correlation_id, response_header_version(api_key, api_version))
        return [header, *body]

    @staticmethod
    def _reject(client: ClientInfo, api_key: int | None, reason: str) -> CloseConnection:
        api = _api_name(api_key) if api_key is not None else "-"
        log.warning("Closing connection from %s (api %s): %s", client, api, reason)
        return CloseConnection(reason)
