"""The broker's own connections authenticating to another broker (Kafka's SaslClientAuthenticator).

`sasl_authenticate(settings)` is a `network_client.Authenticate` step: SaslHandshake v1 with
`sasl.mechanism.inter.broker.protocol`, then SaslAuthenticate v2 until the mechanism is done, with
the credentials of the inter-broker listener's JAAS config (server/sasl_listener.py). The session lifetime the
server grants is handed to the connection, which is replaced by a new one before it ends
(network_client.py). A refusal is a `SaslClientError` with the server's error and message.

Callers: the broker (server/kafka_server.py) gives it to every connection it opens to another
broker: controller channel, replica fetchers, to-controller channel, transaction markers and
verification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from odradek.network_client import Authenticate, NodeConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest
from odradek.security.sasl.mechanisms import (
    OAUTHBEARER,
    PLAIN,
    SaslError,
    ScramClient,
    oauthbearer_client_token,
    plain_client_token,
    unsecured_token,
)
from odradek.security.sasl.scram import ScramMechanism

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
MAX_ROUNDS = 8


@dataclass(frozen=True)
class SaslClientSettings:
    """A client's SASL mechanism and its login options (username and password, or OAUTHBEARER's
    unsecured login options): the broker's own on a SASL inter-broker listener, or a tool's."""

    mechanism: str
    options: dict[str, str]


class SaslClientError(ConnectionError):
    """The other broker refused this broker's authentication."""


class _Client(Protocol):
    def first(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


class _OneToken:
    """PLAIN and OAUTHBEARER: one token; any challenge back is the server's refusal."""

    def __init__(self, mechanism: str, token: bytes) -> None:
        self._mechanism, self._token = mechanism, token

    def first(self) -> bytes:
        return self._token

    def evaluate(self, challenge: bytes) -> bytes | None:
        if challenge:
            raise SaslError(f"{self._mechanism} refused: {challenge.decode(errors='replace')}")
        return None


def new_client(settings: SaslClientSettings) -> _Client:
    options = settings.options
    if settings.mechanism == PLAIN:
        return _OneToken(PLAIN, plain_client_token(options["username"], options["password"]))
    if settings.mechanism == OAUTHBEARER:
        return _OneToken(OAUTHBEARER, oauthbearer_client_token(unsecured_token(options)))
    mechanism = ScramMechanism.named(settings.mechanism)
    assert mechanism is not None
    return ScramClient(mechanism, options["username"], options["password"])


def sasl_authenticate(settings: SaslClientSettings) -> Authenticate:
    async def authenticate(connection: NodeConnection) -> None:
        handshake = await connection.send(
            ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, SaslHandshakeRequest(settings.mechanism)
        )
        if handshake.error_code != ErrorCode.NONE:
            raise SaslClientError(
                f"SaslHandshake for {settings.mechanism} failed with {ErrorCode(handshake.error_code).name} "
                f"(the broker enables {', '.join(handshake.mechanisms)})"
            )
        client = new_client(settings)
        token: bytes | None = client.first()
        for _ in range(MAX_ROUNDS):
            response = await connection.send(
                ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, SaslAuthenticateRequest(token or b"")
            )
            if response.error_code != ErrorCode.NONE:
                raise SaslClientError(
                    f"{settings.mechanism} authentication failed: {ErrorCode(response.error_code).name} "
                    f"{response.error_message or ''}".rstrip()
                )
            try:
                token = client.evaluate(bytes(response.auth_bytes))
            except SaslError as exc:
                raise SaslClientError(str(exc)) from None
            if token is None:
                connection.session_lifetime(response.session_lifetime_ms)
                return
        raise SaslClientError(f"{settings.mechanism} did not complete within {MAX_ROUNDS} rounds")

    return authenticate
