"""Fixtures of the ZooKeeper tests: a fresh chroot per test on the module's ZooKeeper server
(tests/conftest.py), so tests share the server but not the state."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.testing.zookeeper import ZooKeeperServer


@pytest.fixture
def chroot(zookeeper: ZooKeeperServer) -> ZooKeeperConnect:
    return ZooKeeperConnect.parse(f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:8]}")
