"""Children that do not outlive their owner: `die_with_owner()`, a `preexec_fn` for `subprocess.Popen`
that has Linux SIGKILL the child when its owner dies (prctl PR_SET_PDEATHSIG), kill -9 included,
which no clean-up code of the owner survives to handle.

Invariants: the signal follows the *thread* that started the child, not its process, so an owner
starts such children from its main thread (a child started from a worker thread would die with that
thread). The owner may die between the fork and the prctl: the child then finds that its parent is
no longer the owner and kills itself. Linux only (prctl), as the rest of the local cluster is.

Callers: BrokerProcess and ZooKeeperServer when asked (LocalCluster's `die_with_owner`, which the
`odradek cluster` command sets).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_owner() -> Callable[[], None]:
    """What the child runs between fork and exec; call in the owner (it loads libc there)."""
    owner = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def set_parent_death_signal() -> None:
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != owner:
            os.kill(os.getpid(), signal.SIGKILL)

    return set_parent_death_signal
