"""Broker fixtures of the KIP-848 consumer group acceptance tests (`group.protocol=consumer`).

- `broker` (module scope): one `odradek serve` shared by the module's tests, which isolate themselves
  with unique topic and group names; `make_broker`: fresh brokers a test may restart.
Both beat faster than Kafka's defaults (group.consumer.heartbeat.interval.ms 500, its minimum lowered
to 100), so a member learns of a new assignment within half a second instead of five, and use three
`__consumer_offsets` partitions so a broker starts and loads quickly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.testing.broker import BrokerProcess

FAST_GROUPS = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "offsets.topic.num.partitions": 3,
}

BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("consumer-protocol-broker")
    with BrokerProcess(root / "data", overrides=FAST_GROUPS, output_path=root / "broker.out") as process:
        yield process


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[BrokerFactory]:
    started: list[BrokerProcess] = []

    def factory(**overrides: object) -> BrokerProcess:
        process = BrokerProcess(
            tmp_path / f"broker{len(started)}",
            overrides={**FAST_GROUPS, **overrides},
            output_path=tmp_path / "broker.out",
        )
        started.append(process)
        process.start()
        return process

    yield factory
    for process in started:
        process.kill()
