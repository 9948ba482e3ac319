"""A timed wait cancelled in the very turn its result arrives must still end the task."""

from __future__ import annotations

import asyncio

import pytest

from services.runtime.waits import within


async def test_a_cancellation_that_meets_the_result_is_not_swallowed() -> None:
    # The race of `tessera get po -w` after Ctrl-C: an item arrives and the reader is cancelled
    # before either runs. On 3.11 `wait_for` returns the item there and the reader reads on.
    queue: asyncio.Queue[int] = asyncio.Queue()
    got: list[int] = []

    async def reader() -> None:
        while True:
            got.append(await within(queue.get(), 10.0))

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)  # the reader now waits on the empty queue
    queue.put_nowait(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)
    assert got == [] and queue.qsize() == 1  # not consumed either: nothing lost


async def test_the_limit_still_raises_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)
    assert await within(asyncio.sleep(0, "done"), None) == "done"
