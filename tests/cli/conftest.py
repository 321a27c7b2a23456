"""Fixtures of the Kafka-style tool tests: `tool_broker`, one `odradek serve` process per test module
(broker id 1, a free port, a temporary log dir)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.broker import BrokerProcess


@pytest.fixture(scope="module")
def tool_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("tool-broker")
    with BrokerProcess(root / "data", output_path=root / "broker.out", broker_id=1) as process:
        yield process
