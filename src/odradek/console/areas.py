"""The console's page modules, and the console server made of them.

Owns `AREAS`, the modules whose routes the console serves (each has `routes`, its RouteTableDef,
and, when it keeps state on the application, `setup(app)`), and `console_server`, which the broker
(server/console_host.py) and `odradek console` build it with.

Callers: server/console_host.py, cli/console.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from odradek.console import (
    acl_pages,
    broker_pages,
    chart_pages,
    cluster_pages,
    group_pages,
    message_pages,
    quota_pages,
    reassignment_pages,
    user_pages,
)
from odradek.console.sessions import ConsoleSettings
from odradek.console.web import ConsoleServer, Handler
from odradek.scheduler import Scheduler

AREAS = (
    cluster_pages,
    broker_pages,
    message_pages,
    group_pages,
    reassignment_pages,
    acl_pages,
    user_pages,
    quota_pages,
    chart_pages,
)


def console_server(
    settings: ConsoleSettings,
    scheduler: Scheduler,
    extra_routes: Mapping[str, Handler] | None = None,
    registry: CollectorRegistry | None = None,
) -> ConsoleServer:
    """The console of `settings`; `registry`: the hosting broker's metrics, for the charts."""
    return ConsoleServer(settings, scheduler, AREAS, extra_routes, registry)
