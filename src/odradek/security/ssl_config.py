"""A listener's TLS settings from Kafka's `ssl.*` keys: the SSLContext of its server side (clients
connecting to it) and of its client side (this broker connecting to other brokers' listener of the
same name), and the principal mapping of its client certificates.

Keys (each may be overridden per listener as `listener.name.<listener>.ssl.*`, the listener name in
lower case, key by key, as Kafka's listener-prefixed configs):
- `ssl.keystore.type` PEM, with `ssl.keystore.location` (one PEM file: the private key and the
  certificate chain) or inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`;
  `ssl.key.password` decrypts an encrypted private key. A keystore password is refused with PEM, as
  Kafka refuses it.
- `ssl.truststore.type` PEM, with `ssl.truststore.location` (a PEM file of CA certificates) or inline
  `ssl.truststore.certificates`; without a truststore the system's CAs are trusted (Kafka: the JVM's).
- `ssl.client.auth`: none, requested (a certificate is verified if sent), required.
- `ssl.enabled.protocols` (TLSv1.2,TLSv1.3 by default; a contiguous range of TLSv1..TLSv1.3),
  `ssl.protocol` (accepted; as in Java it names the context, the enabled protocols decide).
- `ssl.cipher.suites`: Kafka's (IANA) names, translated to OpenSSL's (OpenSSL names are accepted too).
- `ssl.endpoint.identification.algorithm`: https (default: the client side checks the broker's
  host name against its certificate) or empty (no check).
- `ssl.principal.mapping.rules` (security/principal.py).

A bad value raises `SslConfigError` naming the key (the config layer turns it into a ConfigError at
start, so a broker never serves a listener half configured).

Deliberate deviations from Kafka: keystores and truststores are PEM only (JKS and PKCS12 are
refused, naming the key). Python's ssl cannot choose TLS 1.3 cipher suites: when ssl.cipher.suites
names any TLS 1.3 suite, TLS 1.3 keeps OpenSSL's set; when it names none, TLS 1.3 is disabled (as it
would be in Java with no 1.3 suite enabled).

Callers: server/config.py (builds a `ListenerSsl` per TLS listener), the broker (server contexts for
the socket server, the client context of the inter-broker listener for network_client).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from odradek.security.principal import SslPrincipalMapper

TLS_SECURITY_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})

# The ssl.* keys this module applies (others of the family are refused unless at Kafka's default).
SSL_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "ssl.endpoint.identification.algorithm",
        "ssl.principal.mapping.rules",
    }
)

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CONTEXT_PROTOCOLS = frozenset({"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"})
_TLS13_SUITE_PREFIXES = ("TLS_AES_", "TLS_CHACHA20_")


class SslConfigError(ValueError):
    """A TLS setting that cannot be applied; `key` names it (with its listener prefix if it had one)."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.value = value


@dataclass(frozen=True, slots=True)
class ListenerSsl:
    """The TLS side of one listener."""

    listener: str
    server_context: ssl.SSLContext
    client_context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper


class _Settings:
    """The ssl.* values of one listener: the listener-prefixed key over the plain one."""

    def __init__(self, originals: Mapping[str, str], listener: str) -> None:
        self._originals = originals
        self._prefix = f"listener.name.{listener.lower()}."

    def key(self, name: str) -> str:
        """The key that supplies `name` (for error messages)."""
        prefixed = self._prefix + name
        return prefixed if prefixed in self._originals else name

    def get(self, name: str, default: str = "") -> str:
        value = self._originals.get(self._prefix + name, self._originals.get(name))
        return default if value is None else value.strip()

    def error(self, name: str, reason: str) -> SslConfigError:
        return SslConfigError(self.key(name), self.get(name), reason)


def listener_ssl(originals: Mapping[str, str], listener: str) -> ListenerSsl:
    """The TLS contexts and principal mapping of `listener` from the broker's raw configs."""
    settings = _Settings(originals, listener)
    try:
        mapper = SslPrincipalMapper(settings.get("ssl.principal.mapping.rules", "DEFAULT"))
    except ValueError as exc:
        raise settings.error("ssl.principal.mapping.rules", str(exc)) from None
    server = _context(settings, ssl.PROTOCOL_TLS_SERVER)
    client_auth = settings.get("ssl.client.auth", "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise settings.error("ssl.client.auth", "must be one of none, requested, required")
    server.verify_mode = _CLIENT_AUTH[client_auth]
    return ListenerSsl(listener, server, _client_context(settings), mapper)


def client_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of a Kafka client from its `ssl.*` settings (odradek's own client: the tools,
    the Spark source and sink; security/client_config.py)."""
    return _client_context(_Settings(settings, listener=""))


def _client_context(settings: _Settings) -> ssl.SSLContext:
    client = _context(settings, ssl.PROTOCOL_TLS_CLIENT)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", ""):
        raise settings.error("ssl.endpoint.identification.algorithm", "must be https or empty")
    client.check_hostname = algorithm == "https"
    return client


def _context(settings: _Settings, purpose: int) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    _set_protocols(context, settings)
    _set_cipher_suites(context, settings)
    _load_keystore(context, settings)
    _load_truststore(context, settings)
    return context


def _set_protocols(context: ssl.SSLContext, settings: _Settings) -> None:
    protocol = settings.get("ssl.protocol", "TLSv1.3")
    if protocol not in _CONTEXT_PROTOCOLS:
        raise settings.error("ssl.protocol", f"must be one of {', '.join(sorted(_CONTEXT_PROTOCOLS))}")
    names = _list(settings.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
    unknown = [name for name in names if name not in _PROTOCOLS]
    if unknown or not names:
        raise settings.error(
            "ssl.enabled.protocols", f"unknown protocols {unknown}; use {', '.join(_PROTOCOLS)}"
        )
    versions = sorted(_PROTOCOLS[name] for name in names)
    ordered = list(_PROTOCOLS.values())
    if ordered.index(versions[-1]) - ordered.index(versions[0]) + 1 != len(set(versions)):
        raise settings.error("ssl.enabled.protocols", "the protocols must be a contiguous range")
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _set_cipher_suites(context: ssl.SSLContext, settings: _Settings) -> None:
    suites = _list(settings.get("ssl.cipher.suites"))
    if not suites:
        return
    tls12 = []
    for suite in suites:
        if suite.startswith(_TLS13_SUITE_PREFIXES):
            continue
        tls12.append(openssl_cipher_name(suite))
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(tls12[-1])
        except ssl.SSLError:
            raise settings.error(
                "ssl.cipher.suites", f"unknown or unavailable cipher suite {suite}"
            ) from None
    if tls12:
        context.set_ciphers(":".join(tls12))
    elif context.maximum_version != ssl.TLSVersion.TLSv1_3:
        raise settings.error("ssl.cipher.suites", "only TLS 1.3 suites are named, but TLSv1.3 is not enabled")
    else:
        context.minimum_version = ssl.TLSVersion.TLSv1_3
    if len(tls12) == len(suites):
        if context.minimum_version == ssl.TLSVersion.TLSv1_3:
            raise settings.error(
                "ssl.cipher.suites", "no TLS 1.3 suite is named, but only TLSv1.3 is enabled"
            )
        context.maximum_version = min(context.maximum_version, ssl.TLSVersion.TLSv1_2)


def openssl_cipher_name(suite: str) -> str:
    """Kafka's (IANA) name of a TLS 1.2 suite as OpenSSL writes it: TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    is ECDHE-RSA-AES256-GCM-SHA384. A name that is not IANA's is returned as it is."""
    if not suite.startswith("TLS_") or "_WITH_" not in suite:
        return suite
    exchange, _, rest = suite.removeprefix("TLS_").partition("_WITH_")
    parts = rest.split("_")
    if parts[0] == "AES" and len(parts) >= 4:
        bulk = f"AES{parts[1]}" + ("" if parts[2] == "CBC" else f"-{parts[2]}")
        mac = parts[3]
    elif parts[:2] == ["CHACHA20", "POLY1305"]:
        bulk, mac = "CHACHA20-POLY1305", ""
    else:
        bulk, mac = "-".join(parts[:-1]), parts[-1]
    words = [] if exchange == "RSA" else [exchange.replace("_", "-")]
    return "-".join([*words, bulk, *([mac] if mac else [])])


def _load_keystore(context: ssl.SSLContext, settings: _Settings) -> None:
    location = settings.get("ssl.keystore.location")
    key, chain = settings.get("ssl.keystore.key"), settings.get("ssl.keystore.certificate.chain")
    if not (location or key or chain):
        return
    _require_pem(settings, "ssl.keystore.type")
    if settings.get("ssl.keystore.password"):
        raise settings.error(
            "ssl.keystore.password",
            "SSL key store password cannot be specified with PEM format, only key password may be specified",
        )
    password = settings.get("ssl.key.password") or None
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif not (key and chain):
            raise settings.error(
                "ssl.keystore.key", "ssl.keystore.key and ssl.keystore.certificate.chain go together"
            )
        else:
            with _private_file(chain + "\n" + key) as path:
                context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as exc:
        name = "ssl.keystore.location" if location else "ssl.keystore.key"
        raise settings.error(
            name, f"cannot load the key store (or ssl.key.password is wrong): {exc}"
        ) from None


def _load_truststore(context: ssl.SSLContext, settings: _Settings) -> None:
    location, inline = settings.get("ssl.truststore.location"), settings.get("ssl.truststore.certificates")
    if not (location or inline):
        context.load_default_certs(
            ssl.Purpose.CLIENT_AUTH
            if context.protocol == ssl.PROTOCOL_TLS_SERVER
            else ssl.Purpose.SERVER_AUTH
        )
        return
    _require_pem(settings, "ssl.truststore.type")
    if settings.get("ssl.truststore.password"):
        raise settings.error(
            "ssl.truststore.password", "Password for truststore is not supported for PEM format"
        )
    try:
        if location:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=inline)
    except (OSError, ssl.SSLError) as exc:
        name = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise settings.error(name, f"cannot load the trust store: {exc}") from None


def _require_pem(settings: _Settings, name: str) -> None:
    if settings.get(name, "JKS").upper() != "PEM":
        raise settings.error(name, "odradek reads PEM key and trust stores only: set it to PEM")


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read holding `text`, removed on exit (Python's ssl loads a key and
    certificate chain from a file only)."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        yield path
    finally:
        os.unlink(path)


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
