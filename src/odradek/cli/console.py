"""`odradek console --bootstrap-server HOST:PORT [--command-config FILE] [--listen http://HOST:PORT]`:
the web console of any cluster (odradek/console), for brokers started without `http.listeners`, until
SIGTERM / SIGINT. `--command-config` secures its connections as the tools' (cli/common.py).

Serves the same pages a broker serves at `/` of its `http.listeners`, reading the cluster over the
Kafka protocol from the bootstrap servers (replica sizes excepted: only a broker knows its own). A
malformed option is a usage error (exit 2); a --listen address that cannot be bound exits 1 with one
line; the cluster being unreachable is shown on the pages (502), not fatal.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from odradek.cli.common import ToolError, command_config_security
from odradek.client import ConnectionSecurity, bootstrap_option
from odradek.clock import SYSTEM_CLOCK
from odradek.console.areas import console_server
from odradek.console.sessions import ConsoleSettings
from odradek.scheduler import Scheduler
from odradek.server.config import ConfigError, HttpEndpoint, parse_http_listeners

COMMAND = "console"
HELP = "serve the web console of a cluster"
DEFAULT_LISTEN = "http://127.0.0.1:9645"


def listen_option(value: str) -> list[HttpEndpoint]:
    """argparse `type=` for --listen: `http://host:port[,...]`, as http.listeners."""
    try:
        endpoints = parse_http_listeners(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not endpoints:
        raise argparse.ArgumentTypeError("give at least one http://host:port")
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
        metavar="http://HOST:PORT",
        help=f"where to serve the console (default {DEFAULT_LISTEN})",
    )


def run(args: argparse.Namespace) -> int:
    try:
        security = command_config_security(args.command_config)
    except ToolError as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_serve(args.bootstrap_server, args.listen, security))
    except OSError as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(bootstrap: str, endpoints: list[HttpEndpoint], security: ConnectionSecurity | None) -> None:
    scheduler = Scheduler(SYSTEM_CLOCK)
    http = console_server(ConsoleSettings(bootstrap, security), scheduler)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        http.bind([(e.host, e.port) for e in endpoints])
        await http.serve()
        print(f"odradek console of {bootstrap} on {', '.join(http.urls)}", flush=True)
        await stop.wait()
    finally:
        await http.close()
        await scheduler.close()
