"""A ZooKeeper-mode broker that the current controller has not reached since it registered says so:
one WARNING naming the controller and its epoch once the bound has passed, `silent` (the
/metrics gauge) until a request from that controller is accepted, and nothing before the bound or
while ZooKeeper cannot be read or no controller is elected."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odradek.server.controller_contact import ControllerContact

BOUND_MS = 30_000


class Broker:
    """What the contact reads: ZooKeeper's controller, the control plane's accepted epochs, the
    broker epoch and a clock, all set by the test."""

    def __init__(self) -> None:
        self.controller: tuple[int | None, int | None] = (2, 7)
        self.heard = (-1, -1)  # (controller epoch accepted, broker epoch it was accepted under)
        self.broker_epoch = 100
        self.now_ms = 0
        self.unreadable = False

    async def lookup(self) -> tuple[int | None, int | None]:
        if self.unreadable:
            raise ConnectionError("ZooKeeper unreachable")
        return self.controller

    def contact(self) -> ControllerContact:
        return ControllerContact(
            1,
            self.lookup,
            lambda: self.heard,
            lambda: self.broker_epoch,
            lambda: BOUND_MS,
            lambda: self.now_ms,
        )


def checked(contact: ControllerContact, broker: Broker, at_ms: int) -> bool:
    broker.now_ms = at_ms
    asyncio.run(contact.check())
    return contact.silent


def test_silent_past_the_bound_then_heard(caplog: pytest.LogCaptureFixture) -> None:
    broker = Broker()
    contact = broker.contact()
    with caplog.at_level(logging.WARNING, logger="odradek.server.controller_contact"):
        assert not checked(contact, broker, 0)
        assert not checked(contact, broker, BOUND_MS - 1)
        assert checked(contact, broker, BOUND_MS)
        assert checked(contact, broker, 2 * BOUND_MS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "controller 2 (controller epoch 7)" in warnings[0]
    broker.heard = (7, 100)
    assert not checked(contact, broker, 2 * BOUND_MS + 1)


def test_a_request_from_an_older_registration_or_controller_does_not_count() -> None:
    broker = Broker()
    contact = broker.contact()
    broker.heard = (7, 99)  # accepted before this broker registered again
    assert not checked(contact, broker, 0)
    assert checked(contact, broker, BOUND_MS)
    broker.heard = (6, 100)  # from the controller before the current one
    assert checked(contact, broker, BOUND_MS + 1)


def test_a_new_controller_gets_its_own_bound_and_nothing_is_judged_without_one() -> None:
    broker = Broker()
    contact = broker.contact()
    broker.heard = (7, 100)
    assert not checked(contact, broker, 0)
    broker.controller = (3, 8)  # a failover: controller 3 is owed its requests from now
    assert not checked(contact, broker, 5 * BOUND_MS)
    assert not checked(contact, broker, 6 * BOUND_MS - 1)
    assert checked(contact, broker, 6 * BOUND_MS)
    broker.controller = (None, None)
    fresh = broker.contact()
    assert not checked(fresh, broker, 100 * BOUND_MS)
    broker.unreadable = True
    assert not checked(fresh, broker, 200 * BOUND_MS)


def test_an_unregistered_broker_is_not_judged() -> None:
    broker = Broker()
    broker.broker_epoch = -1
    contact = broker.contact()
    assert not checked(contact, broker, 0)
    assert not checked(contact, broker, 10 * BOUND_MS)
