"""A SASL listener's settings, and the broker's own SASL credentials, from the broker config.

Kafka's keys, most specific first (Kafka's listener- and mechanism-prefixed configs):
- `listener.name.<l>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms` (Kafka's default
  GSSAPI, which odradek does not provide: a SASL listener must name PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and/or OAUTHBEARER);
- `listener.name.<l>.<mechanism>.sasl.jaas.config` (mechanism in lower case), required for every
  enabled mechanism as Kafka requires a JAAS entry for each: PlainLoginModule (its
  `user_<name>="<password>"` options are the PLAIN users), ScramLoginModule, OAuthBearerLoginModule
  (its `unsecuredValidator*` options tune the token validation). Kafka's JAAS file
  (java.security.auth.login.config) is not read;
- `listener.name.<l>.<mechanism>.connections.max.reauth.ms`, else `connections.max.reauth.ms`;
- broker-wide: `connection.failed.authentication.delay.ms`, `sasl.server.max.receive.size`, and
  `connections.max.idle.ms`, which also bounds how long a connection may take to authenticate
  (counted from its accept, whatever it sends meanwhile; 10 minutes when negative: an odradek
  bound, Kafka has none).

The broker's own connections (client side): when the inter-broker listener is a SASL one, they
authenticate with `sasl.mechanism.inter.broker.protocol` and the `username` / `password` options
(`unsecuredLoginStringClaim_sub` for OAUTHBEARER) of that listener's JAAS config for that
mechanism, as Kafka's brokers do.

Invalid settings are a `ConfigError` at start, naming the key.

Callers: the broker (server/kafka_server.py) at start; authenticator.py and client.py use the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.network_client import Authenticate
from odradek.security.sasl.client import SaslClientSettings, sasl_authenticate
from odradek.security.sasl.jaas import JaasConfigError, JaasEntry, parse_jaas_config
from odradek.security.sasl.mechanisms import (
    OAUTHBEARER,
    PLAIN,
    SUPPORTED_MECHANISMS,
    OAuthBearerServer,
    PlainServer,
    SaslServer,
    ScramCredentials,
    ScramServer,
)
from odradek.security.sasl.scram import ScramMechanism
from odradek.server.config import ConfigError, KafkaConfig

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MODULES = {
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    OAUTHBEARER: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_PLAIN_USER_PREFIX = "user_"
DEFAULT_HANDSHAKE_TIMEOUT_MS = 600_000  # connections.max.idle.ms's default, when that is negative


@dataclass(frozen=True)
class SaslListener:
    """One SASL listener: its mechanisms with their JAAS entries, and the connection bounds."""

    name: str
    mechanisms: tuple[str, ...]
    jaas: dict[str, JaasEntry]
    reauth_ms: dict[str, int]
    failed_authentication_delay_ms: int
    max_receive_size: int
    handshake_timeout_ms: int
    scram_credentials: ScramCredentials = field(repr=False)

    def new_server(self, mechanism: str) -> SaslServer:
        """A server exchange for `mechanism` (one of `mechanisms`)."""
        options = self.jaas[mechanism].options
        if mechanism == PLAIN:
            users = {
                k.removeprefix(_PLAIN_USER_PREFIX): v
                for k, v in options.items()
                if k.startswith(_PLAIN_USER_PREFIX)
            }
            return PlainServer(users)
        if mechanism == OAUTHBEARER:
            return OAuthBearerServer(options)
        scram = ScramMechanism.named(mechanism)
        assert scram is not None
        return ScramServer(scram, self.scram_credentials)


def listener_key(config: KafkaConfig, listener: str, key: str, mechanism: str | None = None) -> str | None:
    """The raw value of `key` for `listener` (and `mechanism`), most specific first; None: unset."""
    prefix = f"listener.name.{listener.lower()}."
    candidates = [f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []
    candidates.append(f"{prefix}{key}")
    for name in candidates:
        if name in config.originals:
            return config.originals[name].strip()
    return None


def sasl_listeners(
    config: KafkaConfig, scram_credentials: ScramCredentials | None = None
) -> dict[str, SaslListener]:
    """The SASL listeners of `config` by name (ConfigError on invalid SASL settings)."""
    return {
        listener.name: _sasl_listener(config, listener.name, scram_credentials)
        for listener in config.listeners
        if listener.security_protocol in SASL_PROTOCOLS
    }


def _sasl_listener(
    config: KafkaConfig, name: str, scram_credentials: ScramCredentials | None
) -> SaslListener:
    mechanisms = enabled_mechanisms(config, name)
    reauth = {m: _reauth_ms(config, name, m) for m in mechanisms}
    idle_ms = int(config["connections.max.idle.ms"])
    return SaslListener(
        name,
        mechanisms,
        {m: jaas_entry(config, name, m) for m in mechanisms},
        reauth,
        int(config["connection.failed.authentication.delay.ms"]),
        int(config["sasl.server.max.receive.size"]),
        idle_ms if idle_ms > 0 else DEFAULT_HANDSHAKE_TIMEOUT_MS,
        scram_credentials or _no_scram_credentials,
    )


def _no_scram_credentials(mechanism: ScramMechanism, user: str) -> None:
    return None


def enabled_mechanisms(config: KafkaConfig, listener: str) -> tuple[str, ...]:
    raw = listener_key(config, listener, "sasl.enabled.mechanisms")
    key = (
        f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
        if raw is not None
        else "sasl.enabled.mechanisms"
    )
    names = (
        [m.strip() for m in raw.split(",") if m.strip()]
        if raw is not None
        else list(config["sasl.enabled.mechanisms"])
    )
    if not names:
        raise ConfigError(
            key, raw or "", f"listener {listener} is a SASL listener: it needs at least one mechanism"
        )
    for mechanism in names:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                key,
                ",".join(names),
                f"SASL mechanism {mechanism} is not provided (only {', '.join(SUPPORTED_MECHANISMS)})",
            )
    return tuple(dict.fromkeys(names))


def jaas_entry(config: KafkaConfig, listener: str, mechanism: str) -> JaasEntry:
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    raw = config.originals.get(key)
    if raw is None:
        raise ConfigError(key, None, f"SASL mechanism {mechanism} on listener {listener} needs a JAAS config")
    try:
        entry = parse_jaas_config(raw)
    except JaasConfigError as exc:
        raise ConfigError(key, "[hidden]", str(exc)) from None
    if entry.login_module != LOGIN_MODULES[mechanism]:
        raise ConfigError(key, "[hidden]", f"{mechanism} needs login module {LOGIN_MODULES[mechanism]}")
    return entry


def _reauth_ms(config: KafkaConfig, listener: str, mechanism: str) -> int:
    raw = listener_key(config, listener, "connections.max.reauth.ms", mechanism)
    if raw is None:
        return int(config["connections.max.reauth.ms"])
    if not raw.lstrip("-").isdigit() or int(raw) < 0:
        raise ConfigError(
            f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms",
            raw,
            "must be a number >= 0",
        )
    return int(raw)


def inter_broker_client(config: KafkaConfig) -> SaslClientSettings | None:
    """The broker's own SASL credentials, or None when the inter-broker listener is not SASL."""
    name = config.inter_broker_listener_name
    protocol = next((lis.security_protocol for lis in config.listeners if lis.name == name), None)
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    if mechanism not in enabled_mechanisms(config, name):
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            mechanism,
            f"must be one of the mechanisms enabled on listener {name}",
        )
    options = jaas_entry(config, name, mechanism).options
    wanted = ("unsecuredLoginStringClaim_sub",) if mechanism == OAUTHBEARER else ("username", "password")
    for option in wanted:
        if not options.get(option):
            raise ConfigError(
                f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
                "[hidden]",
                f"the broker's own {mechanism} credentials need the {option} option",
            )
    return SaslClientSettings(mechanism, dict(options))


def inter_broker_authenticate(config: KafkaConfig) -> Authenticate | None:
    """The authentication step of the broker's own connections; None when the inter-broker listener
    is not a SASL one (ConfigError when its SASL settings are incomplete)."""
    settings = inter_broker_client(config)
    return None if settings is None else sasl_authenticate(settings)
