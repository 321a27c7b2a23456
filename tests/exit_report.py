"""Messages for assertions on a subprocess's exit status, so that a failure names its cause the first
time: what the process said on stderr, and the last lines of the output files it or its children
wrote (a broker's `broker-<id>.out`, ZooKeeper's `zookeeper.out`).

`assert done.returncode == 0, exit_report(done)` for a `subprocess.run` result; `exit_report(stderr,
*paths)` for a process whose stderr went to a file or is held elsewhere.
"""

from __future__ import annotations

from pathlib import Path

TAIL_LINES = 30


def exit_report(said: object, *outputs: Path, lines: int = TAIL_LINES) -> str:
    """The stderr of `said` (a finished process such as `subprocess.run`'s, or its stderr text; None:
    only the outputs) and the last `lines` lines of each of `outputs`, each under a heading."""
    stderr = said if isinstance(said, str | bytes) or said is None else getattr(said, "stderr", None)
    parts = [] if stderr is None and outputs else [f"--- stderr:\n{_tail(stderr, lines)}"]
    parts += [f"--- {path} (last {lines} lines):\n{_tail(_read(path), lines)}" for path in outputs]
    return "\n".join(parts)


def _tail(text: str | bytes | None, lines: int) -> str:
    if text is None:
        return "(not captured)"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
