"""The security of odradek's own client (the tools, the Spark source and sink, the pipeline) from a
Kafka client's settings: `security.protocol` with its `ssl.*` and `sasl.*` keys, as a Java client
takes them from `--command-config FILE` or Spark's `kafka.*` options.

Owns `client_security(settings) -> BlockingClientSecurity | None` (None: PLAINTEXT) and
`BlockingClientSecurity`, the blocking client's `ConnectionSecurity` (client/connection.py; the
broker's own asyncio connections have network_client.ClientSecurity): `wrap` makes the TLS handshake of SSL
and SASL_SSL (the truststore checks the broker's certificate, the keystore answers a broker that
asks for a client certificate, `ssl.endpoint.identification.algorithm=https` checks the host name),
and `authenticate` runs SaslHandshake and SaslAuthenticate for SASL_PLAINTEXT and SASL_SSL with
`sasl.mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and the credentials of
`sasl.jaas.config` (username and password; for OAUTHBEARER Kafka's unsecured login options,
`unsecuredLoginStringClaim_sub`, ...).

The ssl.* keys are those of a broker listener (security/ssl_config.py: PEM stores only). A setting
this client cannot honour (GSSAPI, a JKS store, an unknown security protocol) is a `ValueError`
naming the key, never silently ignored.

Callers: the tools (cli/common.py), the Spark source and sink (spark/options.py).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.client.connection import AuthenticationFailed, BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest
from odradek.security.sasl.client import MAX_ROUNDS, SaslClientSettings, new_client
from odradek.security.sasl.jaas import JaasConfigError, parse_jaas_config
from odradek.security.sasl.mechanisms import SUPPORTED_MECHANISMS, SaslError
from odradek.security.ssl_config import SSL_KEYS, SslConfigError, client_context

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The keys `client_security` reads (a Kafka client's security settings this client honours).
CLIENT_SECURITY_KEYS = frozenset({"security.protocol", "sasl.mechanism", "sasl.jaas.config"}) | SSL_KEYS


@dataclass(frozen=True)
class BlockingClientSecurity:
    """TLS (an SSLContext) and/or SASL (a mechanism with its credentials) for every connection."""

    ssl_context: ssl.SSLContext | None
    sasl: SaslClientSettings | None

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        server_hostname = host if self.ssl_context.check_hostname else None
        return self.ssl_context.wrap_socket(sock, server_hostname=server_hostname)

    def authenticate(self, connection: BrokerConnection) -> None:
        if self.sasl is None:
            return
        mechanism = self.sasl.mechanism
        handshake = connection.request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism))
        if handshake.error_code != ErrorCode.NONE:
            enabled = ", ".join(handshake.mechanisms) or "none"
            raise AuthenticationFailed(f"the broker does not enable {mechanism} (it enables {enabled})")
        client = new_client(self.sasl)
        token: bytes | None = client.first()
        for _ in range(MAX_ROUNDS):
            response = connection.request(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(token or b""))
            if response.error_code != ErrorCode.NONE:
                raise AuthenticationFailed(response.error_message or ErrorCode(response.error_code).name)
            try:
                token = client.evaluate(bytes(response.auth_bytes))
            except SaslError as exc:
                raise AuthenticationFailed(str(exc)) from None
            if token is None:
                return
        raise AuthenticationFailed(f"{mechanism} did not complete within {MAX_ROUNDS} rounds")


def client_security(settings: Mapping[str, str]) -> BlockingClientSecurity | None:
    """The security `settings` ask for (Kafka client keys); None for PLAINTEXT."""
    protocol = settings.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(
            f"Invalid value {protocol!r} for configuration security.protocol: "
            f"must be one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    if protocol == "PLAINTEXT":
        return None
    try:
        context = client_context(settings) if protocol.endswith("SSL") else None
    except SslConfigError as exc:
        raise ValueError(f"Invalid value {exc.value!r} for configuration {exc.key}: {exc}") from None
    sasl = _sasl_settings(settings) if protocol.startswith("SASL_") else None
    return BlockingClientSecurity(context, sasl)


def login_security(settings: Mapping[str, str]) -> Callable[[str, str], BlockingClientSecurity]:
    """For a console that logs its users in: each user's security from `settings` (Kafka client
    keys: a SASL_PLAINTEXT or SASL_SSL protocol, `sasl.mechanism` PLAIN or SCRAM-SHA-256/512, ssl.*)
    with that user's name and password in place of `sasl.jaas.config`'s."""
    protocol = settings.get("security.protocol", "PLAINTEXT").strip().upper()
    mechanism = settings.get("sasl.mechanism", "GSSAPI").strip().upper()
    if not protocol.startswith("SASL_") or mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(
            "logins need security.protocol SASL_PLAINTEXT or SASL_SSL and sasl.mechanism PLAIN, "
            "SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    base = client_security({**settings, "security.protocol": protocol.removeprefix("SASL_")})
    context = base.ssl_context if base is not None else None

    def user(username: str, password: str) -> BlockingClientSecurity:
        return BlockingClientSecurity(
            context, SaslClientSettings(mechanism, {"username": username, "password": password})
        )

    return user


def _sasl_settings(settings: Mapping[str, str]) -> SaslClientSettings:
    mechanism = settings.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ValueError(
            f"Invalid value {mechanism!r} for configuration sasl.mechanism: "
            f"odradek's client speaks {', '.join(SUPPORTED_MECHANISMS)}"
        )
    text = settings.get("sasl.jaas.config")
    if not text:
        raise ValueError(f"sasl.jaas.config is required for sasl.mechanism {mechanism}")
    try:
        options = parse_jaas_config(text).options
    except JaasConfigError as exc:
        raise ValueError(f"Invalid value for configuration sasl.jaas.config: {exc}") from None
    needed = () if mechanism == "OAUTHBEARER" else ("username", "password")
    missing = [name for name in needed if name not in options]
    if missing:
        raise ValueError(f"sasl.jaas.config for {mechanism} lacks {' and '.join(missing)}")
    return SaslClientSettings(mechanism, dict(options))
