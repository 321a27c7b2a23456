"""Stopping background tasks for good, and answering callers that may have stopped waiting.

Owns `answer`: the result of a future whose caller may have given up (a request handler cancelled
when its connection closed), set only while it waits, so the work that follows the answer (a
controller announcing a change it wrote) is not cut short by an InvalidStateError. And
`cancel_and_wait`, which every owner of background tasks (senders, fetchers, timers, watchers)
uses to stop them: cancel, wait until each is done, and cancel again every `retry_s` while one still
runs. The retry matters on Python 3.11, where `asyncio.wait_for` returns the awaited result when it
completes just as the cancellation arrives: the task swallows that one cancellation, loops back to
wait for more work, and a single `cancel()` followed by `await task` would wait for ever (seen as a
graceful shutdown that hung on a controller-to-broker sender). A stopped task's own failure is not
reported (it was being stopped), the caller's own cancellation still propagates, and the task
calling it is never waited on.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

RETRY_S = 1.0
T = TypeVar("T")


def answer(future: asyncio.Future[T], result: T) -> None:
    """`future.set_result(result)`, unless it is done already (cancelled by a caller gone)."""
    if not future.done():
        future.set_result(result)


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None, retry_s: float = RETRY_S) -> None:
    """Cancel `tasks` (None entries skipped) and return once every one is done."""
    current = asyncio.current_task()
    pending = {task for task in tasks if task is not None and task is not current}
    while pending:
        for task in pending:
            task.cancel()
        done, pending = await asyncio.wait(pending, timeout=retry_s)
        for task in done:
            if not task.cancelled():
                task.exception()  # retrieved, so asyncio does not report it as never retrieved
