"""The console's pieces without a browser: how bytes are shown, the lag chart, the lag history window
and the message browser's form."""

from __future__ import annotations

import pytest

from odradek.console import filters, group_pages, message_pages
from odradek.console.web import FormError


def test_bytes_show_as_text_when_utf8_else_as_hex_and_are_escaped():
    assert filters.show_bytes("é<b>".encode()) == "é&lt;b&gt;"
    assert filters.show_bytes(b"\xff\x00") == "<span class='hex'>0xff00</span>"
    assert filters.show_bytes(None) == "<i>null</i>"


def test_the_lag_chart_spans_its_samples_with_zero_at_the_bottom():
    assert "No samples" in filters.series_chart([])
    chart = filters.series_chart([(100.0, 0), (160.0, 10)])
    assert f"points='10.0,{filters.CHART_HEIGHT - 10:.1f} {filters.CHART_WIDTH - 10:.1f},10.0'" in chart
    assert "2 samples over 60 s" in chart


def test_the_lag_history_keeps_the_last_window(monkeypatch):
    history = group_pages.LagHistory()
    clock = iter([0.0, 10.0, group_pages.WINDOW_S + 5.0])
    monkeypatch.setattr(group_pages.time, "time", lambda: next(clock))
    for lag in (5, 7, 9):
        history.record("g", lag)
    assert list(history.samples["g"]) == [(10.0, 7), (group_pages.WINDOW_S + 5.0, 9)]
    assert history.latest("g") == 9 and history.latest("other") is None


def test_the_browse_form_takes_an_offset_or_a_utc_time():
    query = message_pages.browse_form({"topic": "t", "partition": "2", "offset": "7"})
    assert (query.topic, query.partition, query.seek, query.offset, query.timestamp, query.limit) == (
        "t",
        2,
        "offset",
        7,
        None,
        50,
    )
    query = message_pages.browse_form({"topic": "t", "time": "1970-01-01T00:00:01", "limit": "5000"})
    assert (query.partition, query.seek, query.offset, query.timestamp, query.limit) == (
        None,
        "time",
        None,
        1000,
        message_pages.MAX_LIMIT,
    )
    with pytest.raises(FormError):
        message_pages.browse_form({"topic": "t", "offset": "soon"})
