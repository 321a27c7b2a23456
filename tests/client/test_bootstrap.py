"""Bootstrap parsing and reaching a cluster: the one-line messages, what is retried, and the time bounds.

No broker is needed: an unreachable broker is a closed port on 127.0.0.1, an unknown host a name under
the reserved `.invalid` TLD, and a listener that is not Kafka a socket that accepts and never answers.
Time bounds are checked over several probes, the worst one against the bound.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Iterator

import pytest

from odradek.client import (
    BootstrapSyntaxError,
    BrokerUnreachable,
    ConnectFailed,
    KafkaClient,
    bootstrap_option,
    parse_bootstrap,
)
from odradek.testing.broker import free_port

UNKNOWN_HOST = "no-such-broker.invalid"
PROBES = 3


@pytest.mark.parametrize(
    ("servers", "parsed"),
    [
        ("127.0.0.1:9092", [("127.0.0.1", 9092)]),
        (" a:1 , b:2 ", [("a", 1), ("b", 2)]),
        ("[::1]:9092", [("::1", 9092)]),
    ],
)
def test_parse_bootstrap(servers: str, parsed: list[tuple[str, int]]) -> None:
    assert parse_bootstrap(servers) == parsed


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ("127.0.0.1", "'127.0.0.1': expected HOST:PORT (the port is missing)"),
        ("a:1,b", "'b': expected HOST:PORT (the port is missing)"),
        ("host:0", "'host:0': the port must be a number from 1 to 65535"),
        ("host:http", "'host:http': the port must be a number from 1 to 65535"),
        ("::1:9092", "'::1:9092': write an IPv6 host in brackets"),
        (" , ", "no bootstrap server given"),
    ],
)
def test_bad_bootstrap_names_the_entry_and_the_problem(servers: str, problem: str) -> None:
    with pytest.raises(BootstrapSyntaxError) as raised:
        parse_bootstrap(servers)
    assert problem in str(raised.value)
    with pytest.raises(argparse.ArgumentTypeError) as as_option:
        bootstrap_option(servers)
    assert str(as_option.value) == str(raised.value)


def _reach(servers: str, retry_for_s: float) -> tuple[BrokerUnreachable, list[str], float]:
    retries: list[str] = []
    started = time.monotonic()
    with pytest.raises(BrokerUnreachable) as raised:
        KafkaClient.connect(servers, retry_for_s=retry_for_s, on_retry=retries.append)
    return raised.value, retries, time.monotonic() - started


def test_closed_port_is_retried_for_the_window_then_reported_in_one_line() -> None:
    worst = 0.0
    for _ in range(PROBES):
        port = free_port()
        error, retries, elapsed = _reach(f"127.0.0.1:{port}", retry_for_s=1.0)
        worst = max(worst, elapsed)
        refused = f"cannot reach 127.0.0.1:{port} (connection refused)"
        assert retries, "a retry is announced"
        assert retries[0] == f"{refused}, retrying for 1 s"
        assert all(r.startswith(f"{refused}, retrying for ") for r in retries)
        assert str(error).startswith(f"{refused}; gave up after")
        assert "\n" not in str(error) and error.retriable
    assert 1.0 <= worst < 2.5, f"worst of {PROBES} probes: {worst:.2f} s"


def test_unknown_host_is_reported_at_once_and_not_retried() -> None:
    error, retries, elapsed = _reach(f"{UNKNOWN_HOST}:9092", retry_for_s=60.0)
    assert str(error) == f"unknown host {UNKNOWN_HOST} (no address for {UNKNOWN_HOST}:9092)"
    assert retries == [] and not error.retriable
    assert elapsed < 30, "not retried for the 60 s window"


def test_every_bootstrap_server_is_named_when_none_answers() -> None:
    port = free_port()
    error, retries, _ = _reach(f"{UNKNOWN_HOST}:1,127.0.0.1:{port}", retry_for_s=0.5)
    both = f"{UNKNOWN_HOST}:1 (unknown host), 127.0.0.1:{port} (connection refused)"
    assert retries and retries[0].startswith(f"no bootstrap server reachable: {both}, retrying for")
    assert str(error).startswith(f"no bootstrap server reachable: {both}; gave up after")


def test_a_lazy_client_gives_up_on_an_unknown_host_before_its_request_timeout() -> None:
    with KafkaClient(f"{UNKNOWN_HOST}:9092", timeout_s=60) as client:
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match=f"unknown host {UNKNOWN_HOST}"):
            client.metadata()
        assert time.monotonic() - started < 30


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers a request."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_connect_timeout_bounds_a_listener_that_never_answers(silent_listener: int) -> None:
    worst = 0.0
    for _ in range(PROBES):
        with KafkaClient(f"127.0.0.1:{silent_listener}", connect_timeout_s=0.3) as client:
            started = time.monotonic()
            with pytest.raises(ConnectFailed) as raised:
                client.connect_to("127.0.0.1", silent_listener)
            worst = max(worst, time.monotonic() - started)
        assert str(raised.value) == (
            f"cannot reach 127.0.0.1:{silent_listener}"
            " (no ApiVersions answer within 0.3 s: is it a Kafka listener?)"
        )
    assert 0.3 <= worst < 1.5, f"worst of {PROBES} probes: {worst:.2f} s"
