"""Running the installed `odradek` console script as a user would, for the tool tests.

`run_odradek` runs the script next to the test's Python (where `pip install` puts it in a virtual
environment; else the one on PATH) with the test's environment, so PYTHONPATH decides which source
tree runs; `ok` is a run that must succeed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ENTRY_POINT = shutil.which("odradek", path=str(Path(sys.executable).parent)) or shutil.which("odradek")
TOOL_TIMEOUT_S = 120


def run_odradek(
    *args: str, stdin: str | None = None, timeout: float = TOOL_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """The installed `odradek` entry point run with `args`; never a traceback on stderr."""
    assert ENTRY_POINT is not None, f"no `odradek` console script beside {sys.executable}: pip install -e ."
    done = subprocess.run([ENTRY_POINT, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def ok(*args: str, stdin: str | None = None) -> str:
    """stdout of a run that must succeed."""
    done = run_odradek(*args, stdin=stdin)
    assert done.returncode == 0, f"odradek {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout
