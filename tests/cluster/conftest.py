"""Fixtures of the cluster tests: on the module's ZooKeeper server (tests/conftest.py), per test a
`LocalCluster` of three `odradek serve` processes (broker ids 1..3, racks rack-1..rack-3) on a chroot
of its own, with zookeeper.session.timeout.ms 4000 so a killed broker's session expires in seconds,
handed over once every broker knows the controller and every broker from its UpdateMetadata.
Every process a test started is killed when it ends, pass or fail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperServer

SESSION_TIMEOUT_MS = 4000


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[LocalCluster]:
    made = LocalCluster(
        tmp_path, 3, zookeeper_connect=zookeeper.connect_string, session_timeout_ms=SESSION_TIMEOUT_MS
    )
    try:
        made.start()
        made.wait_for_controller()  # and every broker's metadata names it and every broker
        yield made
    finally:
        made.close()
