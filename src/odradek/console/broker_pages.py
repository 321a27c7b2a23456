"""The console's broker pages (being built: no routes yet).

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from aiohttp import web


def setup(app: web.Application) -> None:
    """No routes yet."""
