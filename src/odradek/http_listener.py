"""The broker's HTTP listeners (`http.listeners`): a small HTTP/1.1 server on the broker's event loop.

Owns the sockets of `http.listeners` and the HTTP exchange on them: one request per connection
(`Connection: close`), GET or HEAD only, routed by path to a `Route` (a coroutine function taking
the query parameters, the last value of each, and returning the status, content type and body). The
broker routes `/metrics` to the Prometheus text exposition of its registry (prometheus_client's
`generate_latest`) and the web console's pages (odradek/console). Unknown paths answer 404, other
methods 405, a malformed or oversized request 400, a page that fails to build 500 (logged); a
client that sends nothing for REQUEST_TIMEOUT_S is dropped.

Invariants: nothing blocks the loop beyond building a response (a metrics scrape reads the broker's
state, which lives on the loop); request lines and headers are bounded (MAX_HEADER_BYTES).

Like `clock` and `scheduler`, a leaf below every layer (it imports nothing from odradek), so the web
console it serves sits below the broker that hosts it.

Callers: the broker (binds with its Kafka listeners, serves once started, closes first at shutdown)
and `odradek console` (the console on a listener of its own).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
MAX_HEADER_BYTES = 16 * 1024
Response = tuple[HTTPStatus, str, bytes]
Route = Callable[[dict[str, str]], Awaitable[Response]]


class BadRequest(Exception):
    """The request could not be read."""


class HttpListener:
    """Serves `routes` on every bound address until `close()`."""

    def __init__(self, routes: Mapping[str, Route]) -> None:
        self._routes = dict(routes)
        self._servers: list[asyncio.Server] = []

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The bound (host, port) pairs (the port chosen, for a port 0 listener)."""
        return [sock.getsockname()[:2] for server in self._servers for sock in server.sockets]

    async def bind(self, endpoints: list[tuple[str, int]]) -> None:
        """Bind every (host, port) without serving yet; empty host: every interface. Raises OSError."""
        for host, port in endpoints:
            server = await asyncio.start_server(
                self._serve, host or None, port, limit=MAX_HEADER_BYTES, start_serving=False
            )
            self._servers.append(server)

    async def serve(self) -> None:
        for server in self._servers:
            await server.start_serving()

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path = await asyncio.wait_for(_read_request(reader), REQUEST_TIMEOUT_S)
            status, content_type, body = await self._respond_or_fail(method, path)
            writer.write(_head(status, content_type, len(body)) + (b"" if method == "HEAD" else body))
            await writer.drain()
        except BadRequest as exc:
            writer.write(_head(HTTPStatus.BAD_REQUEST, "text/plain", 0))
            log.debug("Bad HTTP request from %s: %s", writer.get_extra_info("peername"), exc)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("HTTP request from %s failed", writer.get_extra_info("peername"))
        finally:
            writer.close()

    async def _respond_or_fail(self, method: str, target: str) -> Response:
        """The page, or 500 with a log line when building it failed: a scraper sees an error, never an
        empty reply."""
        try:
            return await self._respond(method, target)
        except Exception:
            log.exception("HTTP %s %s failed", method, target)
            body = b"internal error, see the broker's log\n"
            return HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", body

    async def _respond(self, method: str, target: str) -> Response:
        url = urlsplit(target)
        route = self._routes.get(url.path)
        if route is None:
            return HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n"
        if method not in ("GET", "HEAD"):
            return HTTPStatus.METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", b"GET or HEAD only\n"
        return await route(dict(parse_qsl(url.query)))


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The method and path of the request line; the headers are read and ignored."""
    try:
        request_line = await reader.readuntil(b"\r\n")
        while (await reader.readuntil(b"\r\n")) != b"\r\n":
            pass
    except asyncio.LimitOverrunError:
        raise BadRequest("request line or header too long") from None
    parts = request_line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise BadRequest(f"malformed request line {request_line[:80]!r}")
    return parts[0], parts[1]


def _head(status: HTTPStatus, content_type: str, length: int) -> bytes:
    return (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
