"""The console's consumer group pages: the group list (`/groups`: type, state, total lag) and a
group's page (`/group?id=`: members, assignments, lag per partition and the chart of its total lag).

Owns the lag history: once a group page or the list has been viewed, a periodic job of the scheduler
("console-lag-sample") samples each group's total lag every SAMPLE_S with the console's own reader,
and WINDOW_S of samples are kept per group (a group page adds a sample of its own).

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from aiohttp import web

from odradek.console.reader import ClusterReader
from odradek.console.web import CONSOLE_KEY, FormError, NotFound, console_of, page
from odradek.scheduler import Job, Scheduler

log = logging.getLogger(__name__)

SAMPLE_S = 5.0
WINDOW_S = 600.0
routes = web.RouteTableDef()
HISTORY_KEY = web.AppKey("lag_history", object)


class LagHistory:
    """Each group's (time, total lag) samples over the last WINDOW_S."""

    def __init__(self) -> None:
        self.samples: dict[str, collections.deque[tuple[float, int]]] = {}
        self._job: Job | None = None

    def start(self, scheduler: Scheduler, reader: ClusterReader, run: Any) -> None:
        """Sample every SAMPLE_S from now on (once)."""
        if self._job is None:

            async def sample() -> None:
                try:
                    for group in await run(reader, ClusterReader.groups):
                        self.record(
                            group.group_id, total_lag(await run(reader, ClusterReader.group, group.group_id))
                        )
                except Exception as exc:
                    log.info("Console lag sample failed: %r", exc)

            self._job = scheduler.every(
                "console-lag-sample", round(SAMPLE_S * 1000), sample, initial_delay_ms=0
            )

    def record(self, group_id: str, lag: int) -> None:
        now = time.time()
        history = self.samples.setdefault(group_id, collections.deque())
        history.append((now, lag))
        while history and history[0][0] < now - WINDOW_S:
            history.popleft()

    def latest(self, group_id: str) -> int | None:
        history = self.samples.get(group_id)
        return history[-1][1] if history else None

    async def stop(self, scheduler: Scheduler) -> None:
        await scheduler.cancel(self._job)


def setup(app: web.Application) -> None:
    app.router.add_routes(routes)
    app[HISTORY_KEY] = LagHistory()

    async def stop(app: web.Application) -> None:
        history = app[HISTORY_KEY]
        assert isinstance(history, LagHistory)
        await history.stop(app[CONSOLE_KEY].scheduler)  # type: ignore[attr-defined]

    app.on_cleanup.append(stop)


def total_lag(report: Any) -> int:
    return sum(row.lag for row in report.rows if row.lag is not None)


def _history(request: web.Request) -> LagHistory:
    history = request.app[HISTORY_KEY]
    assert isinstance(history, LagHistory)
    console = console_of(request)
    history.start(console.scheduler, console.sessions.service, console.sessions.run)
    return history


@routes.get("/groups")
async def groups(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    history = _history(request)
    listed = await ctx.run(ClusterReader.groups)
    lags = {g.group_id: history.latest(g.group_id) for g in listed}
    return ctx.render("groups/list.html", title="Consumer groups", groups=listed, lags=lags)


@routes.get("/group")
async def group(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    group_id = request.query.get("id", "")
    if not group_id:
        raise FormError("a group id is needed: /group?id=<group id>")
    history = _history(request)
    report = await ctx.run(ClusterReader.group, group_id)
    if report.state == "Dead" and not report.members and not report.committed:
        raise NotFound(f"There is no consumer group named {group_id!r}.")
    history.record(group_id, total_lag(report))
    members = sorted(report.members, key=lambda m: m.member_id)
    return ctx.render(
        "groups/group.html",
        title=f"Consumer group {group_id}",
        report=report,
        members=members,
        history=list(history.samples[group_id]),
    )
