"""A real ZooKeeper server process, standalone, on a loopback port: for cluster tests and local clusters.

Owns one `java ... QuorumPeerMain zoo.cfg` subprocess and its data directory. The server is the one
Debian's `zookeeper` package installs (`/usr/share/java/zookeeper.jar`); `ODRADEK_ZOOKEEPER_CLASSPATH`
names another classpath. `start()` returns once the server answers the `ruok` four-letter word with
`imok` (never by scraping its log); `stop()` sends SIGTERM and waits; `kill()` sends SIGKILL. The
server's output goes to `<data_dir>/zookeeper.out`, whose tail is put in the exception when it never
comes up. Like a BrokerProcess, it runs in a process group of its own: a Ctrl-C at the terminal
reaches only its owner, which stops the brokers before their ZooKeeper; and with `die_with_owner` it
is killed when its owner dies. SIGTERM and SIGINT are held back while the server is spawned
(testing/stop_signals.py), so that a stop raised by the owner's handler finds the server owned; the
JVM unblocks them in its own threads and still exits on SIGTERM (status 143).

The session timeouts it grants are bounded by `minSessionTimeout`/`maxSessionTimeout`, set wide
(1 s .. 60 s) so tests can ask for short sessions and brokers for Kafka's 18 s default.

Callers: tests (cluster fixtures), and the local cluster launcher. Not used by the broker itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from odradek.testing import stop_signals
from odradek.testing.broker import free_port
from odradek.testing.parent_death import die_with_owner

DEBIAN_CLASSPATH = "/usr/share/java/zookeeper.jar"
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_POLL_INTERVAL_S = 0.1


class ZooKeeperStartError(RuntimeError):
    """The server exited or did not answer in time; the message carries its output tail."""


def zookeeper_classpath() -> str | None:
    """The classpath of the ZooKeeper server to run, or None when neither Java nor ZooKeeper is here."""
    classpath = os.environ.get("ODRADEK_ZOOKEEPER_CLASSPATH") or DEBIAN_CLASSPATH
    if shutil.which("java") is None or not all(Path(p).exists() for p in classpath.split(":") if p):
        return None
    return classpath


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word and return the answer ('' when the server is not there)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper server on `host:port` with its data in `data_dir`."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        die_with_owner: bool = False,
    ):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.die_with_owner = die_with_owner
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """What `zookeeper.connect` should say (without a chroot)."""
        return f"{self.host}:{self.port}"

    @property
    def output_path(self) -> Path:
        return self.data_dir / "zookeeper.out"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("ZooKeeper is not running")
        return self._process.pid

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,stat,srvr",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout_s: float = 30.0) -> ZooKeeperServer:
        classpath = zookeeper_classpath()
        if classpath is None:
            raise ZooKeeperStartError(
                "no ZooKeeper server here: install Debian's zookeeper package "
                f"({DEBIAN_CLASSPATH}) and Java, or set ODRADEK_ZOOKEEPER_CLASSPATH"
            )
        config = self._write_config()
        argv = ["java", "-Xmx256m", f"-Dzookeeper.log.dir={self.data_dir}", "-cp", classpath, _MAIN_CLASS]
        with open(self.output_path, "ab") as out, stop_signals.held():
            self._process = subprocess.Popen(
                [*argv, str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                process_group=0,
                preexec_fn=die_with_owner() if self.die_with_owner else None,
            )
        deadline = time.monotonic() + timeout_s
        while four_letter_word(self.host, self.port, "ruok") != "imok":
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise ZooKeeperStartError(
                    f"ZooKeeper on {self.connect_string} did not start:\n{self._tail()}"
                )
            time.sleep(_POLL_INTERVAL_S)
        return self

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.output_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM and wait (SIGKILL if it does not exit in time)."""
        self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def _signal_and_wait(self, signum: int, timeout_s: float) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signum)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
