"""The lifeline: a service started by `tessera up` ends when the nats-server `up` started is gone.

A service reconnects to NATS forever, which is right when an operator restarts a broker, but it
turns the services of a crashed or killed `up` into orphans that retry against a port nobody
will serve again (issue 13, item 9). `up` knows the broker is its own, so it passes that PID;
the service watches it and stops when it has exited (or the PID now names another process).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from services.runtime.waits import within

log = logging.getLogger(__name__)

#: How often the PID is looked at: an orphan lingers at most this long (plus the stop).
WATCH_PERIOD = 0.5


def identity(pid: int) -> str | None:
    """Something that stays the same for the life of one process, or None if it is gone.

    With /proc: the start time (field 22 of `stat`), so a reused PID reads as a different
    process, and a zombie (state Z: exited, not yet reaped) reads as gone. Elsewhere: whether
    signal 0 can reach it.
    """
    stat = Path(f"/proc/{pid}/stat")
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "alive"
    return None if fields[0] in ("Z", "X") else fields[19]


def alive(pid: int) -> bool:
    return identity(pid) is not None


async def watch(pid: int, stopping: asyncio.Event) -> None:
    """Set `stopping` once process `pid` has ended; return early when the service stops."""
    first = identity(pid)
    while not stopping.is_set():
        if first is None or identity(pid) != first:
            log.warning("nats-server (pid %d) is gone: stopping", pid)
            stopping.set()
            return
        try:
            await within(stopping.wait(), WATCH_PERIOD)
        except TimeoutError:
            pass
