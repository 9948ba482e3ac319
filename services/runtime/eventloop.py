"""Which event loop a service runs on: uvloop where it is installed, asyncio's own otherwise.

Every service is a loop of socket reads and writes (NATS deliveries and acks, API requests and
watches); with the per-message work cut down (issue 29), the loop's own share — scheduling
callbacks, transports, selector wake-ups — was 5-18 % of each service's samples. On uvloop the
five services used ~6 % less CPU for a 500-node / 4,000-pod backlog (three pairs back to back,
10 % against the emulator's CPU in the same runs: benchmarks/results/k8s.md, session 13).
Session 8 had tried it when other costs hid it ("within the noise").

`TESSERA_EVENT_LOOP=asyncio` keeps the standard loop (to rule the loop out when debugging).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
ENV = "TESSERA_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop, unless asked for asyncio's or uvloop is not there (None: the default)."""
    if os.environ.get(ENV, "uvloop") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a platform without uvloop's wheels
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
