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

Invariants: the block covers the spawn only, and only the calling thread's mask (a stop the kernel
gives another thread of the owner meanwhile is handled by the main thread as before). SIGHUP, which
`odradek cluster` also treats as a stop, is not held: a child started with it blocked would ignore a
hangup for good.

Callers: BrokerProcess (the child is `odradek serve`) and ZooKeeperServer (the child is a JVM).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # those `odradek serve` unblocks (cli/serve.py)


@contextmanager
def held() -> Iterator[None]:
    """SIGTERM and SIGINT blocked in this thread meanwhile; one that came is handled at the end."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
