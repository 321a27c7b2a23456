"""The console's pieces without a browser: how bytes are shown, the lag chart, the lag history window
and the message browser's form."""

from __future__ import annotations

import pytest

from odradek.client import TopicPartition
from odradek.clock import SYSTEM_CLOCK
from odradek.console import app, pages
from odradek.scheduler import Scheduler


def test_bytes_show_as_text_when_utf8_else_as_hex_and_are_escaped():
    assert pages.show_bytes("é<b>".encode()) == "é&lt;b&gt;"
    assert pages.show_bytes(b"\xff\x00") == "<span class='hex'>0xff00</span>"
    assert pages.show_bytes(None) == "<i>null</i>"


def test_the_lag_chart_spans_its_samples_with_zero_at_the_bottom():
    assert "No samples" in pages.lag_chart([])
    chart = pages.lag_chart([(100.0, 0), (160.0, 10)])
    assert f"points='10.0,{pages.CHART_HEIGHT - 10:.1f} {pages.CHART_WIDTH - 10:.1f},10.0'" in chart
    assert "2 samples over 60 s" in chart


def test_the_lag_history_keeps_the_last_window(monkeypatch):
    console = app.Console("127.0.0.1:1", Scheduler(SYSTEM_CLOCK))
    clock = iter([0.0, 10.0, app.WINDOW_S + 5.0])
    monkeypatch.setattr(app.time, "time", lambda: next(clock))
    for lag in (5, 7, 9):
        console._record("g", lag)
    assert list(console._history["g"]) == [(10.0, 7), (app.WINDOW_S + 5.0, 9)]


def test_the_browse_form_takes_an_offset_or_a_utc_time():
    assert app._browse_form({"topic": "t", "partition": "2", "offset": "7"}) == (
        TopicPartition("t", 2),
        7,
        None,
        50,
    )
    _, offset, timestamp, limit = app._browse_form(
        {"topic": "t", "time": "1970-01-01T00:00:01", "limit": "5000"}
    )
    assert (offset, timestamp, limit) == (None, 1000, app.MAX_LIMIT)
    with pytest.raises(app.FormError):
        app._browse_form({"topic": "t", "offset": "soon"})
