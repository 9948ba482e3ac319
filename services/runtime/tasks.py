"""Stopping background tasks the one way every service does it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_all(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Cancel every task first, then wait for each: cancelling and awaiting one at a time would
    let the later ones run on (and act) while the first winds down."""
    tasks = list(tasks)
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
