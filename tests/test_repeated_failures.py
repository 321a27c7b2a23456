"""RepeatedFailures: a failure that repeats is logged once, again when its message changes, and its
end once; keys fail and recover independently."""

from __future__ import annotations

import logging

import pytest

from odradek.repeated_failures import RepeatedFailures

log = logging.getLogger("tests.repeated_failures")


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == log.name]


def test_a_repeated_failure_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    failures = RepeatedFailures(log)
    assert not failures
    failures.succeeded("a", "a works")  # never failed: nothing to say
    for _ in range(100):
        failures.failed("a", "a fails: %s", "disk full")
    assert failures
    failures.failed("a", "a fails: %s", "read-only")
    failures.failed("b", "b fails: %s", "disk full")
    failures.succeeded("a", "a works again")
    failures.succeeded("a", "a works again")
    assert failures  # b still fails
    failures.succeeded("b", "b works again")
    assert not failures
    assert lines(caplog) == [
        (logging.WARNING, "a fails: disk full"),
        (logging.WARNING, "a fails: read-only"),
        (logging.WARNING, "b fails: disk full"),
        (logging.INFO, "a works again"),
        (logging.INFO, "b works again"),
    ]


def test_a_forgotten_failure_ends_without_a_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    failures = RepeatedFailures(log)
    assert not failures.forget("a")  # never failed
    failures.failed("a", "a fails: %s", "disk full")
    assert failures.forget("a") and not failures
    failures.failed("a", "a fails: %s", "disk full")  # a new failure: logged again
    assert lines(caplog) == [
        (logging.WARNING, "a fails: disk full"),
        (logging.WARNING, "a fails: disk full"),
    ]
