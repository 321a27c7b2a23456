"""How the console's templates show values: Jinja filters (`FILTERS`, registered by console/web.py).

Owns the display of record bytes (text when UTF-8, hex otherwise, `null` when absent), times (ISO 8601,
UTC, milliseconds), missing numbers ("-"), warning counts, and the inline SVG chart of a series of
(time, value) samples. Every value from the cluster is escaped: a filter that returns markup escapes
what it embeds.

Callers: console/web.py (registration), the templates.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from markupsafe import Markup, escape

CHART_WIDTH, CHART_HEIGHT = 640, 160


def show_bytes(data: bytes | None) -> Markup:
    """Text when UTF-8, hex otherwise; `null` for a missing key or value."""
    if data is None:
        return Markup("<i>null</i>")
    try:
        return escape(data.decode("utf-8"))
    except UnicodeDecodeError:
        return Markup("<span class='hex'>0x{}</span>").format(data.hex())


def iso_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")


def dash(value: object) -> str:
    """The value, or "-" for None."""
    return "-" if value is None else str(value)


def warn_count(count: int) -> Markup:
    return Markup("<span class='warn'>{}</span>").format(count) if count else Markup("0")


def number(value: float | None) -> str:
    """A float that is a whole number without its ".0"; "-" for None."""
    if value is None:
        return "-"
    return str(int(value)) if value.is_integer() else str(value)


def series_chart(
    history: Sequence[tuple[float, float]], label: str = "lag", element_id: str = "lag-chart"
) -> Markup:
    """An SVG line of (time, value) samples, time left to right, 0 at the bottom."""
    if not history:
        return Markup("<p>No samples yet.</p>")
    start, end = history[0][0], max(history[-1][0], history[0][0] + 1)
    top = max(max(value for _, value in history), 1)
    points = " ".join(
        f"{(t - start) / (end - start) * (CHART_WIDTH - 20) + 10:.1f},"
        f"{CHART_HEIGHT - 10 - value / top * (CHART_HEIGHT - 20):.1f}"
        for t, value in history
    )
    span = f"{int(end - start)} s"
    return Markup(
        "<svg id='{id}' width='{w}' height='{h}' role='img' aria-label='{label} over the last {span}'>"
        "<polyline fill='none' stroke='var(--accent)' stroke-width='2' points='{points}'/>"
        "<text x='12' y='16' font-size='12' fill='currentColor'>max {top}</text>"
        "<text x='12' y='{bottom}' font-size='12' fill='currentColor'>0 ({n} samples over {span})</text>"
        "</svg>"
    ).format(
        id=element_id,
        w=CHART_WIDTH,
        h=CHART_HEIGHT,
        label=label,
        span=span,
        points=points,
        top=number(float(top)),
        bottom=CHART_HEIGHT - 14,
        n=len(history),
    )


def sparkline(history: Sequence[tuple[float, float]], width: int = 160, height: int = 28) -> Markup:
    """A small SVG line of (time, value) samples for a table cell, 0 at the bottom; its title says
    the last and the largest value."""
    if len(history) < 2:
        return Markup("-")
    start, end = history[0][0], max(history[-1][0], history[0][0] + 1)
    top = max(max(value for _, value in history), 1)
    points = " ".join(
        f"{(t - start) / (end - start) * (width - 4) + 2:.1f},{height - 2 - value / top * (height - 4):.1f}"
        for t, value in history
    )
    return Markup(
        "<svg class='sparkline' width='{w}' height='{h}' role='img' aria-label='{label}'>"
        "<title>{label}</title>"
        "<polyline fill='none' stroke='var(--accent)' stroke-width='1.5' points='{points}'/>"
        "</svg>"
    ).format(
        w=width,
        h=height,
        points=points,
        label=f"now {number(float(history[-1][1]))}, at most {number(float(top))}, over {int(end - start)} s",
    )


FILTERS: dict[str, Callable[..., Any]] = {
    "show_bytes": show_bytes,
    "iso_time": iso_time,
    "dash": dash,
    "warn_count": warn_count,
    "number": number,
    "series_chart": series_chart,
    "sparkline": sparkline,
}
