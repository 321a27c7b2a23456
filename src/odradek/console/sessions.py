"""Who uses the web console, and as whom it reaches the cluster.

Owns `ConsoleSettings` (the console's configuration, built by the broker or by `odradek console`),
`Session` (one user's: its principal, its CSRF token, its flash messages and its own `ClusterReader`,
connected as that user) and `SessionStore` (login, lookup by cookie, idle expiry, logout).

Two modes:
- open (`login` is None): no login; every visitor shares one session whose reader connects with the
  console's own security (the broker's inter-broker identity, or `odradek console --command-config`);
  read-only unless `read_only` is False.
- login (`login` builds a user's connection security from a user name and password): the user's
  credentials are checked against the cluster itself (a SASL PLAIN or SCRAM authentication on a
  connection of its own), and every read and action of the session goes over that user's connections,
  so the cluster's ACLs decide what each user sees and does. Read-write unless `read_only` is True.

Invariants: a session id and a CSRF token are 32 random bytes (`secrets`); a session idle for
`session_timeout_s` is closed (its connections too) at its next lookup or by `expire()`; passwords are
never kept (the reader's security holds the credentials its connections need). Blocking client calls
run in the scheduler's console lane (one thread), never on the event loop.

The console's own reader (`service`, with the console's own security) serves the open session and
the background jobs (the lag history), which no user's session owns.

Callers: console/web.py.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.client import AuthenticationFailed, ConnectionSecurity
from odradek.console.reader import ClusterReader
from odradek.scheduler import Lane, Scheduler

T = TypeVar("T")
LoginSecurity = Callable[[str, str], ConnectionSecurity]
OPEN_PRINCIPAL = "(open console)"
MAX_FLASHES = 10


@dataclass(frozen=True)
class ConsoleSettings:
    """How the console reaches the cluster and who may use it (see the module docstring)."""

    bootstrap: str  # the console's own connections (the open session's, the background jobs')
    security: ConnectionSecurity | None = None
    login: LoginSecurity | None = None
    login_bootstrap: str = ""  # the users' connections; "": bootstrap
    login_mechanism: str = ""  # named on the login page
    read_only: bool | None = None  # None: read-only when open, read-write with a login
    session_timeout_s: float = 1800.0
    secure_cookies: bool = False  # served over https
    metrics_sample_ms: int = 10_000  # the charts' sampling interval (console.metrics.sample.ms)

    @property
    def effective_read_only(self) -> bool:
        return self.login is None if self.read_only is None else self.read_only


@dataclass(eq=False)
class Session:
    """One user of the console (or every visitor of an open console)."""

    id: str
    principal: str
    reader: ClusterReader
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_seen: float = field(default_factory=time.monotonic)
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind: ok / warn, text)

    def flash(self, kind: str, text: str) -> None:
        self.flashes = [*self.flashes[-(MAX_FLASHES - 1) :], (kind, text)]

    def take_flashes(self) -> list[tuple[str, str]]:
        taken, self.flashes = self.flashes, []
        return taken


class SessionStore:
    """The console's sessions; see the module docstring."""

    def __init__(self, settings: ConsoleSettings, scheduler: Scheduler) -> None:
        self.settings = settings
        self._scheduler = scheduler
        self._sessions: dict[str, Session] = {}
        self._open: Session | None = None
        # the console's own reader (its own security): the open session's, and the background jobs'
        self.service = ClusterReader(settings.bootstrap, security=settings.security)
        if settings.login is None:
            self._open = Session(secrets.token_urlsafe(32), OPEN_PRINCIPAL, self.service)

    @property
    def open(self) -> bool:
        return self._open is not None

    def get(self, session_id: str | None) -> Session | None:
        """The session of a request: the shared one of an open console, else the live session named
        by its cookie (touched), else None."""
        if self._open is not None:
            return self._open
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > self.settings.session_timeout_s:
            self._drop(session)
            return None
        session.last_seen = now
        return session

    async def login(self, username: str, password: str) -> Session | None:
        """A new session for `username` when the cluster accepts the password, else None."""
        if self.settings.login is None or not username or not password:
            return None
        bootstrap = self.settings.login_bootstrap or self.settings.bootstrap
        reader = ClusterReader(bootstrap, security=self.settings.login(username, password))
        try:
            await self.run(reader, ClusterReader.check)
        except AuthenticationFailed:
            await self.run(reader, ClusterReader.close)
            return None
        session = Session(secrets.token_urlsafe(32), f"User:{username}", reader)
        self._sessions[session.id] = session
        return session

    def logout(self, session: Session) -> None:
        if session is not self._open:
            self._drop(session)

    def expire(self) -> None:
        """Close every session idle past the timeout."""
        now = time.monotonic()
        for session in [
            s for s in self._sessions.values() if now - s.last_seen > self.settings.session_timeout_s
        ]:
            self._drop(session)

    def _drop(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
        self._scheduler.lanes.submit(Lane.CONSOLE, session.reader.close)

    async def run(self, reader: ClusterReader, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(reader, *args, **kwargs)` in the console lane."""
        return await self._scheduler.run(Lane.CONSOLE, functools.partial(call, reader, *args, **kwargs))

    async def close(self) -> None:
        readers = [s.reader for s in self._sessions.values()] + [self.service]
        self._sessions.clear()
        for reader in readers:
            await self.run(reader, ClusterReader.close)
