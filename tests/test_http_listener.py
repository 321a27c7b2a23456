"""The HTTP listener on its own: a page whose building fails answers 500 and logs, never an empty reply."""

from __future__ import annotations

import asyncio
import logging
import urllib.error
import urllib.request
from http import HTTPStatus

from odradek.http_listener import HttpListener, Response


async def _broken(query: dict[str, str]) -> Response:
    raise TypeError("a collector failed")


async def _fine(query: dict[str, str]) -> Response:
    return HTTPStatus.OK, "text/plain", b"fine\n"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read()


async def _serve_and_get(paths: list[str]) -> list[tuple[int, bytes]]:
    listener = HttpListener({"/broken": _broken, "/fine": _fine})
    await listener.bind([("127.0.0.1", 0)])
    await listener.serve()
    host, port = listener.addresses[0]
    try:
        return [await asyncio.to_thread(_get, f"http://{host}:{port}{path}") for path in paths]
    finally:
        await listener.close()


def test_a_failing_page_answers_500_with_a_log_line_and_the_listener_goes_on(caplog):
    with caplog.at_level(logging.ERROR, logger="odradek.http_listener"):
        broken, fine = asyncio.run(_serve_and_get(["/broken", "/fine"]))
    assert broken[0] == 500 and b"internal error" in broken[1]
    assert fine == (200, b"fine\n")
    assert "GET /broken failed" in caplog.text and "a collector failed" in caplog.text
