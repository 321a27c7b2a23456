"""Fixtures of the quota tests: the ZooKeeper tests' fresh chroot per test."""

from __future__ import annotations

from tests.controller.zk.conftest import chroot

__all__ = ["chroot"]
