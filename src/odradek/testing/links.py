"""A local cluster whose network links each go through a `FaultProxy`, so a test can cut, or slow
down, one broker's link to ZooKeeper or everybody's link to one broker.

Per broker two proxies on 127.0.0.1, created when the broker is (`broker()`) and closed with the
cluster:
- its ZooKeeper link: the broker's `zookeeper.connect` names this proxy (in front of the cluster's
  single ZooKeeper server) and the chroot, so cutting it cuts that broker, and only it, from
  ZooKeeper;
- its inbound link: the broker listens on its real port but advertises (advertised.listeners) the
  proxy in front of it, so the other brokers' fetches, the controller's requests and every client
  that learned the broker from Metadata pass the proxy; `bootstrap` names the proxies too. Cutting
  it isolates the broker from everybody else while its own outbound links and its ZooKeeper session
  stay up: a partition as the rest of the cluster sees it.

What bypasses the proxies: the harness's own ZooKeeper reader, the readiness checks of
`LocalCluster` (the real listener: `BrokerProcess` start-up, `wait_for_controller`), and whoever
dials a broker's `BrokerProcess.bootstrap`. Traffic never leaves loopback.

Callers: the fault harness (testing/chaos.py). Not used by the broker itself.
"""

from __future__ import annotations

from typing import Any

from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster
from odradek.testing.proxy import FaultProxy


class ProxiedCluster(LocalCluster):
    """A `LocalCluster` with a ZooKeeper link and an inbound link per broker; see the module
    docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zookeeper_links: dict[int, FaultProxy] = {}
        self.inbound_links: dict[int, FaultProxy] = {}

    @property
    def bootstrap(self) -> str:
        """Every broker's inbound proxy, comma-separated, as clients take bootstrap.servers."""
        return ",".join(self.inbound_links[broker_id].address for broker_id in self.brokers)

    def broker(self, broker_id: int, data: str | None = None) -> BrokerProcess:
        """A broker process (not started) that reaches ZooKeeper through its own proxy and
        advertises another proxy in front of its listener; a second call replaces both."""
        process = super().broker(broker_id, data)
        self._close_links(broker_id)
        host, port = self._zookeeper_server()
        zookeeper = self.zookeeper_links[broker_id] = FaultProxy(host, port)
        inbound = self.inbound_links[broker_id] = FaultProxy(process.host, process.port)
        process.overrides["zookeeper.connect"] = zookeeper.address + self.chroot
        process.overrides["advertised.listeners"] = f"PLAINTEXT://{inbound.address}"
        return process

    def _zookeeper_server(self) -> tuple[str, int]:
        hosts = ZooKeeperConnect.parse(self.connect).hosts
        if "," in hosts:
            raise ValueError(f"one ZooKeeper server to proxy, not {hosts}")
        host, _, port = hosts.rpartition(":")
        return host, int(port)

    def _close_links(self, broker_id: int) -> None:
        for links in (self.zookeeper_links, self.inbound_links):
            link = links.pop(broker_id, None)
            if link is not None:
                link.close()

    def close(self) -> None:
        """`LocalCluster.close()`, then every proxy."""
        super().close()
        for broker_id in list(self.inbound_links):
            self._close_links(broker_id)
