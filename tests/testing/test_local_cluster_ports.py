"""The ZooKeeper server a local cluster starts never takes one of its brokers' ports: with
`base_port`, those are free until the brokers bind them, so a free port may be one of them (seen:
broker 2 of `odradek cluster` failed to bind, "Address already in use", ZooKeeper on its port)."""

from __future__ import annotations

from odradek.testing import cluster as cluster_module
from odradek.testing.cluster import LocalCluster


def test_zookeeper_port_is_none_of_the_brokers_ports(tmp_path, monkeypatch):
    offered = iter([20001, 20000, 20002, 20003])
    monkeypatch.setattr(cluster_module, "free_port", lambda: next(offered))
    cluster = LocalCluster(tmp_path, 3, base_port=20000)
    assert cluster._zookeeper_port() == 20003
