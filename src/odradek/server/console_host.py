"""The broker's `http.listeners`: its Prometheus `/metrics` and the web console, as one aiohttp server.

Owns what the broker's configs make of the console (odradek's own configs; Kafka has no console):
- which Kafka listener it reads the cluster through: an open console (`console.authentication=none`)
  uses the inter-broker listener as the broker itself (its TLS and SASL identity, as its connections
  to other brokers); a console with logins (`console.authentication=sasl`) uses `console.listener.name`
  (default: the inter-broker listener when it is SASL, else the first SASL listener), where each user
  authenticates with `console.sasl.mechanism` and the password typed at the login page;
- `console.read.only` ("": read-only when open, read-write with logins),
  `console.session.timeout.ms` and `console.metrics.sample.ms` (the charts' sampling interval);
- HTTPS: an `https://` entry of `http.listeners` serves TLS with the key store of the listener name
  `HTTPS` (`listener.name.https.ssl.keystore.*`, else the plain `ssl.keystore.*`: the brokers' own
  PEM or PKCS12 stores), and the session cookie is then marked Secure.
A console with logins on a broker with no SASL listener is a ConfigError naming the key.

The console's modules (aiohttp, Jinja2) are imported only when `http.listeners` is set: a broker
without it does not pay for them at start-up.

Callers: server/kafka_server.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from odradek.console.sessions import ConsoleSettings
from odradek.scheduler import Scheduler
from odradek.security.client_config import BlockingClientSecurity
from odradek.security.sasl.client import SaslClientSettings
from odradek.server.config import HTTPS_LISTENER, ConfigError, KafkaConfig
from odradek.server.sasl_listener import SASL_PROTOCOLS, enabled_mechanisms

if TYPE_CHECKING:
    from odradek.console.web import ConsoleServer


def start_console(
    config: KafkaConfig,
    scheduler: Scheduler,
    registry: CollectorRegistry,
    address_of: Callable[[str], tuple[str, int]],
    own_security: BlockingClientSecurity | None,
) -> ConsoleServer:
    """The bound (not yet serving) console server of `config.http_listeners`, with `/metrics`.
    `address_of(listener name)` is where the broker's own Kafka listener can be reached."""
    from aiohttp import web

    from odradek.console.areas import console_server

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    endpoints = config.http_listeners
    https = config.listener_ssl.get(HTTPS_LISTENER)
    tls = https.server_context if https is not None else None
    settings = ConsoleSettings(
        bootstrap=_address(address_of(config.inter_broker_listener_name)),
        security=own_security,
        read_only={"": None, "true": True, "false": False}[config["console.read.only"]],
        session_timeout_s=config["console.session.timeout.ms"] / 1000,
        metrics_sample_ms=config["console.metrics.sample.ms"],
        secure_cookies=tls is not None and all(e.tls for e in endpoints),
    )
    if config["console.authentication"] == "sasl":
        listener = login_listener(config)
        mechanism = config["console.sasl.mechanism"]
        settings = _with_login(settings, config, listener, mechanism, _address(address_of(listener)))
    server = console_server(settings, scheduler, {"/metrics": metrics}, registry)
    server.bind([(e.host, e.port) for e in endpoints if not e.tls])
    if tls is not None:
        server.bind([(e.host, e.port) for e in endpoints if e.tls], tls)
    return server


def _address(host_port: tuple[str, int]) -> str:
    host, port = host_port
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def login_listener(config: KafkaConfig) -> str:
    """The SASL listener users log in through (see the module docstring)."""
    protocols = {listener.name: listener.security_protocol for listener in config.listeners}
    named = config["console.listener.name"]
    if named is not None:
        if protocols.get(named) not in SASL_PROTOCOLS:
            raise ConfigError(
                "console.listener.name", named, "must name a SASL_PLAINTEXT or SASL_SSL listener"
            )
        return str(named)
    preferred = [config.inter_broker_listener_name, *protocols]
    found = next((name for name in preferred if protocols.get(name) in SASL_PROTOCOLS), None)
    if found is None:
        raise ConfigError(
            "console.authentication", "sasl", "logins need a SASL_PLAINTEXT or SASL_SSL listener in listeners"
        )
    return found


def _with_login(
    settings: ConsoleSettings, config: KafkaConfig, listener: str, mechanism: str, bootstrap: str
) -> ConsoleSettings:
    if mechanism not in enabled_mechanisms(config, listener):
        raise ConfigError("console.sasl.mechanism", mechanism, f"is not enabled on listener {listener}")
    listener_tls = config.listener_ssl.get(listener)
    tls_context = listener_tls.client_context if listener_tls is not None else None

    def user_security(username: str, password: str) -> BlockingClientSecurity:
        credentials = {"username": username, "password": password}
        return BlockingClientSecurity(tls_context, SaslClientSettings(mechanism, credentials))

    return replace(settings, login_bootstrap=bootstrap, login=user_security, login_mechanism=mechanism)
