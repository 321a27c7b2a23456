"""The console's metric charts: the last hour of the hosting broker's own metrics (metrics_history.py).

Routes: `/charts` (the page: uPlot charts drawn by static/charts.js) and `/charts/data` (the history as
JSON: shared timestamps and each chart's series, which the page fetches at load and every sampling
interval, 1 s at the most often). The history is sampled on the event loop every
`console.metrics.sample.ms` (ConsoleSettings.metrics_sample_ms) from the console's start (aiohttp's
`on_startup`, a scheduler job) to its cleanup. `odradek console` has no broker registry: the page says
so and `/charts/data` answers 404.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from aiohttp import web

from odradek.console.metrics_history import MetricsHistory
from odradek.console.web import CONSOLE_KEY, ConsoleServer, page
from odradek.scheduler import Job

routes = web.RouteTableDef()
HISTORY_KEY = web.AppKey("metrics_history", MetricsHistory)
JOB_KEY = web.AppKey("metrics_history_job", Job)
JOB_NAME = "console-metrics-history"
MIN_REFRESH_MS = 1000
NO_REGISTRY = (
    "Charts need the broker-hosted console (a broker's http.listeners): they draw the broker's own "
    "metrics, which this standalone console does not have."
)


def setup(app: web.Application) -> None:
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)


async def _start(app: web.Application) -> None:
    console = app[CONSOLE_KEY]
    assert isinstance(console, ConsoleServer)
    if console.registry is None:
        return
    clock = console.scheduler.clock
    history = MetricsHistory(
        console.registry, console.settings.metrics_sample_ms, clock.monotonic_ms, clock.time_ms
    )
    history.sample()  # the baseline of the rates
    app[HISTORY_KEY] = history
    app[JOB_KEY] = console.scheduler.every(JOB_NAME, history.interval_ms, history.sample)


async def _stop(app: web.Application) -> None:
    job = app.get(JOB_KEY)
    if job is not None:
        console = app[CONSOLE_KEY]
        assert isinstance(console, ConsoleServer)
        await console.scheduler.cancel(job)


@routes.get("/charts")
async def charts(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    history = request.app.get(HISTORY_KEY)
    if history is None:
        return ctx.render("charts/unavailable.html", title="Charts", text=NO_REGISTRY)
    return ctx.render(
        "charts/charts.html",
        title="Charts",
        interval_s=history.interval_ms / 1000,
        refresh_ms=max(history.interval_ms, MIN_REFRESH_MS),
    )


@routes.get("/charts/data")
async def chart_data(request: web.Request) -> web.StreamResponse:
    history = request.app.get(HISTORY_KEY)
    if history is None:
        return web.json_response({"error": NO_REGISTRY}, status=404)
    return web.json_response(history.charts(), headers={"Cache-Control": "no-store"})
