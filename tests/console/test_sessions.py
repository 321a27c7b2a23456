"""Console sessions without a cluster: an idle session expires (at its next lookup and by the periodic
sweep), a used one does not; an open console has one shared session and no logins."""

from __future__ import annotations

import asyncio

from odradek.clock import SYSTEM_CLOCK
from odradek.console import sessions
from odradek.console.reader import ClusterReader
from odradek.console.sessions import ConsoleSettings, Session, SessionStore
from odradek.scheduler import Scheduler


def _store(monkeypatch, now: list[float]) -> SessionStore:
    monkeypatch.setattr(sessions.time, "monotonic", lambda: now[0])
    settings = ConsoleSettings("127.0.0.1:1", login=lambda user, password: None, session_timeout_s=60)  # type: ignore[arg-type,return-value]
    return SessionStore(settings, Scheduler(SYSTEM_CLOCK))


def _session(store: SessionStore, name: str) -> Session:
    session = Session(name, f"User:{name}", ClusterReader("127.0.0.1:1"))
    store._sessions[session.id] = session
    return session


def test_an_idle_session_expires_and_a_used_one_lives_on(monkeypatch):
    now = [1000.0]
    store = _store(monkeypatch, now)
    used = _session(store, "used")
    assert store.get(_session(store, "idle").id) is not None
    now[0] += 45
    assert store.get("used") is used  # touched
    now[0] += 45
    assert store.get("used") is used
    assert store.get("idle") is None and store.get("idle") is None  # 90 s idle: gone
    now[0] += 61
    store.expire()
    assert store.get("used") is None
    assert store.get(None) is None and store.get("never-issued") is None


def test_an_open_console_shares_one_session_and_takes_no_login(monkeypatch):
    store = SessionStore(ConsoleSettings("127.0.0.1:1"), Scheduler(SYSTEM_CLOCK))
    assert store.open and store.settings.effective_read_only
    assert store.get(None) is store.get("anything") is not None
    assert asyncio.run(store.login("alice", "secret")) is None
    assert not ConsoleSettings("b:1", login=lambda u, p: None).effective_read_only  # type: ignore[arg-type,return-value]
    assert ConsoleSettings("b:1", read_only=False).effective_read_only is False


def test_flash_messages_are_bounded_and_taken_once():
    session = Session("s", "User:s", ClusterReader("127.0.0.1:1"))
    for i in range(sessions.MAX_FLASHES + 5):
        session.flash("ok", f"done {i}")
    taken = session.take_flashes()
    assert len(taken) == sessions.MAX_FLASHES and taken[-1] == ("ok", f"done {sessions.MAX_FLASHES + 4}")
    assert session.take_flashes() == []
