"""Server test fixtures: one shared broker process per module, and raw clients connected to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from odradek.testing.broker import BrokerProcess
from tests.server.raw_client import RawClient


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("broker")
    with BrokerProcess(root / "data", output_path=root / "broker.out") as process:
        yield process


@pytest.fixture
def connect(broker: BrokerProcess) -> Iterator[Callable[[], RawClient]]:
    clients: list[RawClient] = []

    def factory() -> RawClient:
        client = RawClient(broker.bootstrap)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()
