"""Suite-wide fixtures and markers.

Owns: the `compat` marker (applied to every test under tests/compat, which runs real Kafka clients
against real broker processes) and `unique_topic`, a topic name no other test uses, so tests sharing
one broker never see each other's data. Topic names use only Kafka's legal characters
([a-zA-Z0-9._-], at most 249) and avoid '.' so they never collide with '_' in metric names.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

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
