"""Fixtures of the cluster tests: `cluster`, a three-broker `LocalCluster` with default settings
from the suite's `start_cluster` (tests/conftest.py: a chroot of its own on the module's ZooKeeper
server, zookeeper.session.timeout.ms SESSION_TIMEOUT_MS, every process killed when the test ends)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.testing.cluster import LocalCluster
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS

SESSION_TIMEOUT_MS = CLUSTER_SESSION_TIMEOUT_MS


@pytest.fixture
def cluster(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster()
