"""cancel_and_wait: a task that swallows a cancellation (as Python 3.11's asyncio.wait_for can make
one do) is cancelled again until it stops; a stopped task's failure is not raised."""

from __future__ import annotations

import asyncio

from odradek.tasks import cancel_and_wait


def test_a_task_that_swallows_a_cancellation_is_still_stopped() -> None:
    async def scenario() -> None:
        swallowed = asyncio.Event()

        async def stubborn() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed.set()  # as a wait_for returning its result instead of raising
            await asyncio.Event().wait()  # back to waiting for work, for ever

        async def failing() -> None:
            raise RuntimeError("already failed")

        tasks = [asyncio.create_task(stubborn()), asyncio.create_task(failing())]
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(*tasks, None, retry_s=0.05), 5)
        assert swallowed.is_set() and all(task.done() for task in tasks)

    asyncio.run(scenario())
