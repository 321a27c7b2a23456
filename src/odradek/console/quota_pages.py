"""The console's client quotas page (`/quotas`): one row per quota entity (user, client id;
`<default>` for a default) with its four quotas (DescribeClientQuotas).

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from aiohttp import web

from odradek.console.reader import ClusterReader
from odradek.console.web import page

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
routes = web.RouteTableDef()


def setup(app: web.Application) -> None:
    app.router.add_routes(routes)


@routes.get("/quotas")
async def quotas(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    found = await ctx.run(ClusterReader.quotas)
    return ctx.render("quotas/list.html", title="Client quotas", quotas=found, keys=QUOTA_KEYS)
