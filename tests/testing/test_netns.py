"""NamespacedCluster (testing/netns.py): brokers in network namespaces of their own, the faults of each
namespace, and the clean-up. Needs root, iproute2 and nftables (CI has them; the test fails, not
skips, where they are missing, as the fault tests depend on them)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from odradek.testing.netns import NamespacedCluster, netns_available

pytestmark = pytest.mark.slow


def reachable(host: str, port: int, namespace: str | None = None) -> bool:
    """Whether a TCP connection to host:port opens within a second (from `namespace` when given)."""
    if namespace is None:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            return False
    probe = f"import socket; socket.create_connection(({host!r}, {port}), timeout=1.0)"
    done = subprocess.run(["ip", "netns", "exec", namespace, "python3", "-c", probe], capture_output=True)
    return done.returncode == 0


def test_each_fault_cuts_what_it_names_and_close_leaves_nothing(tmp_path: Path) -> None:
    assert netns_available() is None, netns_available()
    cluster = NamespacedCluster(tmp_path, 2, disk_bytes=8 << 20)
    try:
        cluster.start()
        one, two = cluster.links[1], cluster.links[2]
        port = cluster.brokers[1].port
        zk_host, zk_port = cluster.zookeeper_address
        assert reachable(one.address, port) and reachable(two.address, port, one.namespace)

        one.down()
        assert not reachable(one.address, port)
        one.heal()
        assert reachable(one.address, port)

        one.drop_peers([two.address])  # broker 1 and broker 2 only
        assert not reachable(two.address, port, one.namespace)
        assert reachable(zk_host, zk_port, one.namespace) and reachable(one.address, port)
        one.heal()

        one.drop_zookeeper(zk_host, zk_port)  # ZooKeeper only
        assert not reachable(zk_host, zk_port, one.namespace)
        assert reachable(two.address, port, one.namespace)
        one.heal()
        assert reachable(zk_host, zk_port, one.namespace)

        disk = cluster.disks[1]
        disk.fill()
        assert os.statvfs(disk.path).f_bavail == 0
        disk.free()
        assert os.statvfs(disk.path).f_bavail > 0
    finally:
        cluster.close()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"odr{cluster.subnet}" not in names + links
    assert str(tmp_path) not in Path("/proc/mounts").read_text()
    assert (tmp_path / "broker-1-logs").is_dir() and not (tmp_path / "broker-1-logs" / ".filler").exists()
