"""Waiting with a time limit, without losing a cancellation.

On Python 3.11 `asyncio.wait_for` returns the inner result when it is cancelled in the same
loop turn as that result arrives: the cancellation is swallowed, and a loop that waits this way
(`while True: wait_for(queue.get(), t)`) goes on forever. `tessera get po -w` hung so after
Ctrl-C (issue 29's suite runs, once in a few). `asyncio.timeout` cancels only its own block and
lets an outside cancellation through, so every timed wait in the services goes through here
(ruff's TID251 keeps `asyncio.wait_for` out of `services/`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """`await awaitable`, or TimeoutError after `timeout` seconds (None: no limit)."""
    async with asyncio.timeout(timeout):
        return await awaitable


async def unless_stopped(awaitable: Awaitable[T], stopping: asyncio.Event) -> bool:
    """`await awaitable` unless `stopping` is set first, which cancels it: True when it ended
    on its own (its exception, if any, raised here). A wait of minutes on something another
    process does (the scheduler's hold for the node agent's listing) must not outlast a stop:
    the service's stop waits for every task, and SIGTERM became SIGKILL ten seconds later."""
    work = asyncio.ensure_future(awaitable)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, stop):
            task.cancel()
        await asyncio.gather(work, stop, return_exceptions=True)
    if work.cancelled():
        return False
    work.result()
    return True
