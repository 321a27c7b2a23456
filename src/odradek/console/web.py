"""The web console's HTTP server: aiohttp on the caller's event loop, Jinja2 templates, sessions.

Owns the aiohttp application of `http.listeners` (the broker) or `--listen` (`odradek console`):
its sockets (bound first, served once the host is ready), the middlewares every page goes through,
the template environment, the packaged static files (`/static/`: the console's CSS and script and
the front-end libraries vendored from npm, tools/vendor_console_assets.py), the login and logout
pages, and the routes of each page module (`AREAS`). Extra routes (the broker's `/metrics`) are
served beside the console, outside its sessions.

Every console request goes through `guard`:
- a session: the open console's shared one, or the user's from the `odradek_session` cookie; a
  request without one is sent to `/login` (a page) or answered 401 (anything else);
- a change (any method but GET and HEAD) must carry the session's CSRF token (the form field
  `csrf_token` or the `X-CSRF-Token` header that console.js adds to htmx requests), and an `Origin`
  header, when sent, must be this console's: else 403; in read-only mode every change is 403;
- errors become pages: `FormError` 400, `NotFound` 404, a Kafka authorization error 403 (the
  cluster's ACLs refused the session's principal), anything else the cluster raised 502 (logged).
Responses carry a Content-Security-Policy that allows scripts and styles from the console alone.

Page modules use `PageContext` (`page(request)`): `run(call, *args)` runs a blocking
`call(reader, *args)` of the session's `ClusterReader` in the console lane, `render(template, ...)`
renders a template with the session, its CSRF token (`csrf_input`, the hidden field every form
carries) and its flash messages, `attempt(done, call, ...)` runs an action and flashes its outcome,
`flash(kind, text)` and `redirect(path)` for the post/redirect/get of a form; `attempt_redirect`
(an action, then where to go as it succeeded or not) and `not_done` (a warning, then back) join them.
`required(values, name, needed)` reads a form or query field that may not be empty.

Callers: server/kafka_server.py, cli/console.py.
"""

from __future__ import annotations

import hmac
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import jinja2
from aiohttp import web
from markupsafe import Markup
from prometheus_client import CollectorRegistry

from odradek.console.filters import FILTERS
from odradek.console.sessions import ConsoleSettings, Session, SessionStore
from odradek.protocol.errors import KafkaError
from odradek.scheduler import Job, Scheduler

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "odradek_session"
CSRF_FIELD, CSRF_HEADER = "csrf_token", "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PREFIXES = ("/static/", "/login")
EXPIRY_INTERVAL_MS = 60_000
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)
CONSOLE_KEY = web.AppKey("console", object)


class FormError(ValueError):
    """A form value the console cannot use (400)."""


class NotFound(LookupError):
    """The topic, group or other thing a page names does not exist (404)."""


@dataclass(frozen=True)
class Nav:
    path: str
    title: str


NAV = (
    Nav("/", "Cluster"),
    Nav("/brokers", "Brokers"),
    Nav("/topics", "Topics"),
    Nav("/messages", "Messages"),
    Nav("/groups", "Consumer groups"),
    Nav("/reassignments", "Reassignments"),
    Nav("/acls", "ACLs"),
    Nav("/users", "Users"),
    Nav("/quotas", "Quotas"),
    Nav("/charts", "Charts"),
)


class ConsoleServer:
    """The console's aiohttp application and sockets; see the module docstring."""

    def __init__(
        self,
        settings: ConsoleSettings,
        scheduler: Scheduler,
        areas: tuple[ModuleType, ...] = (),
        extra_routes: Mapping[str, Handler] | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.scheduler = scheduler
        self.registry = registry  # the hosting broker's metrics (None in `odradek console`)
        self.sessions = SessionStore(settings, scheduler)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("odradek.console", "templates"),
            autoescape=jinja2.select_autoescape(["html"]),
            undefined=jinja2.StrictUndefined,
        )
        self._extra = dict(extra_routes or {})
        self.app = web.Application(middlewares=[self._guard], client_max_size=1 << 20)
        self.app[CONSOLE_KEY] = self
        self.app.router.add_static("/static/", STATIC, append_version=True, name="static")
        self.templates.globals["static"] = self._static_url
        self.templates.filters.update(FILTERS)
        self.app.router.add_get("/login", _login_page)
        self.app.router.add_post("/login", _login)
        self.app.router.add_post("/logout", _logout)
        for path, handler in self._extra.items():
            self.app.router.add_get(path, handler)
        for area in areas:
            self.app.router.add_routes(area.routes)
            if hasattr(area, "setup"):
                area.setup(self.app)
        self._runner: web.AppRunner | None = None
        self._sockets: list[tuple[socket.socket, ssl.SSLContext | None]] = []
        self._expiry: Job | None = None

    def _static_url(self, name: str) -> str:
        """A static file's path with its content's hash (so a browser never keeps a stale copy)."""
        return str(self.app.router["static"].url_for(filename=name))

    # -- sockets -----------------------------------------------------------------------------------

    def bind(self, endpoints: list[tuple[str, int]], ssl_context: ssl.SSLContext | None = None) -> None:
        """Bind every endpoint now (port 0: any free port), HTTPS with `ssl_context`; nothing is
        served before `serve()`."""
        for host, port in endpoints:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                sock.close()
                self._close_sockets()
                raise
            sock.listen(128)
            sock.setblocking(False)
            self._sockets.append((sock, ssl_context))

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [sock.getsockname()[:2] for sock, _ in self._sockets]

    @property
    def urls(self) -> list[str]:
        """Where the console is served, as `http(s)://host:port`."""
        return [
            f"{'https' if tls else 'http'}://{_host(sock.getsockname()[0])}:{sock.getsockname()[1]}"
            for sock, tls in self._sockets
        ]

    async def serve(self) -> None:
        self._runner = web.AppRunner(self.app, handle_signals=False, access_log=None)
        await self._runner.setup()
        for sock, tls in self._sockets:
            await web.SockSite(self._runner, sock, ssl_context=tls).start()
        if not self.sessions.open:
            self._expiry = self.scheduler.every(
                "console-session-expiry", EXPIRY_INTERVAL_MS, self.sessions.expire
            )

    async def close(self) -> None:
        await self.scheduler.cancel(self._expiry)
        if self._runner is not None:
            await self._runner.cleanup()
        self._close_sockets()
        await self.sessions.close()

    def _close_sockets(self) -> None:
        for sock, _ in self._sockets:
            sock.close()
        self._sockets = []

    # -- every request -----------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in self._extra:
            return await handler(request)
        response = await self._guarded(request, handler)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC_PREFIXES):
            if request.method not in SAFE_METHODS and not _same_origin(request):
                return self.problem(request, 403, "Forbidden", "The request came from another site.")
            return await handler(request)
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            if request.method == "GET" and "HX-Request" not in request.headers:
                raise web.HTTPSeeOther(f"/login?next={request.path_qs}")
            return self.problem(request, 401, "Login needed", "Your session expired: log in again.")
        request["session"] = session
        if request.method not in SAFE_METHODS:
            refusal = await self._refusal(request, session)
            if refusal:
                return self.problem(request, 403, "Forbidden", refusal)
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except FormError as exc:
            return self.problem(request, 400, "Bad request", str(exc))
        except NotFound as exc:
            return self.problem(request, 404, "Not found", str(exc))
        except KafkaError as exc:
            if "AUTHORIZATION_FAILED" in exc.code.name:
                return self.problem(
                    request, 403, "Not allowed", f"{session.principal} may not do this: {exc}"
                )
            log.info("Console request %s failed: %r", request.path, exc)
            return self.problem(request, 502, "Unavailable", f"The cluster answered: {exc!r}")
        except (ConnectionError, TimeoutError) as exc:
            log.info("Console request %s failed: %r", request.path, exc)
            return self.problem(request, 502, "Unavailable", f"The cluster could not be read: {exc!r}")

    async def _refusal(self, request: web.Request, session: Session) -> str:
        """Why a change must be refused, or "" when it may go on."""
        if self.settings.effective_read_only and request.path != "/logout":
            return "This console is read-only."
        if not _same_origin(request):
            return "The request came from another site."
        token = request.headers.get(CSRF_HEADER)
        if token is None:
            token = str((await request.post()).get(CSRF_FIELD, ""))
        if not hmac.compare_digest(token.encode(), session.csrf_token.encode()):
            return "The form is stale or did not come from this console: load the page again."
        return ""

    # -- rendering ---------------------------------------------------------------------------------

    def render(self, request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
        session: Session | None = request.get("session")
        body = self.templates.get_template(template).render(
            nav=NAV,
            path=request.path,
            session=session,
            csrf_token=session.csrf_token if session else "",
            csrf_field=CSRF_FIELD,
            csrf_input=Markup('<input type="hidden" name="{}" value="{}">').format(
                CSRF_FIELD, session.csrf_token if session else ""
            ),
            flashes=session.take_flashes() if session else [],
            read_only=self.settings.effective_read_only,
            login=self.settings.login is not None,
            **context,
        )
        return web.Response(status=status, text=body, content_type="text/html", charset="utf-8")

    def problem(self, request: web.Request, status: int, title: str, text: str) -> web.Response:
        return self.render(request, "problem.html", status=status, title=title, text=text)


@dataclass(frozen=True)
class PageContext:
    """What a page handler needs of the console for one request."""

    request: web.Request
    console: ConsoleServer
    session: Session

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(reader, *args, **kwargs)` with the session's reader, in the console lane."""
        return await self.console.sessions.run(self.session.reader, call, *args, **kwargs)

    def render(self, template: str, status: int = 200, **context: Any) -> web.Response:
        return self.console.render(self.request, template, status, **context)

    def fragment(self, template: str, **context: Any) -> web.Response:
        """A part of a page for htmx to swap in: `context` alone (the session's flash messages stay
        for the next whole page)."""
        body = self.console.templates.get_template(template).render(**context)
        return web.Response(text=body, content_type="text/html", charset="utf-8")

    def flash(self, kind: str, text: str) -> None:
        self.session.flash(kind, text)

    async def attempt(self, done: str, call: Callable[..., object], *args: Any, **kwargs: Any) -> bool:
        """Run an action (`call(reader, ...)`, as `run`): flash `done` when it succeeds, or the Kafka
        error that refused it (authorization included), and say which."""
        try:
            await self.run(call, *args, **kwargs)
        except KafkaError as exc:
            self.flash("warn", f"Refused: {exc}")
            return False
        self.flash("ok", done)
        return True

    def redirect(self, path: str) -> web.HTTPSeeOther:
        """The answer to a form once it acted: raise it (post/redirect/get)."""
        return web.HTTPSeeOther(path)

    async def attempt_redirect(
        self, done: str, call: Callable[..., object], *args: Any, success: str, failure: str
    ) -> web.HTTPSeeOther:
        """`attempt` an action, then the redirect to `success` or to `failure` as it went: raise it."""
        return self.redirect(success if await self.attempt(done, call, *args) else failure)

    def not_done(self, why: str, path: str) -> web.HTTPSeeOther:
        """Flash `why` a form's action was not done (a warning), then the redirect to `path`: raise it."""
        self.flash("warn", why)
        return self.redirect(path)

    @property
    def read_only(self) -> bool:
        return self.console.settings.effective_read_only


def required(values: Mapping[str, object], name: str, needed: str, strip: bool = False) -> str:
    """A form's or query's field `name` as text (`strip`: without surrounding white space);
    FormError(`needed`) when it is empty."""
    text = str(values.get(name, ""))
    text = text.strip() if strip else text
    if not text:
        raise FormError(needed)
    return text


def page(request: web.Request) -> PageContext:
    return PageContext(request, console_of(request), request["session"])


def console_of(request: web.Request) -> ConsoleServer:
    console = request.app[CONSOLE_KEY]
    assert isinstance(console, ConsoleServer)
    return console


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host


# -- login and logout ------------------------------------------------------------------------------


async def _login_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    if console.sessions.open:
        raise web.HTTPSeeOther("/")
    return _login_form(request, console, 200, _next(request), failed=False)


async def _login(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    if console.sessions.open:
        raise web.HTTPSeeOther("/")
    form = await request.post()
    session = await console.sessions.login(str(form.get("username", "")), str(form.get("password", "")))
    if session is None:
        return _login_form(request, console, 401, _next(request, form.get("next")), failed=True)
    response = web.HTTPSeeOther(_next(request, form.get("next")))
    response.set_cookie(
        COOKIE, session.id, httponly=True, samesite="Strict", secure=console.settings.secure_cookies, path="/"
    )
    raise response


def _login_form(
    request: web.Request, console: ConsoleServer, status: int, next_path: str, failed: bool
) -> web.Response:
    return console.render(
        request,
        "login.html",
        status,
        title="Log in",
        next=next_path,
        failed=failed,
        mechanism=console.settings.login_mechanism,
    )


async def _logout(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    session: Session = request["session"]
    console.sessions.logout(session)
    response = web.HTTPSeeOther("/login" if not console.sessions.open else "/")
    response.del_cookie(COOKIE, path="/")
    raise response


def _next(request: web.Request, value: object = None) -> str:
    """Where to go after logging in: a path of this console only (never another site)."""
    target = str(value if value is not None else request.query.get("next", "/"))
    return target if target.startswith("/") and not target.startswith("//") else "/"
