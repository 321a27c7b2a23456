"""`odradek console --bootstrap-server HOST:PORT [--command-config FILE] [--listen http(s)://HOST:PORT]
[--login] [--read-only | --read-write] [--session-timeout-ms MS] [--https-config FILE]`: the web
console of any cluster (odradek/console; Kafka's too), until SIGTERM / SIGINT.

Serves the pages a broker serves at `/` of its `http.listeners` (but the charts of the broker's own
metrics), reading the cluster over the Kafka protocol from the bootstrap servers. `--command-config`
secures the console's connections as the tools' (cli/common.py). With `--login` each user logs in with
a user name and password that the cluster checks: the file's SASL settings (SASL_PLAINTEXT or
SASL_SSL, sasl.mechanism PLAIN or SCRAM-*) with the user's credentials, so the cluster's ACLs decide
what each user sees and does; its own sasl.jaas.config, if any, serves the console's background
reads (the lag history). Open (no --login) it is read-only unless --read-write; with --login,
read-write unless --read-only. An `https://` --listen address serves TLS with the key store of the
`--https-config` properties file (`ssl.keystore.location` and `ssl.keystore.type` PEM or PKCS12,
`ssl.key.password`, ...: a broker's ssl.* keys).

A malformed option is a usage error (exit 2); a bad --command-config or --https-config, or a --listen
address that cannot be bound, exits 1 with one line; the cluster being unreachable is shown on the
pages (502), not fatal.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys
from pathlib import Path

from odradek.cli.common import ToolError
from odradek.client import bootstrap_option
from odradek.clock import SYSTEM_CLOCK
from odradek.console.areas import console_server
from odradek.console.sessions import ConsoleSettings
from odradek.scheduler import Scheduler
from odradek.security.client_config import client_security, login_security
from odradek.security.ssl_config import SslConfigError, listener_ssl
from odradek.server.config import ConfigError, HttpEndpoint, parse_http_listeners, parse_properties

COMMAND = "console"
HELP = "serve the web console of a cluster"
DEFAULT_LISTEN = "http://127.0.0.1:9645"


def listen_option(value: str) -> list[HttpEndpoint]:
    """argparse `type=` for --listen: `http(s)://host:port[,...]`, as http.listeners."""
    try:
        endpoints = parse_http_listeners(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not endpoints:
        raise argparse.ArgumentTypeError("give at least one http(s)://host:port")
    return endpoints


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", type=bootstrap_option, required=True, metavar="HOST:PORT[,HOST:PORT...]"
    )
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="security.protocol, ssl.*, sasl.*"
    )
    parser.add_argument(
        "--listen",
        type=listen_option,
        default=listen_option(DEFAULT_LISTEN),
        metavar="http(s)://HOST:PORT",
        help=f"where to serve the console (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--login", action="store_true", help="users log in with the cluster's SASL credentials"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--read-only", dest="read_only", action="store_const", const=True, help="no changes")
    mode.add_argument(
        "--read-write", dest="read_only", action="store_const", const=False, help="changes allowed"
    )
    parser.add_argument("--session-timeout-ms", type=int, default=1_800_000, metavar="MS", help="idle logout")
    parser.add_argument("--https-config", type=Path, metavar="FILE", help="ssl.* of the https:// listeners")


def run(args: argparse.Namespace) -> int:
    try:
        settings, tls = _settings(args)
    except ToolError as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_serve(settings, args.listen, tls))
    except OSError as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    return 0


def _settings(args: argparse.Namespace) -> tuple[ConsoleSettings, ssl.SSLContext | None]:
    """The console's settings and the TLS context of its https:// listeners, from the options."""
    properties = _properties(args.command_config, "--command-config")
    login = None
    try:
        own = client_security(properties) if "sasl.jaas.config" in properties or not args.login else None
        if args.login:
            login = login_security(properties)
    except ValueError as exc:
        raise ToolError(f"--command-config {args.command_config}: {exc}") from None
    tls = None
    if any(e.tls for e in args.listen):
        if args.https_config is None:
            raise ToolError("an https:// --listen address needs --https-config (ssl.keystore.location, ...)")
        try:
            tls = listener_ssl(_properties(args.https_config, "--https-config"), "HTTPS").server_context
        except SslConfigError as exc:
            raise ToolError(f"--https-config {args.https_config}: {exc.key}: {exc}") from None
    settings = ConsoleSettings(
        args.bootstrap_server,
        own,
        login=login,
        login_mechanism=properties.get("sasl.mechanism", "") if login else "",
        read_only=args.read_only,
        session_timeout_s=args.session_timeout_ms / 1000,
        secure_cookies=all(e.tls for e in args.listen),
    )
    return settings, tls


def _properties(path: Path | None, option: str) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {option} {path}: {exc.strerror}") from None


async def _serve(
    settings: ConsoleSettings, endpoints: list[HttpEndpoint], tls: ssl.SSLContext | None
) -> None:
    scheduler = Scheduler(SYSTEM_CLOCK)
    http = console_server(settings, scheduler)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        http.bind([(e.host, e.port) for e in endpoints if not e.tls])
        http.bind([(e.host, e.port) for e in endpoints if e.tls], tls)
        await http.serve()
        print(f"odradek console of {settings.bootstrap} on {', '.join(http.urls)}", flush=True)
        await stop.wait()
    finally:
        await http.close()
        await scheduler.close()
