"""The web console: HTTP routes for the pages, over a `ClusterReader` of one cluster.

Owns the routes (`/`, `/topics`, `/topic?name=`, `/groups`, `/group?id=`, `/messages?topic=
&partition=&offset=|time=&limit=`, `/quotas`) a `HttpListener` serves and the lag history: once a page has
been viewed, a periodic job of the scheduler ("console-lag-sample") samples each group's total lag
every SAMPLE_S and WINDOW_S of samples are kept for the group page's chart (a group page adds a
sample of its own). Every blocking read runs in the scheduler's console lane (one thread: the
reader's client is not thread-safe; the event loop never waits for the cluster). A cluster that cannot be read
answers 502 with the error on the page; a bad form value 400; a topic or group that does not exist 404.

Two hosts, the same pages: the broker serves it at `/` of `http.listeners`, reading itself over its
own listener, and `odradek console --bootstrap-server` serves it for any cluster. Sizes come from
every broker's DescribeLogDirs in both.

Callers: server/kafka_server.py, cli/console.py.
"""

from __future__ import annotations

import collections
import datetime
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, TypeVar

from odradek.client import ConnectionSecurity, TopicPartition
from odradek.console import pages
from odradek.console.reader import ClusterReader
from odradek.http_listener import Response, Route
from odradek.scheduler import Job, Lane, Scheduler

log = logging.getLogger(__name__)

SAMPLE_S = 5.0
WINDOW_S = 600.0
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
HTML = "text/html; charset=utf-8"
T = TypeVar("T")


class FormError(ValueError):
    """A form value the console cannot use."""


class NotFound(LookupError):
    """The topic or group a page names does not exist."""


class Console:
    """The console of one cluster; `routes()` for the HTTP listener, `close()` when done."""

    def __init__(
        self,
        bootstrap: str,
        scheduler: Scheduler,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self._reader = ClusterReader(bootstrap, security=security)
        self._scheduler = scheduler
        self._history: dict[str, collections.deque[tuple[float, int]]] = {}
        self._sampler: Job | None = None

    def routes(self) -> dict[str, Route]:
        pages_by_path: dict[str, Callable[[dict[str, str]], Awaitable[bytes]]] = {
            "/": self._overview,
            "/topics": self._topics,
            "/topic": self._topic,
            "/groups": self._groups,
            "/group": self._group,
            "/messages": self._messages,
            "/quotas": self._quotas,
        }
        return {path: functools.partial(self._page, page) for path, page in pages_by_path.items()}

    async def close(self) -> None:
        sampler, self._sampler = self._sampler, None
        await self._scheduler.cancel(sampler)
        await self._read(self._reader.close)

    async def _page(
        self, page: Callable[[dict[str, str]], Awaitable[bytes]], query: dict[str, str]
    ) -> Response:
        if self._sampler is None:
            self._sampler = self._scheduler.every(
                "console-lag-sample", round(SAMPLE_S * 1000), self._sample, initial_delay_ms=0
            )
        try:
            return HTTPStatus.OK, HTML, await page(query)
        except FormError as exc:
            return _warning(HTTPStatus.BAD_REQUEST, "Bad request", exc)
        except NotFound as exc:
            return _warning(HTTPStatus.NOT_FOUND, "Not found", exc)
        except Exception as exc:
            log.info("Console page failed: %r", exc)
            message = f"<p class='warn'>The cluster could not be read: {pages.escape(repr(exc))}</p>"
            return HTTPStatus.BAD_GATEWAY, HTML, pages.layout("Unavailable", message)

    async def _read(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._scheduler.run(Lane.CONSOLE, functools.partial(call, *args, **kwargs))

    # -- pages ------------------------------------------------------------------------------------

    async def _overview(self, query: dict[str, str]) -> bytes:
        cluster = await self._read(self._reader.cluster, offsets=False)
        groups = await self._read(self._reader.groups)
        return pages.overview_page(cluster, len(groups))

    async def _topics(self, query: dict[str, str]) -> bytes:
        cluster = await self._read(self._reader.cluster)
        return pages.topics_page(cluster, await self._read(self._reader.replica_sizes))

    async def _topic(self, query: dict[str, str]) -> bytes:
        name = query.get("name", "")
        cluster = await self._read(self._reader.cluster)
        topic = next((t for t in cluster.topics if t.name == name), None)
        if topic is None:
            raise NotFound(f"There is no topic named {name!r}.")
        return pages.topic_page(topic, await self._read(self._reader.replica_sizes))

    async def _groups(self, query: dict[str, str]) -> bytes:
        groups = await self._read(self._reader.groups)
        lags = {g.group_id: history[-1][1] for g in groups if (history := self._history.get(g.group_id))}
        return pages.groups_page(groups, lags)

    async def _group(self, query: dict[str, str]) -> bytes:
        group_id = query.get("id", "")
        if not group_id:
            raise FormError("a group id is needed: /group?id=<group id>")
        report = await self._read(self._reader.group, group_id)
        if report.state == "Dead" and not report.members and not report.committed:
            raise NotFound(f"There is no consumer group named {group_id!r}.")
        self._record(group_id, _total_lag(report))
        return pages.group_page(group_id, report, list(self._history[group_id]))

    async def _messages(self, query: dict[str, str]) -> bytes:
        if not query.get("topic"):
            return pages.messages_page(query, None, None)
        tp, offset, timestamp, limit = _browse_form(query)
        messages = await self._read(
            self._reader.messages, tp, offset=offset, timestamp=timestamp, limit=limit
        )
        return pages.messages_page(query, messages, None)

    async def _quotas(self, query: dict[str, str]) -> bytes:
        return pages.quotas_page(await self._read(self._reader.quotas))

    # -- lag history ------------------------------------------------------------------------------

    async def _sample(self) -> None:
        try:
            for group in await self._read(self._reader.groups):
                report = await self._read(self._reader.group, group.group_id)
                self._record(group.group_id, _total_lag(report))
        except Exception as exc:
            log.info("Console lag sample failed: %r", exc)

    def _record(self, group_id: str, lag: int) -> None:
        now = time.time()
        history = self._history.setdefault(group_id, collections.deque())
        history.append((now, lag))
        while history and history[0][0] < now - WINDOW_S:
            history.popleft()


def _warning(status: HTTPStatus, title: str, exc: Exception) -> Response:
    return status, HTML, pages.layout(title, f"<p class='warn'>{pages.escape(str(exc))}</p>")


def _total_lag(report: Any) -> int:
    return sum(row.lag for row in report.rows if row.lag is not None)


def _browse_form(query: dict[str, str]) -> tuple[TopicPartition, int | None, int | None, int]:
    """(partition, offset, timestamp ms, limit) of the message browser's form."""
    try:
        partition = int(query.get("partition") or 0)
        offset = int(query["offset"]) if query.get("offset") else None
        limit = min(int(query.get("limit") or DEFAULT_LIMIT), MAX_LIMIT)
        timestamp = None
        if offset is None and query.get("time"):
            moment = datetime.datetime.fromisoformat(query["time"])
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            timestamp = int(moment.timestamp() * 1000)
    except ValueError as exc:
        raise FormError(f"bad form value: {exc}") from None
    return TopicPartition(query["topic"], partition), offset, timestamp, limit
