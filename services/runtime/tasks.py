"""Stopping background tasks the one way every service does it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_all(tasks: Iterable[asyncio.Task[object]], patience: float = 0.5) -> None:
    """Cancel every task first, then wait for them: cancelling and awaiting one at a time would
    let the later ones run on (and act) while the first winds down. A task still running after
    `patience` s is cancelled again: on Python 3.11 a cancellation arriving as an inner
    `wait_for` times out is swallowed (only TimeoutError is seen), and a reader that catches
    that to read again never stopped — a scheduler that would not shut down, once in a few runs
    of a test (issue 29, with the faster consumer). The services' own timed waits now go
    through `waits.within`, which lets the cancellation through; libraries' (nats-py's) still
    use `wait_for`, hence the second cancellation."""
    tasks = list(tasks)
    pending = [t for t in tasks if not t.done()]
    while pending:
        for t in pending:
            t.cancel()
        await asyncio.wait(pending, timeout=patience)
        pending = [t for t in pending if not t.done()]
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
