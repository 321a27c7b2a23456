"""A broker inside the calling process, for tests of code that talks to Kafka: no JVM, no Docker, no
subprocess.

Owns one single-node `KafkaServer` (server/kafka_server.py) running in a daemon thread on an event loop of its
own, listening on PLAINTEXT://127.0.0.1 on a port the kernel picks, storing its logs in a temporary
directory (removed at stop) unless the caller names one. `start()` returns once the broker answers
(its listener accepts and every component is up) and records how long that took in `start_seconds`;
`stop()` shuts it down gracefully from any thread. Several may run at once, each on its own port.

Test-friendly defaults (`TEST_DEFAULTS`, overridable): `__consumer_offsets` with one partition,
so the first consumer group does not create fifty logs. Everything else is the broker's default.
The broker sets the interpreter's thread switch interval when it starts (server/kafka_server.py); stopping
the last running broker puts back the interval it found.

Callers: the pytest plugin (testing/pytest_plugin.py), bench/startup.py, and anyone's tests as a
context manager: `with InProcessBroker() as broker: ... broker.bootstrap ...`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from odradek.server.config import KafkaConfig
from odradek.server.kafka_server import KafkaServer

TEST_DEFAULTS: Mapping[str, str] = {"offsets.topic.num.partitions": "1"}
_switch_interval_lock = threading.Lock()
_running = [0, 0.0]  # brokers running, the switch interval found by the first


class InProcessBroker:
    """A single-node broker in a background thread; see the module docstring."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> None:
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._overrides = {key: str(value) for key, value in (overrides or {}).items()}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: KafkaServer | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.start_seconds = 0.0

    @property
    def broker(self) -> KafkaServer:
        if self._broker is None:
            raise RuntimeError("the broker is not running")
        return self._broker

    @property
    def bootstrap(self) -> str:
        """`host:port` for clients' bootstrap.servers."""
        endpoint = self.broker.advertised_endpoints()[0]
        return f"{endpoint.host}:{endpoint.port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise RuntimeError("the broker was never started")
        return self._data_dir

    def config(self) -> KafkaConfig:
        """The broker's config: a loopback listener on a free port, the data dir, the overrides."""
        props = {
            **TEST_DEFAULTS,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            **self._overrides,
        }
        return KafkaConfig(props)

    def start(self, timeout_s: float = 30.0) -> InProcessBroker:
        """Start the broker and return once it serves; raises what stopped it from starting."""
        if self._thread is not None:
            raise RuntimeError("already started")
        began = time.perf_counter()
        if self._data_dir is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="odradek-")
            self._data_dir = Path(self._temporary.name)
        config = self.config()
        _hold_switch_interval()
        self._thread = threading.Thread(target=self._run, args=(config,), name="odradek-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the in-process broker did not start within {timeout_s} s")
        if self._failure is not None:
            self._thread.join()
            self._cleanup()
            raise self._failure
        self.start_seconds = time.perf_counter() - began
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Graceful shutdown; waits for the broker's thread, then removes a temporary data dir."""
        thread, loop, broker = self._thread, self._loop, self._broker
        if thread is None:
            return
        if loop is not None and broker is not None and thread.is_alive():
            loop.call_soon_threadsafe(broker.request_stop)
        thread.join(timeout_s)
        if thread.is_alive():
            raise TimeoutError(f"the in-process broker did not stop within {timeout_s} s")
        self._cleanup()

    def _cleanup(self) -> None:
        self._thread = self._loop = self._broker = None
        _release_switch_interval()
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None
            self._data_dir = None

    def _run(self, config: KafkaConfig) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(config))
        finally:
            loop.close()
            self._ready.set()

    async def _serve(self, config: KafkaConfig) -> None:
        broker = KafkaServer(config)
        try:
            await broker.start()
        except BaseException as exc:
            self._failure = exc
            return
        self._broker = broker
        self._ready.set()
        await broker.serve_until_stopped()

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _hold_switch_interval() -> None:
    with _switch_interval_lock:
        if _running[0] == 0:
            _running[1] = sys.getswitchinterval()
        _running[0] += 1


def _release_switch_interval() -> None:
    with _switch_interval_lock:
        _running[0] -= 1
        if _running[0] == 0:
            sys.setswitchinterval(_running[1])
