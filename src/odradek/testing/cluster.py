"""A local cluster of real processes: one ZooKeeper server (or one the caller names) and N `odradek
serve` brokers, each in its own data directory, on loopback ports.

Owns the broker processes it started (and the ZooKeeper server, when it started one), the cluster's
ZooKeeper chroot, and a kazoo client that reads that chroot as an operator with zkCli.sh would
(Kafka's znodes and JSON, see controller/zk/znodes.py). `start()` returns once every broker listens;
`wait_for_controller()` once one of them holds `/controller`. `close()` kills what is still running
and stops the ZooKeeper server it started; `stop()` shuts the brokers down gracefully (SIGTERM, the
controlled shutdown path) first, one after the other, telling `announce` what it waits for. With
`die_with_owner`, every process it starts is killed when its owner dies (testing/parent_death.py:
the owner starts the cluster from its main thread).

Brokers are numbered from 1 (broker.id = 1..N) and put in racks `rack-<id>`, so rack-aware
assignment spreads replicas the way a three-rack cluster would. Each listens on 127.0.0.1: on a free
port, or with `base_port` on base_port + id - 1. The chroot is the caller's (`""`: none) or a fresh
one per cluster.

With `metrics`, every broker serves /metrics on a port of its own (`metrics_url`).

With `security` (a `ClientSecurity`: TLS and/or a SASL step such as security/sasl/client.py's
`sasl_authenticate`), the cluster's own Metadata probes connect as that says, for brokers whose
listener is not PLAINTEXT.

Callers: cluster and fault tests (tests/cluster), benchmarks, and the `odradek cluster` command.
Not used by the broker itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.controller.zk import znodes
from odradek.network_client import ClientSecurity, NodeConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.metadata import MetadataRequest, MetadataResponse
from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.zookeeper import ZooKeeperServer

T = TypeVar("T")
DEFAULT_SESSION_TIMEOUT_MS = 6000


def metadata_view(
    process: BrokerProcess, security: ClientSecurity | None = None
) -> tuple[int, list[int]] | None:
    """(controller id, broker ids) as `process` answers Metadata v12 now (connecting with `security`
    when given); None when unreachable."""
    response = _metadata(process, [], security)
    return None if response is None else (response.controller_id, sorted(b.node_id for b in response.brokers))


def partition_view(process: BrokerProcess, topic: str) -> dict[int, tuple[int, tuple[int, ...]]] | None:
    """Each partition of `topic` as `process`'s Metadata has it now: (leader, sorted ISR); None when
    unreachable."""
    response = _metadata(process, [MetadataRequest.MetadataRequestTopic(name=topic)])
    if response is None:
        return None
    return {
        p.partition_index: (p.leader_id, tuple(sorted(p.isr_nodes)))
        for t in response.topics
        if t.name == topic
        for p in t.partitions
    }


def _metadata(
    process: BrokerProcess,
    topics: list[MetadataRequest.MetadataRequestTopic],
    security: ClientSecurity | None = None,
) -> MetadataResponse | None:
    async def ask() -> MetadataResponse:
        connection = NodeConnection(process.broker_id, process.host, process.port, client_id="local-cluster")
        await connection.connect(security)
        try:
            request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
            response: MetadataResponse = await connection.send(ApiKey.METADATA, 12, request)
            return response
        finally:
            await connection.close()

    try:
        return asyncio.run(ask())
    except (ConnectionError, TimeoutError):
        return None


def eventually(probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """The first truthy value of `probe()`, polled until `timeout_s`; AssertionError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(interval_s)


class LocalCluster:
    """N brokers on one ZooKeeper chroot; see the module docstring."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        brokers: int = 3,
        *,
        zookeeper_connect: str | None = None,
        chroot: str | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        overrides: Mapping[str, object] | None = None,
        base_port: int | None = None,
        die_with_owner: bool = False,
        security: ClientSecurity | None = None,
        metrics: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.security = security  # how the cluster's own probes connect (TLS, SASL)
        self.broker_count = brokers
        self.chroot = chroot if chroot is not None else f"/odradek-{uuid.uuid4().hex[:8]}"
        self.session_timeout_ms = session_timeout_ms
        self.overrides = dict(overrides or {})
        self.base_port = base_port
        self.die_with_owner = die_with_owner
        self.metrics = metrics  # each broker serves /metrics (http.listeners) at `metrics_url(id)`
        self._zookeeper_connect = zookeeper_connect
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        self.zk: KazooClient | None = None

    # -- life cycle ------------------------------------------------------------------------------

    @property
    def connect(self) -> str:
        """`zookeeper.connect` of the brokers: the server and this cluster's chroot."""
        if self._zookeeper_connect is None:
            raise RuntimeError("the cluster has not started its ZooKeeper server")
        return self._zookeeper_connect + self.chroot

    @property
    def bootstrap(self) -> str:
        """Every broker's `host:port`, comma-separated, as clients take bootstrap.servers."""
        return ",".join(process.bootstrap for process in self.brokers.values())

    def start(self, timeout_s: float = 30.0, processes: Iterable[int] | None = None) -> LocalCluster:
        """Start ZooKeeper (unless one was named) and every broker (or those of `processes`: a
        test may run the others in its own process); return once all listen."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(
                self.data_dir / "zookeeper", port=self._zookeeper_port(), die_with_owner=self.die_with_owner
            )
            self.zookeeper.start(timeout_s)
            self._zookeeper_connect = self.zookeeper.connect_string
        for broker_id in processes or range(1, self.broker_count + 1):
            self.brokers[broker_id] = self.broker(broker_id)
            self.brokers[broker_id].start(timeout_s)
        self.zk = KazooClient(hosts=self.connect, timeout=5.0)
        self.zk.start(timeout=timeout_s)
        return self

    def _zookeeper_port(self) -> int:
        """A free port for the ZooKeeper server this starts, none of the brokers' `base_port` ports
        (free too until the brokers bind them: one was seen taken by ZooKeeper)."""
        taken = (
            range(0) if self.base_port is None else range(self.base_port, self.base_port + self.broker_count)
        )
        while (port := free_port()) in taken:
            pass
        return port

    def broker(self, broker_id: int, data: str | None = None) -> BrokerProcess:
        """A broker process of this cluster (not started): its own data dir and rack, the chroot."""
        settings: dict[str, object] = {
            "zookeeper.connect": self.connect,
            "zookeeper.session.timeout.ms": self.session_timeout_ms,
            "broker.rack": f"rack-{broker_id}",
            **self.overrides,
        }
        directory = self.data_dir / (data or f"broker-{broker_id}")
        port = None if self.base_port is None else self.base_port + broker_id - 1
        process = BrokerProcess(
            directory, port=port, broker_id=broker_id, overrides=settings, die_with_owner=self.die_with_owner
        )
        if self.metrics:
            process.overrides["http.listeners"] = f"http://{process.host}:{free_port(process.host)}"
        return process

    def metrics_url(self, broker_id: int) -> str:
        """Where broker `broker_id` serves /metrics (the cluster made with `metrics`)."""
        return self.brokers[broker_id].overrides["http.listeners"] + "/metrics"

    def stop(
        self, timeout_s: float = 30.0, announce: Callable[[str], None] | None = None
    ) -> dict[int, int | None]:
        """Graceful shutdown of every broker (SIGTERM) in turn, then `close()`; each broker's exit
        code. `announce` hears each wait before it starts."""
        codes: dict[int, int | None] = {}
        for broker_id, process in self.brokers.items():
            if announce is not None and process.is_running():
                announce(
                    f"stopping broker {broker_id} (pid {process.pid}): controlled shutdown, then a clean exit"
                )
            codes[broker_id] = process.stop(timeout_s)
        if announce is not None and self.zookeeper is not None and self.zookeeper.is_running():
            announce(f"stopping ZooKeeper (pid {self.zookeeper.pid})")
        self.close()
        return codes

    def close(self) -> None:
        """Kill brokers still running, close the reader, stop the ZooKeeper server this started."""
        for process in self.brokers.values():
            process.kill()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- reading the cluster state from ZooKeeper -------------------------------------------------

    def _reader(self) -> KazooClient:
        if self.zk is None:
            raise RuntimeError("the cluster is not started")
        return self.zk

    def read(self, path: str) -> Any:
        """The JSON of the znode at `path` under the chroot, or None when it does not exist."""
        try:
            data, _ = self._reader().get(path)
        except NoNodeError:  # never made, or gone (a failover's /controller) since
            return None
        return json.loads(data)

    def live_broker_ids(self) -> list[int]:
        return sorted(int(child) for child in self._reader().get_children(znodes.BROKER_IDS_PATH))

    def controller(self) -> int | None:
        found = self.read(znodes.CONTROLLER_PATH)
        return found["brokerid"] if found else None

    def controller_epoch(self) -> int:
        return int(self._reader().get(znodes.CONTROLLER_EPOCH_PATH)[0])

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's assigned replicas (`/brokers/topics/<topic>`); empty when unknown."""
        found = self.read(znodes.topic_path(topic)) or {}
        return list(found.get("partitions", {}).get(str(partition), []))

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """`/brokers/topics/<topic>/partitions/<p>/state`: leader, leader_epoch, isr, ..."""
        return self.read(znodes.partition_state_path(topic, partition))

    def wait_for_controller(self, timeout_s: float = 15.0) -> int:
        """Once every broker registered, one holds `/controller`, and every broker's Metadata names
        it and every broker (the controller's UpdateMetadata reached them all): its id. Clients
        that look the controller up once (librdkafka's admin client) then find it at once."""
        expected = sorted(self.brokers)
        eventually(lambda: self.live_broker_ids() == expected, timeout_s, f"brokers {expected} registered")
        controller = eventually(self.controller, timeout_s, "a controller")
        for process in self.brokers.values():
            if process.is_running():
                self._wait_for_metadata(process, (controller, expected), timeout_s)
        return controller

    def _wait_for_metadata(
        self, process: BrokerProcess, view: tuple[int, list[int]], timeout_s: float
    ) -> None:
        def told() -> bool:
            return metadata_view(process, self.security) == view

        eventually(told, timeout_s, f"broker {process.broker_id}'s metadata naming controller {view[0]}")
