"""The stop signals (SIGTERM, SIGINT) held back while an owner spawns a child: `held()` blocks them
in the spawning thread for the spawn, so that

- an owner whose handler raises (`odradek cluster` raises its stop from SIGTERM and SIGINT) cannot
  have that exception land inside `subprocess.Popen`, after the fork and before Popen returned the
  child, which nobody would then own or stop: the handler runs once the block ends, with the child
  assigned;
- the child inherits the block across exec, so a stop sent to it before it handles the signal waits
  for it instead of killing it by the default action: `odradek serve` unblocks them once its handler
  is in place (cli/serve.py); ZooKeeper's JVM unblocks them in the threads it starts (the launcher's
  first thread keeps the block and only waits) and exits on SIGTERM with status 143, as before.

A mask is per thread, and the kernel gives a process-directed signal to any thread that does not
block it (pytest-xdist's workers and `odradek cluster` run other threads): CPython then runs the Python
handler in the main thread at its next check, which may be inside Popen. So in the main thread `held()`
also swaps each Python handler of a stop signal for one that only records it, and calls the handler
for each recorded stop once the spawn is done.

Invariants: the hold covers the spawn only. SIGHUP, which `odradek cluster` also treats as a stop, is
not held: a child started with it blocked would ignore a hangup for good.

Callers: BrokerProcess (the child is `odradek serve`) and ZooKeeperServer (the child is a JVM).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # those `odradek serve` unblocks (cli/serve.py)


@contextmanager
def held() -> Iterator[None]:
    """SIGTERM and SIGINT held back in this thread meanwhile; one that came is handled at the end."""
    came: list[int] = []
    swapped = _record_stops(came) if threading.current_thread() is threading.main_thread() else {}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        for signum, handler in swapped.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


def _record_stops(came: list[int]) -> dict[int, Callable[[int, FrameType | None], Any]]:
    """Each stop signal with a Python handler now only recorded in `came`; the handlers replaced."""
    swapped = {}
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            swapped[signum] = handler
            signal.signal(signum, lambda signum, frame: came.append(signum))
    return swapped
