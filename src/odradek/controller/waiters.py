"""Waiting for metadata to reach a state, without polling and without blocking the event loop.

Owns `Waiters` (a notifier: whoever changes state calls `notify()`) and `wait_until(predicate,
timeout_s, *notifiers)`: re-check `predicate` after each notification of any of the notifiers
until it holds or the timeout passes. Many notifications within one turn of the loop cost one
re-check. Used for Kafka's delayed admin operations (CreateTopics, CreatePartitions, DeleteTopics
answering once the metadata cache shows the result) and for auto topic creation.

Invariants: event-loop only; a waiter never misses a notification made after it started waiting.
Callers: the metadata cache and ReplicaManager notify; admin handlers and the broker wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Waiters:
    """A set of parked waiters, each woken by `notify()`."""

    def __init__(self) -> None:
        self._events: set[asyncio.Event] = set()

    def notify(self) -> None:
        for event in self._events:
            event.set()

    def _add(self, event: asyncio.Event) -> None:
        self._events.add(event)

    def _discard(self, event: asyncio.Event) -> None:
        self._events.discard(event)


async def wait_until(predicate: Callable[[], bool], timeout_s: float, *notifiers: Waiters) -> bool:
    """True once `predicate()` holds; False if it still does not after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    event = asyncio.Event()
    for notifier in notifiers:
        notifier._add(event)
    try:
        while True:
            event.clear()
            if predicate():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return predicate()
    finally:
        for notifier in notifiers:
            notifier._discard(event)
