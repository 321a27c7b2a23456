"""The pytest plugin of odradek (entry point `pytest11`, loaded by every pytest run once odradek is
installed): a Kafka broker in the test process for tests of code written against Kafka.

Fixtures:
- `kafka_broker`: a running `InProcessBroker` (testing/inprocess.py), one per test, on a free
  loopback port and a temporary directory, started in a fraction of a second and stopped (and its
  directory removed) after the test;
- `kafka_bootstrap`: its `host:port`, what clients take as bootstrap.servers;
- `kafka_broker_overrides`: the broker configs the broker starts with (none by default); override
  this fixture in a conftest.py or a test module to change them, e.g. `{"num.partitions": 3}`.

Invariants: importing the plugin costs nothing beyond pytest itself (the broker is imported when a
test first asks for it), and it defines only these three `kafka_`-prefixed fixtures: no hooks, no
options, nothing that touches a run which does not use them.

Callers: pytest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from odradek.testing.inprocess import InProcessBroker


@pytest.fixture
def kafka_broker_overrides() -> Mapping[str, object]:
    """Broker configs for `kafka_broker` (none); override this fixture to set some."""
    return {}


@pytest.fixture
def kafka_broker(kafka_broker_overrides: Mapping[str, object]) -> Iterator[InProcessBroker]:
    """A broker running in the test process, on a free port and a temporary directory."""
    from odradek.testing.inprocess import InProcessBroker

    with InProcessBroker(overrides=kafka_broker_overrides) as broker:
        yield broker


@pytest.fixture
def kafka_bootstrap(kafka_broker: InProcessBroker) -> str:
    """`host:port` of `kafka_broker`, for bootstrap.servers."""
    return kafka_broker.bootstrap
