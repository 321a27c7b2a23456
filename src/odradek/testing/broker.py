"""A real broker process for tests: `python -m odradek serve` on a free loopback port.

Owns one subprocess at a time. `start()` returns once the listener accepts TCP connections (never by
scraping the log), `spawn()` at once; `stop()` sends SIGTERM and waits for the graceful exit code;
`kill()` sends SIGKILL (a crash, for recovery tests); `restart()` starts again on the same port and
data dir. The broker's stdout and stderr go to `output_path` (appended to across restarts), whose
tail is put in the exception when the process dies or never listens. The process runs in a process
group of its own, so a Ctrl-C at the terminal reaches only its owner, which decides when and in what
order to stop it; with `die_with_owner` it is also killed when its owner dies
(testing/parent_death.py), so a kill -9 of the owner leaves no broker. The process starts with
SIGTERM and SIGINT blocked, and `odradek serve` unblocks them once it handles them (cli/serve.py): a
stop sent at any moment, even before the interpreter finished starting, is a clean stop with exit
status 0, never a death by the signal's default action (-15) (testing/stop_signals.py).

`LoopbackProcess` is what every such process shows its owner, BrokerProcess's and the peer brokers'
alike (testing/kafka_reference.py, bench/peers.py): `bootstrap`, `pid`, `is_running()`, a `with`
block that starts and stops it, and `wait_listening`, the wait for its listener to accept.

Callers: tests (tests/server, tests/compat, benchmarks). Not used by the broker itself.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from odradek.testing import stop_signals
from odradek.testing.parent_death import die_with_owner

_POLL_INTERVAL_S = 0.05


# Below Linux's ephemeral range (32768-60999): a port taken from it could become the local port of
# an outgoing connection (a broker's to ZooKeeper, a client's) between this choice and the bind.
_TEST_PORTS = range(20000, 32700)
_PORT_CHOICE = random.Random()  # its own: hypothesis seeds the global one, the same in every process


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """The first of `count` consecutive TCP ports nobody has bound right now, below the ephemeral
    range; chosen at random, so that test processes running side by side rarely pick the same."""
    while True:
        base = _PORT_CHOICE.randrange(_TEST_PORTS.start, _TEST_PORTS.stop - count)
        if all(_bindable(host, port) for port in range(base, base + count)):
            return base


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise  # an address this host does not have: no port would do
    return True


class BrokerStartError(RuntimeError):
    """The broker exited or did not listen in time; the message carries its output tail."""


def accepts(host: str, port: int) -> bool:
    """Whether `host:port` accepts a TCP connection right now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class LoopbackProcess:
    """A server subprocess on `host:port` (set by the subclass, with `_proc` once spawned, and its own
    `start`)."""

    host: str
    port: int
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The `host:port` string clients take as bootstrap servers."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_listening(self, timeout: float, ready: Callable[[], bool] = lambda: True) -> bool:
        """Poll until the listener accepts and `ready()` holds (True), the process exits or `timeout`
        passes (False; the process is left as it is)."""
        deadline = time.monotonic() + timeout
        while self.is_running() and time.monotonic() < deadline:
            if accepts(self.host, self.port) and ready():
                return True
            time.sleep(_POLL_INTERVAL_S)
        return False

    def start(self, timeout: float = 30.0) -> object:
        raise NotImplementedError

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful shutdown (SIGTERM); returns the exit code, SIGKILLs if it does not exit in time."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class BrokerProcess(LoopbackProcess):
    """One broker subprocess bound to `host:port`, storing its logs in `data_dir`."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        broker_id: int = 0,
        overrides: Mapping[str, object] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        output_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        die_with_owner: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.broker_id = broker_id
        self.overrides = dict(overrides or {})
        self.config_file = Path(config_file) if config_file is not None else None
        self.output_path = (
            Path(output_path) if output_path else self.data_dir.with_name(self.data_dir.name + ".out")
        )
        self.env = dict(env) if env is not None else None
        self.die_with_owner = die_with_owner
        self.wrapper: list[str] = []  # argv the broker's command runs under (`ip netns exec NS`)
        self._proc = None
        self._output_start = 0  # where the output of the process last spawned begins in output_path

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def command(self) -> list[str]:
        """The argv that starts the broker."""
        argv = [*self.wrapper, sys.executable, "-m", "odradek", "serve"]
        if self.config_file is not None:
            argv += ["--config", str(self.config_file)]
        settings: dict[str, object] = {
            "broker.id": self.broker_id,
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        settings.update(self.overrides)
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        return argv

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and block until its listener accepts connections."""
        self.spawn()
        self._wait_listening(timeout)

    def spawn(self) -> None:
        """Start the process and return at once, before it listens."""
        if self.is_running():
            raise RuntimeError(f"broker already running as pid {self.pid}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ) if self.env is None else dict(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.output_path, "ab") as out, stop_signals.held():
            self._output_start = out.tell()
            self._proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                process_group=0,
                preexec_fn=die_with_owner() if self.die_with_owner else None,
            )

    def _wait_listening(self, timeout: float) -> None:
        if self.wait_listening(timeout):
            return
        if not self.is_running():
            raise BrokerStartError(f"broker exited with {self.returncode}:\n{self.output_tail()}")
        self.kill()
        tail = self.output_tail()
        raise BrokerStartError(f"broker did not listen on {self.bootstrap} in {timeout}s:\n{tail}")

    def kill(self) -> None:
        """Crash the broker (SIGKILL): no flush, no checkpoints, no clean shutdown marker."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def send_signal(self, signum: int) -> None:
        """Deliver a signal to the running broker (SIGTERM and SIGINT shut it down gracefully)."""
        if not self.is_running():
            raise RuntimeError("broker is not running")
        assert self._proc is not None
        self._proc.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit and return its exit code."""
        if self._proc is None:
            raise RuntimeError("broker was never started")
        return self._proc.wait(timeout)

    def restart(self, timeout: float = 30.0, *, hard: bool = False) -> None:
        """Stop (or kill when `hard`) and start again on the same port and data dir."""
        if hard:
            self.kill()
        else:
            self.stop(timeout)
        self.start(timeout)

    def output_tail(self, max_bytes: int = 8192) -> str:
        """The last `max_bytes` of the broker's combined stdout/stderr."""
        try:
            data = self.output_path.read_bytes()
        except FileNotFoundError:
            return ""
        return data[-max_bytes:].decode("utf-8", "replace")

    def last_output_line(self) -> str:
        """The last line the process last spawned wrote to `output_path`; "" when it wrote none."""
        try:
            with open(self.output_path, "rb") as out:
                out.seek(max(self._output_start, out.seek(0, os.SEEK_END) - 8192))
                data = out.read()
        except FileNotFoundError:
            return ""
        return data.decode("utf-8", "replace").strip().rpartition("\n")[2]
