"""Broker fixtures for the real-client acceptance tests.

Owns the broker processes the compat tests talk to:
- `broker` (session scope): one `odradek serve` on a free loopback port with a temporary log dir,
  Kafka's defaults otherwise. Shared by every non-destructive test; tests isolate themselves with
  `unique_topic`. Setting ODRADEK_COMPAT_BOOTSTRAP=host:port points these tests at an already running
  broker instead (Apache Kafka, to check that a test encodes Kafka's behaviour).
- `make_broker` (function scope): a factory of fresh brokers with their own log dir and overrides, for
  tests that kill, restart or misconfigure the broker. Every broker it made is stopped at teardown.
- `fresh_broker`: `make_broker()` with default settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess
from tests.compat.helpers import ExternalBroker

BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | ExternalBroker]:
    external = os.environ.get("ODRADEK_COMPAT_BOOTSTRAP")
    if external:
        yield ExternalBroker(external)
        return
    root = tmp_path_factory.mktemp("session-broker")
    with BrokerProcess(root / "data", output_path=root / "broker.out") as process:
        yield process


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[BrokerFactory]:
    started: list[BrokerProcess] = []

    def factory(overrides: Mapping[str, object] | None = None, *, start: bool = True) -> BrokerProcess:
        index = len(started)
        process = BrokerProcess(
            tmp_path / f"broker{index}",
            overrides=overrides,
            output_path=tmp_path / f"broker{index}.out",
        )
        started.append(process)
        if start:
            process.start()
        return process

    yield factory
    for process in started:
        process.kill()


@pytest.fixture
def fresh_broker(make_broker: BrokerFactory) -> BrokerProcess:
    return make_broker()
