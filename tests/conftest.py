"""Suite-wide fixtures and markers.

Owns: the `compat` marker (applied to every test under tests/compat, which runs real Kafka clients
against real broker processes); `unique_topic`, a topic name no other test uses, so tests sharing
one broker never see each other's data (Kafka's legal characters [a-zA-Z0-9._-], at most 249, and
no '.', so names never collide with '_' in metric names); and `zookeeper`, one real ZooKeeper
server per test module that asks for it (cluster and ZooKeeper tests take a chroot each on it).
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.zookeeper import ZooKeeperServer

# kafka-python 3.x loads its schemas with importlib.resources.{read,open}_text, deprecated in 3.11;
# the suite turns warnings into errors, so import it once here with only that warning silenced.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="(read|open)_text is deprecated", category=DeprecationWarning)
    import kafka  # noqa: F401

_COMPAT_DIR = Path(__file__).parent / "compat"
_ILLEGAL_TOPIC_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _COMPAT_DIR in Path(item.fspath).parents:
            item.add_marker(pytest.mark.compat)


def topic_name(hint: str) -> str:
    """A fresh topic name that starts with a readable `hint`."""
    stem = _ILLEGAL_TOPIC_CHARS.sub("-", hint).strip("-")[:60] or "topic"
    return f"{stem}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    return topic_name(request.node.name)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server
