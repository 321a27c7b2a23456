"""The console's pieces without a browser: how bytes are shown, the lag chart, the lag history window
and the message browser's form."""

from __future__ import annotations

import pytest

from odradek.client import TopicPartition
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


def test_the_lag_history_keeps_the_last_window_of_the_group_and_of_each_partition(monkeypatch):
    history = group_pages.LagHistory()
    clock = iter([0.0, 10.0, group_pages.WINDOW_S + 5.0])
    monkeypatch.setattr(group_pages.time, "time", lambda: next(clock))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    for lag, partitions in ((5, {a: 5}), (7, {a: 3, b: 4}), (9, {b: 9})):
        history.record("g", lag, partitions)
    assert list(history.samples["g"]) == [(10.0, 7), (group_pages.WINDOW_S + 5.0, 9)]
    assert history.latest("g") == 9 and history.latest("other") is None
    # a partition with no sample in the window is dropped; the others keep theirs
    assert history.partitions("g") == {a: [(10.0, 3)], b: [(10.0, 4), (group_pages.WINDOW_S + 5.0, 9)]}


def test_a_partitions_lag_line_says_its_last_and_largest_value():
    assert filters.sparkline([(0.0, 4)]) == "-"  # one sample draws no line
    line = filters.sparkline([(0.0, 4), (30.0, 10), (60.0, 0)])
    assert "class='sparkline'" in line and "<title>now 0, at most 10, over 60 s</title>" in line
    assert "points='2.0,16.4 80.0,2.0 158.0,26.0'" in line


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
