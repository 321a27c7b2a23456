"""Bootstrap servers: parsing `host:port[,host:port...]`, and reaching the cluster with bounded retries.

Owns what every tool that takes a bootstrap string (`odradek groups`, `python -m odradek.pipeline`,
the Spark source through KafkaClient) does with it, and what it tells a person when it goes wrong:

- Syntax: `parse_bootstrap` raises `BootstrapSyntaxError` (a ValueError) naming the bad entry and
  what is wrong with it; `bootstrap_option` is the same check as an argparse `type=`, so a command
  line tool reports it as a usage error (exit 2) naming its option.
- Reaching the cluster (`reach_cluster`): each bootstrap server is tried in turn, each attempt (TCP
  connect plus ApiVersions) bounded by the client's connect timeout clipped to what is left of the
  retry window. A refused or timed-out connection is retried with backoff (0.5 s doubling to 2 s)
  until `retry_for_s` has passed, each retry announced by one line through `on_retry` ("cannot
  reach 127.0.0.1:9 (connection refused), retrying for 5 s"); then `BrokerUnreachable` is raised
  with one line saying what failed and for how long it was tried. An unknown host is not retried (a
  typo does not fix itself): when no bootstrap server can do better, it is reported at once.

Invariants: `reach_cluster` returns or raises within about `retry_for_s` (at most one attempt's
minimum of 0.5 s beyond it); every message is one line and names host:port.

Callers: odradek.client.client (parsing, KafkaClient.connect), odradek.cli, odradek.pipeline.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from odradek.client.connection import ConnectFailed

_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 2.0
_MIN_ATTEMPT_S = 0.5


class BootstrapSyntaxError(ValueError):
    """A bootstrap string that is not `host:port[,host:port...]`."""


class BrokerUnreachable(ConnectionError):
    """No bootstrap server could be reached; the message is one line for a person."""

    def __init__(self, failures: Sequence[ConnectFailed], gave_up_after_s: float | None = None) -> None:
        self.failures = tuple(failures)
        self.retriable = any(f.retriable for f in failures)
        message = _describe(self.failures)
        if gave_up_after_s is not None:
            message += f"; gave up after {gave_up_after_s:g} s"
        super().__init__(message)


class _Connectable(Protocol):
    bootstrap: Sequence[tuple[str, int]]
    connect_timeout_s: float

    def connect_to(self, host: str, port: int, *, connect_timeout_s: float) -> object: ...


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """`host1:port1,host2:port2` (an IPv6 host in brackets: `[::1]:9092`) into (host, port) pairs."""
    entries = [entry.strip() for entry in servers.split(",")]
    if not any(entries):
        raise BootstrapSyntaxError("no bootstrap server given; expected HOST:PORT[,HOST:PORT...]")
    return [_parse_entry(entry) for entry in entries if entry]


def _parse_entry(entry: str) -> tuple[str, int]:
    host, sep, port = entry.rpartition(":")
    if not sep or not host:
        problem = "expected HOST:PORT (the port is missing)"
    elif ":" in host and not (host.startswith("[") and host.endswith("]")):
        problem = "write an IPv6 host in brackets, as in [::1]:9092"
    elif not port.isdigit() or not 0 < int(port) < 65536:
        problem = "the port must be a number from 1 to 65535"
    else:
        return host.strip("[]"), int(port)
    raise BootstrapSyntaxError(f"bad bootstrap server {entry!r}: {problem}")


def bootstrap_option(value: str) -> str:
    """argparse `type=` for a bootstrap option: the string unchanged, or a usage error saying why not."""
    try:
        parse_bootstrap(value)
    except BootstrapSyntaxError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def reach_cluster(client: _Connectable, *, retry_for_s: float, on_retry: Callable[[str], None]) -> None:
    """Open a connection to one of the client's bootstrap servers, retrying for `retry_for_s`."""
    started = time.monotonic()
    deadline = started + retry_for_s
    backoff = _FIRST_BACKOFF_S
    while True:
        failures = []
        for host, port in client.bootstrap:
            attempt_s = min(client.connect_timeout_s, max(deadline - time.monotonic(), _MIN_ATTEMPT_S))
            try:
                client.connect_to(host, port, connect_timeout_s=attempt_s)
                return
            except ConnectFailed as exc:
                failures.append(exc)
        left = deadline - time.monotonic()
        if not any(f.retriable for f in failures):
            raise BrokerUnreachable(failures)
        if left <= 0:
            raise BrokerUnreachable(failures, gave_up_after_s=round(time.monotonic() - started, 1))
        on_retry(f"{_describe(failures)}, retrying for {round(left, 1):g} s")
        time.sleep(min(backoff, left))
        backoff = min(backoff * 2, _MAX_BACKOFF_S)


def _describe(failures: Sequence[ConnectFailed]) -> str:
    if len(failures) == 1:
        return failures[0].describe()
    return "no bootstrap server reachable: " + ", ".join(f"{f.address} ({f.reason})" for f in failures)
