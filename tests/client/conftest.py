"""Fixtures of the client tests: one broker process for the session (or ODRADEK_CLIENT_BOOTSTRAP).

The broker checks retention every 200 ms, so tests can make records disappear with topic configs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from odradek.client import KafkaClient
from odradek.testing.broker import BrokerProcess
from tests.conftest import topic_name


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("ODRADEK_CLIENT_BOOTSTRAP")
    if external:
        yield external
        return
    root = tmp_path_factory.mktemp("client-broker")
    broker = BrokerProcess(
        root / "data", output_path=root / "broker.out", overrides={"log.retention.check.interval.ms": 200}
    )
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def client(bootstrap: str) -> Iterator[KafkaClient]:
    with KafkaClient(bootstrap, timeout_s=10) as kafka:
        yield kafka


@pytest.fixture
def make_topic(client: KafkaClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    def factory(partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        name = topic_name(request.node.name)
        client.create_topics({name: partitions}, configs=configs)
        return name

    return factory
