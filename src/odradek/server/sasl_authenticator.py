"""The SASL gate of one connection on a SASL listener (Kafka's SaslServerAuthenticator, KIP-43,
KIP-152, KIP-368): the connection's request handler until, and whenever, it is not authenticated.

States: HANDSHAKE (ApiVersions or SaslHandshake expected), AUTHENTICATE (SaslAuthenticate expected,
after a v1 handshake), RAW_TOKENS (size-prefixed SASL tokens without a Kafka header, after a v0
handshake), COMPLETE (authenticated: every frame goes to the request handler).

Before authentication, as Kafka:
- ApiVersions goes to the request handler (as User:ANONYMOUS); SaslHandshake names a mechanism of the
  listener's `sasl.enabled.mechanisms` (otherwise UNSUPPORTED_SASL_MECHANISM, then a failed
  authentication); any other request, or one that does not parse, is logged and the connection
  closed without an answer (Kafka: "Unexpected Kafka request of type X during SASL handshake").
- After a v1 handshake every frame must be a SaslAuthenticate: another API is answered with its error
  response carrying ILLEGAL_SASL_STATE, then the authentication fails.
- A failed authentication is answered with SASL_AUTHENTICATION_FAILED and the mechanism's message
  (or Kafka's generic "Authentication failed during authentication due to invalid credentials with
  SASL mechanism X" when the detail could tell whether the user exists), logged ("Failed
  authentication with HOST ..."), and the connection closed after
  `connection.failed.authentication.delay.ms`, reading nothing meanwhile. A v0 (raw token) exchange
  that fails is closed after the same delay, without an answer.
- Frames are limited to `sasl.server.max.receive.size` until authenticated; the whole exchange must
  end within the listener's handshake bound (listener.py), or the connection is closed.

Once authenticated the connection's principal is `User:<authorization id>`. The SaslAuthenticate
response carries `session_lifetime_ms` (v1+) when `connections.max.reauth.ms` is positive or the
credential expires (an OAUTHBEARER token's `exp`): the smaller of the two. A client that spoke
SaslAuthenticate v1+ re-authenticates by sending SaslHandshake again (same mechanism, same
principal, or the re-authentication fails); a request after the session's end is not handled: the
connection is closed (Kafka's "expired channel"). A SaslHandshake or SaslAuthenticate the gate does
not take goes to the request handler, whose handlers answer ILLEGAL_SASL_STATE as KafkaApis does.

Cost: PLAINTEXT listeners have no gate at all. On a SASL connection, an authenticated request costs
a state check, a peek at its API key and, with a session lifetime, a clock read.

Callers: the socket server (server/socket_server.py) through `authenticator_for(listener, handlers)`,
wired by the broker (server/kafka_server.py).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import weakref
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Chunk, decode_request, encode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    peek_api_key_version,
    response_header_version,
)
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from odradek.protocol.primitives import ProtocolDecodeError
from odradek.security.principal import USER_TYPE, KafkaPrincipal
from odradek.security.sasl.mechanisms import SaslAuthenticationError, SaslError, SaslServer
from odradek.server.sasl_listener import SaslListener
from odradek.server.socket_server import (
    Authenticator,
    ClientInfo,
    CloseConnection,
    Connection,
    RequestHandler,
)

log = logging.getLogger(__name__)

HANDSHAKE_VERSIONS = range(0, 2)
AUTHENTICATE_VERSIONS = range(0, 3)
_MIN_HEADER_SIZE = 8


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw tokens"
    COMPLETE = "complete"


class _AuthenticationFailed(Exception):
    """An exchange that failed; `response` (if any) is sent before the delayed close."""

    def __init__(self, message: str, response: list[Chunk] | None) -> None:
        super().__init__(message)
        self.response = response


def authenticator_for(listener: SaslListener, handlers: Mapping[int, ModuleType]) -> Authenticator:
    """The socket server's `Authenticator` for `listener`: a new gate per connection."""

    def gate(handler: RequestHandler, connection: Connection) -> RequestHandler:
        return SaslServerAuthenticator(handler, connection, listener, handlers)

    return gate


class SaslServerAuthenticator:
    """One connection's gate; see the module docstring."""

    def __init__(
        self,
        handler: RequestHandler,
        connection: Connection,
        listener: SaslListener,
        handlers: Mapping[int, ModuleType],
    ) -> None:
        self._handler = handler
        self._connection = connection
        self._listener = listener
        self._handlers = handlers
        self._state = State.HANDSHAKE
        self._server: SaslServer | None = None
        self._mechanism = ""
        self._reauthenticating = False
        self._supports_reauthentication = False
        self._session_end: float | None = None  # time.monotonic() seconds
        connection.limit_request_size(listener.max_receive_size, "sasl.server.max.receive.size")
        # a weak reference: a connection closed early is not kept alive by its pending deadline
        self._deadline = asyncio.get_running_loop().call_later(
            listener.handshake_timeout_ms / 1000, _handshake_expired, weakref.ref(self)
        )

    async def __call__(self, frame: bytes | bytearray, client: ClientInfo) -> list[Chunk] | None:
        if self._state is State.COMPLETE:
            if len(frame) < _MIN_HEADER_SIZE or not self._begins_reauthentication(frame, client):
                if self._session_end is not None and time.monotonic() >= self._session_end:
                    log.info(
                        "Closing connection from %s (%s): its SASL session has expired",
                        client,
                        client.principal,
                    )
                    raise CloseConnection("SASL session expired")
                return await self._handler(frame, client)  # type: ignore[return-value]
        try:
            if self._state is State.RAW_TOKENS:
                return [self._evaluate(frame, client)]
            return await self._kafka_request(frame, client)
        except _AuthenticationFailed as exc:
            log.info("Failed authentication with %s (%s)", client, exc)
            raise CloseConnection(
                str(exc), exc.response, self._listener.failed_authentication_delay_ms / 1000
            ) from None

    def _begins_reauthentication(self, frame: bytes | bytearray, client: ClientInfo) -> bool:
        api_key, _ = peek_api_key_version(frame)
        if api_key != ApiKey.SASL_HANDSHAKE or not self._supports_reauthentication:
            return False
        log.debug("Re-authentication of %s (%s) begins", client, client.principal)
        self._state, self._reauthenticating = State.HANDSHAKE, True
        return True

    async def _kafka_request(self, frame: bytes | bytearray, client: ClientInfo) -> list[Chunk] | None:
        if len(frame) < _MIN_HEADER_SIZE:
            raise self._unexpected(client, f"frame of {len(frame)} bytes")
        api_key, _ = peek_api_key_version(frame)
        if self._state is State.HANDSHAKE:
            if api_key == ApiKey.API_VERSIONS and not self._reauthenticating:
                return await self._handler(frame, client)  # type: ignore[return-value]
            if api_key != ApiKey.SASL_HANDSHAKE:
                raise self._unexpected(client, f"{_api_name(api_key)} request")
            header, request = self._decode(frame, client, HANDSHAKE_VERSIONS)
            return self._handshake(header, request)
        header, request = self._decode(frame, client, None)
        if api_key != ApiKey.SASL_AUTHENTICATE:
            raise _AuthenticationFailed(
                f"Unexpected Kafka request of type {_api_name(api_key)} during SASL authentication",
                self._illegal_state_response(header, request),
            )
        if header.api_version not in AUTHENTICATE_VERSIONS:
            raise self._unexpected(client, f"SaslAuthenticate v{header.api_version}")
        return self._authenticate(header, request, client)

    def _handshake(self, header: RequestHeader, request: SaslHandshakeRequest) -> list[Chunk]:
        mechanisms = list(self._listener.mechanisms)
        mechanism = request.mechanism
        if mechanism not in mechanisms:
            response = SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms)
            raise _AuthenticationFailed(f"Unsupported SASL mechanism {mechanism}", _respond(header, response))
        if self._reauthenticating and mechanism != self._mechanism:
            self._server = _BadMechanism(mechanism, self._mechanism)
        else:
            self._server, self._mechanism = self._listener.new_server(mechanism), mechanism
        self._state = State.AUTHENTICATE if header.api_version >= 1 else State.RAW_TOKENS
        return _respond(header, SaslHandshakeResponse(ErrorCode.NONE, mechanisms))

    def _authenticate(
        self, header: RequestHeader, request: SaslAuthenticateRequest, client: ClientInfo
    ) -> list[Chunk]:
        if header.api_version > 0:
            self._supports_reauthentication = True
        try:
            token = self._evaluate(bytes(request.auth_bytes), client)
        except _AuthenticationFailed as exc:
            response = SaslAuthenticateResponse(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
            raise _AuthenticationFailed(str(exc), _respond(header, response)) from None
        lifetime_ms = self._session_lifetime_ms() if self._state is State.COMPLETE else 0
        return _respond(header, SaslAuthenticateResponse(ErrorCode.NONE, None, token, lifetime_ms or 0))

    def _evaluate(self, token: bytes | bytearray, client: ClientInfo) -> bytes:
        """One token of the exchange; completes the authentication when the mechanism is done."""
        server = self._server
        assert server is not None
        try:
            challenge = server.evaluate(bytes(token))
        except SaslAuthenticationError as exc:
            raise _AuthenticationFailed(str(exc), None) from None
        except SaslError as exc:
            log.debug("SASL %s exchange with %s failed: %s", self._mechanism, client, exc)
            raise _AuthenticationFailed(
                f"Authentication failed during {self._authentication_text()} due to invalid credentials "
                f"with SASL mechanism {self._mechanism}",
                None,
            ) from None
        if server.complete:
            self._complete(server, client)
        return challenge

    def _complete(self, server: SaslServer, client: ClientInfo) -> None:
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self._reauthenticating and principal != client.principal:
            raise _AuthenticationFailed(
                f"Cannot change principals during re-authentication from {client.principal}: {principal}",
                None,
            )
        client.principal = principal
        self._state, self._reauthenticating = State.COMPLETE, False
        lifetime_ms = self._session_lifetime_ms()
        self._session_end = None if lifetime_ms is None else time.monotonic() + lifetime_ms / 1000
        self._deadline.cancel()
        self._connection.limit_request_size(None)
        log.debug("%s authenticated with %s as %s", client, self._mechanism, principal)

    def _session_lifetime_ms(self) -> int | None:
        """Kafka's session lifetime: connections.max.reauth.ms, the credential's remaining life, or the
        smaller of both; None when neither applies."""
        server = self._server
        reauth_ms = self._listener.reauth_ms.get(self._mechanism, 0)
        expiry_ms = None if server is None else server.credential_expiry_ms
        remaining = None if expiry_ms is None else max(0, expiry_ms - int(time.time() * 1000))
        if remaining is None:
            return reauth_ms if reauth_ms > 0 else None
        return min(remaining, reauth_ms) if reauth_ms > 0 else remaining

    def _decode(
        self, frame: bytes | bytearray, client: ClientInfo, versions: range | None
    ) -> tuple[RequestHeader, Any]:
        try:
            header, offset = parse_request_header(frame)
            if versions is not None and header.api_version not in versions:
                raise ProtocolDecodeError(f"unsupported version {header.api_version}")
            return header, decode_request(header.api_key, header.api_version, memoryview(frame)[offset:])
        except ProtocolDecodeError as exc:
            raise self._unexpected(client, f"malformed request ({exc})") from None

    def _illegal_state_response(self, header: RequestHeader, request: Any) -> list[Chunk] | None:
        module = self._handlers.get(header.api_key)
        if module is None or not hasattr(module, "error_response"):
            return None
        if not module.MIN_VERSION <= header.api_version <= module.MAX_VERSION:
            return None
        return _respond(
            header, module.error_response(request, header.api_version, ErrorCode.ILLEGAL_SASL_STATE)
        )

    def _unexpected(self, client: ClientInfo, what: str) -> CloseConnection:
        log.warning(
            "Closing connection from %s: unexpected %s during SASL %s (listener %s)",
            client,
            what,
            "re-authentication" if self._reauthenticating else self._state.value,
            client.listener,
        )
        return CloseConnection(f"unexpected {what} during SASL authentication")

    def _authentication_text(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    def handshake_expired(self) -> None:
        if self._state is State.COMPLETE or self._connection.closed:
            return
        log.info(
            "Closing connection from %s: SASL authentication did not complete within %d ms",
            self._connection.client,
            self._listener.handshake_timeout_ms,
        )
        self._connection.close(None)


def _handshake_expired(gate: weakref.ref[SaslServerAuthenticator]) -> None:
    authenticator = gate()
    if authenticator is not None:
        authenticator.handshake_expired()


class _BadMechanism:
    """A re-authentication that asked for another mechanism: its first token fails it, as in Kafka."""

    credential_expiry_ms = None
    complete = False
    authorization_id = ""

    def __init__(self, requested: str, original: str) -> None:
        self.mechanism = requested
        self._message = (
            f"SASL mechanism '{requested}' requested by client is not supported for re-authentication "
            f"of mechanism '{original}'"
        )

    def evaluate(self, token: bytes) -> bytes:
        raise SaslAuthenticationError(self._message)


def _respond(header: RequestHeader, response: Any) -> list[Chunk]:
    body = encode_response(header.api_key, header.api_version, response)
    version = response_header_version(header.api_key, header.api_version)
    return [encode_response_header(header.correlation_id, version), *body]


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN({api_key})"
