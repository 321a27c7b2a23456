"""A TCP proxy that tests put between two processes to cut, stall and delay the connections between them.

This kernel has no netem, so delay and loss between brokers, and between a broker and ZooKeeper, go
through this proxy instead: the broker is told to connect to the proxy's loopback port, and the proxy
forwards every accepted connection to the real target.

Faults, all changeable while connections are open:
- `cut()`: close every open connection and refuse new ones (accept, then close at once), as a
  partition does to a TCP client; `heal()` lets new connections through again;
- `stall()`: keep connections open but forward nothing either way (a silent partition: the peers'
  timeouts must notice); `heal()` resumes forwarding what was held;
- `delay_ms`: hold each chunk this long before forwarding it (one-way latency, per direction).

`forwarded` counts the connections let through and `refused` those a cut closed, so a test can tell
when and how often a peer dialled again.

Owns one listening socket on 127.0.0.1 and a thread per direction per connection; everything stops
with `close()`. Traffic never leaves loopback.

Callers: cluster and fault tests. Not used by the broker itself.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType

_CHUNK = 64 * 1024
_POLL_S = 0.05


class FaultProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port`, with faults on demand."""

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(_POLL_S)
        self.port = self._listener.getsockname()[1]
        self.delay_ms = 0
        self.forwarded = 0  # connections let through so far
        self.refused = 0  # connections closed at once because of a cut
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept_loop)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- faults -----------------------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every open connection and refuse new ones until `heal()`."""
        with self._lock:
            self._cut = True
            doomed, self._open = self._open, set()
        for sock in doomed:
            _close(sock)

    def stall(self) -> None:
        """Forward nothing (connections stay open) until `heal()`."""
        self._flowing.clear()

    def heal(self) -> None:
        with self._lock:
            self._cut = False
        self._flowing.set()

    # -- forwarding -------------------------------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._connect(client)

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client)
            return
        with self._lock:
            refused = self._cut  # checked once both ends are open: a cut meanwhile applies too
            if not refused:
                self._open.update((client, upstream))
                self.forwarded += 1
        if refused:
            self.refused += 1
            _close(client)
            _close(upstream)
            return
        self._spawn(self._pump, client, upstream)
        self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            source.settimeout(_POLL_S)  # raises when a cut closed the socket before this thread ran
            while not self._closed.is_set():
                try:
                    chunk = source.recv(_CHUNK)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                self._hold(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            self._forget(source, sink)

    def _hold(self, chunk: bytes) -> None:
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        while not self._flowing.wait(_POLL_S):
            if self._closed.is_set():
                raise OSError("proxy closed")

    def _forget(self, *socks: socket.socket) -> None:
        with self._lock:
            for sock in socks:
                self._open.discard(sock)
        for sock in socks:
            _close(sock)

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        _close(self._listener)
        self.cut()
        for thread in self._threads:
            thread.join(timeout=2)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
