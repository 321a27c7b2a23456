"""The message of an exit-status assertion (tests/exit_report.py): a finished process's stderr and
the last lines of the output files named, each under a heading."""

from __future__ import annotations

import subprocess
import sys

from tests.exit_report import exit_report


def test_a_finished_process_is_reported_with_its_stderr_and_the_outputs_last_lines(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.exit('went wrong')"], capture_output=True, text=True
    )
    output = tmp_path / "broker-1.out"
    output.write_text("".join(f"line {i}\n" for i in range(50)))
    report = exit_report(done, output, tmp_path / "absent.out", lines=3)
    assert report.splitlines() == [
        "--- stderr:",
        "went wrong",
        f"--- {output} (last 3 lines):",
        "line 47",
        "line 48",
        "line 49",
        f"--- {tmp_path / 'absent.out'} (last 3 lines):",
        report.splitlines()[-1],
    ]
    assert report.splitlines()[-1].startswith("(unreadable: ")


def test_stderr_not_captured_bytes_and_none():
    assert exit_report(subprocess.CompletedProcess([], 1)) == "--- stderr:\n(not captured)"
    assert exit_report(b"bytes\n") == "--- stderr:\nbytes"
    assert exit_report("") == "--- stderr:\n(empty)"
