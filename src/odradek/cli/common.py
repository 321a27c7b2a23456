"""What the Kafka-style tools (`odradek topics`, `configs`, `consumer-groups`, ...) share.

Owns: the `--bootstrap-server`, `--command-config` and `--connect-timeout` options; reaching the
cluster (secured as the `--command-config` properties file says: `security.protocol` with its
`ssl.*` and `sasl.*` keys, as Kafka's tools take an admin client's config), with one stderr
line per retry (`odradek TOOL: cannot reach ...`); and `guarded`, which runs a tool's body and turns
a failure into one line on stderr and exit status 1, never a traceback: a `ToolError` or the group
admin's `GroupAdminError` (its message),
a `KafkaError` from the cluster (the broker's message, else the error's name, after the tool's own
prefix as Kafka's script prints it) or a connection that could not be made or broke. Also the
helpers several tools need to read Kafka's argument syntax (`k=v` lists, regex topic filters).

Not a command itself (no `COMMAND`); odradek.cli.groups keeps its own option layout.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from odradek.cli.main import seconds_option
from odradek.client import KafkaClient, bootstrap_option
from odradek.client.group_admin import GroupAdminError
from odradek.protocol.errors import KafkaError
from odradek.security.client_config import BlockingClientSecurity, client_security
from odradek.server.config import parse_properties

FAILED = 1
DEFAULT_CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0


class ToolError(Exception):
    """A failure a tool reports in one line (the message) and exit status 1."""


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_option,
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the brokers to connect to",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="a properties file of client settings: security.protocol, ssl.*, sasl.* (as Kafka's tools)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=seconds_option,
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"keep trying to reach a bootstrap server this long (default {DEFAULT_CONNECT_TIMEOUT_S:g})",
    )


def connect(
    args: argparse.Namespace,
    tool: str,
    *,
    timeout_s: float = REQUEST_TIMEOUT_S,
    client_id: str | None = None,
    security: BlockingClientSecurity | None = None,
) -> KafkaClient:
    """A client that reached one of --bootstrap-server (BrokerUnreachable, an OSError, if none
    answers), named `client_id` (default `odradek-TOOL`), secured as `security` says (a tool's own
    properties file), else as --command-config says."""
    return KafkaClient.connect(
        args.bootstrap_server,
        retry_for_s=args.connect_timeout,
        on_retry=lambda line: print(f"odradek {tool}: {line}", file=sys.stderr, flush=True),
        client_id=client_id or f"odradek-{tool}",
        timeout_s=timeout_s,
        security=security or command_config_security(getattr(args, "command_config", None)),
    )


def command_config_security(path: Path | None) -> BlockingClientSecurity | None:
    """The security the `--command-config` file asks for (None: none given, or PLAINTEXT); a file
    that cannot be read or a setting that cannot be honoured is a ToolError naming it."""
    if path is None:
        return None
    try:
        settings = parse_properties(path.read_text())
    except OSError as exc:
        raise ToolError(f"Error: cannot read --command-config {path}: {exc.strerror}") from None
    try:
        return client_security(settings)
    except ValueError as exc:
        raise ToolError(f"Error: --command-config {path}: {exc}") from None


def guarded(tool: str, body: Callable[[], int], *, error_prefix: str = "Error: ") -> int:
    """`body()`'s exit status, or FAILED after one stderr line when it fails."""
    try:
        return body()
    except BrokenPipeError:  # the reader went away (`| head`): cli/main.py ends the tool quietly
        raise
    except (ToolError, GroupAdminError) as exc:
        print(str(exc), file=sys.stderr)
    except KafkaError as exc:
        print(f"{error_prefix}{exc.message or exc.code.name}", file=sys.stderr)
    except OSError as exc:  # BrokerUnreachable, ConnectFailed, a connection broken mid-way
        print(f"odradek {tool}: {exc}", file=sys.stderr)
    return FAILED


def key_values(text: str, option: str) -> dict[str, str]:
    """Kafka's `k=v,k2=v2` (values may hold '=' ; `[a,b]` keeps its commas) as a dict."""
    pairs: dict[str, str] = {}
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{option} expects k=v pairs, got {item!r}")
        pairs[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
    return pairs


def topic_filter(pattern: str | None) -> Callable[[str], bool]:
    """Kafka's include-list match of --topic: a regex matching whole names (',' means '|')."""
    if pattern is None:
        return lambda _name: True
    cleaned = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        compiled = re.compile(cleaned)
    except re.error as exc:
        raise ToolError(f"Error: --topic {pattern!r} is not a valid regular expression ({exc})") from None
    return lambda name: compiled.fullmatch(name) is not None


def joined(values: Iterable[object]) -> str:
    return ",".join(str(v) for v in values)
