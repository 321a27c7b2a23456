"""Start-up progress of log loading: `LoadProgress`'s periodic and summary lines under a manual
clock, and a LogManager recovering many multi-segment partitions after an unclean shutdown, whose
lines carry the right counts (logs, segments, bytes) and leave out the partitions metadata does not
know."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT
from odradek.storage.config import LogConfig
from odradek.storage.load_progress import LoadProgress
from odradek.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.storage.storage_helpers import batch

LOGGER = "odradek.storage.load_progress"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_line_every_interval_then_one_summary(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    now = [100.0]
    progress = LoadProgress(4, interval_s=2.0, monotonic=lambda: now[0])
    progress.begin()
    now[0] = 101.0
    progress.segment_recovered(3_000_000)
    assert lines(caplog) == []  # within the interval
    now[0] = 102.5
    progress.log_loaded()
    progress.log_left_out([("gone", 0)])
    progress.log_left_out([("gone", 0)])  # counted once
    now[0] = 104.0
    progress.log_loaded(failed=True)
    now[0] = 105.0
    progress.log_loaded()
    progress.log_loaded()  # after the summary: nothing more
    assert lines(caplog) == [
        "Loading logs: 1/4 loaded, 1 segments recovered (3.0 MB) in 2.5 s: 0 logs/s, 1.2 MB/s",
        "Loaded 3 logs (1 failed) in 5000 ms: 1 segments recovered (3.0 MB); 1 logs/s, 0.6 MB/s",
    ]


def test_nothing_found_nothing_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    progress = LoadProgress(0)
    progress.begin()
    progress.log_left_out([("t", 0)])
    assert lines(caplog) == []


def _crashed_logs(root: Path, partitions: int, batches: int) -> LogManager:
    """Logs of `partitions` partitions of `batches` two-record batches, two batches a segment, left
    as after a crash before any flush: no clean shutdown marker, recovery points at 0."""
    logs = LogManager([root], LogConfig(segment_bytes=2 * len(batch(2))), ManualClock())
    for partition in range(partitions):
        target = logs.get_or_create_log("t", partition)
        for _ in range(batches):
            target.append_as_leader(batch(2), 0)
    logs.shutdown()
    (root / CLEAN_SHUTDOWN_FILE).unlink()
    (root / RECOVERY_POINT_CHECKPOINT).unlink()
    return logs


def test_recovery_after_an_unclean_shutdown_reports_logs_segments_and_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _crashed_logs(tmp_path, partitions=24, batches=5)
    segments = sorted(tmp_path.glob("t-*/*.log"))
    assert len(segments) == 24 * 3
    size = sum(path.stat().st_size for path in segments)
    caplog.set_level(logging.INFO, LOGGER)
    logs = LogManager([tmp_path], LogConfig(segment_bytes=2 * len(batch(2))), ManualClock())
    logs.load_progress = LoadProgress(logs.load_progress.found, interval_s=0.0)  # a line per event
    expected = [("t", p) for p in range(20)]  # t-20..t-23 are not in metadata: never loaded
    assert logs.report_unknown(expected) == [("t", p) for p in range(20, 24)]
    assert len(list(logs.load_logs(expected, threads=3))) == 20
    logs.shutdown()

    *periodic, summary = lines(caplog)
    assert summary.startswith("Loaded 20 logs in ")
    assert f": 60 segments recovered ({size * 20 // 24 / 1000:.1f} kB); " in summary
    counts = [line.split(" loaded")[0].removeprefix("Loading logs: ") for line in periodic]
    assert counts[-1] == "19/20" and all(count.endswith("/20") for count in counts)
    assert len(periodic) == 20 + 60 - 1  # a line per recovered segment and per loaded log but the last
    assert [int(c.split("/")[0]) for c in counts] == sorted(int(c.split("/")[0]) for c in counts)


def test_a_clean_start_recovers_no_segment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    logs = _crashed_logs(tmp_path, partitions=3, batches=3)
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    logs.shutdown()  # nothing loaded: a recovery still owed, so no clean marker
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    list(logs.load_logs([("t", p) for p in range(3)]))
    logs.shutdown()
    logs = LogManager([tmp_path], LogConfig(), ManualClock())
    caplog.set_level(logging.INFO, LOGGER)
    list(logs.load_logs([("t", p) for p in range(3)]))
    logs.shutdown()
    (summary,) = lines(caplog)
    assert summary.startswith("Loaded 3 logs in ") and ": 0 segments recovered (0 B); " in summary
