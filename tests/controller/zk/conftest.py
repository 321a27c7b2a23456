"""Fixtures of the ZooKeeper tests: one real ZooKeeper server per test module, and a fresh chroot per
test on it, so tests share the server but not the state."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.testing.zookeeper import ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server


@pytest.fixture
def chroot(zookeeper: ZooKeeperServer) -> ZooKeeperConnect:
    return ZooKeeperConnect.parse(f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:8]}")
