"""The console's message browser (`/messages?topic=&partition=&offset=|time=&limit=`): one
partition's records from an offset or from the first at or after a time (ISO 8601, UTC), keys, values
and headers as text when UTF-8, as hex otherwise.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import datetime

from aiohttp import web

from odradek.client import TopicPartition
from odradek.console.reader import ClusterReader
from odradek.console.web import FormError, page

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
FIELDS = (
    ("Topic", "topic", 24),
    ("Partition", "partition", 4),
    ("From offset", "offset", 8),
    ("or from time (ISO, UTC)", "time", 20),
    ("Limit", "limit", 4),
)
routes = web.RouteTableDef()


def setup(app: web.Application) -> None:
    app.router.add_routes(routes)


@routes.get("/messages")
async def messages(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = dict(request.query)
    found = None
    if form.get("topic"):
        tp, offset, timestamp, limit = browse_form(form)
        found = await ctx.run(ClusterReader.messages, tp, offset=offset, timestamp=timestamp, limit=limit)
    return ctx.render("messages/browse.html", title="Messages", form=form, fields=FIELDS, messages=found)


def browse_form(query: dict[str, str]) -> tuple[TopicPartition, int | None, int | None, int]:
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
