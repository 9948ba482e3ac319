"""Supervision of `tessera up`'s processes: restart a crashed one with backoff, give up on one
that keeps failing at once, and say so in `tessera get components`.

A service rebuilds its state from the log at start, so a restart is its recovery; what must not
happen is one kill -9 ending the whole system (as `up` did) or a service staying dead under a
detached `up`. The policy is pure (`on_exit`, `due`): the clock is passed in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: A process that ends within this many seconds of its start failed "quickly".
QUICK = 10.0
#: Quick failures in a row after which it is left down (state `failed`, with the reason).
MAX_QUICK = 5
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 10.0


@dataclass
class Component:
    """One supervised process as `get components` shows it."""

    name: str
    state: str = "starting"  # starting | running | restarting | failed | stopped
    pid: int | None = None
    restarts: int = 0
    last_error: str = ""
    started_at: float = 0.0
    quick_failures: int = 0
    retry_at: float = 0.0

    def record(self) -> dict:
        out = asdict(self)
        for private in ("started_at", "quick_failures", "retry_at"):
            out.pop(private)
        return out


def backoff(quick_failures: int) -> float:
    """0.5 s after the first quick failure, doubling, at most 10 s."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, quick_failures - 1))


def started(c: Component, pid: int, now: float) -> None:
    c.state, c.pid, c.started_at = "running", pid, now


def on_exit(c: Component, cause: str, now: float) -> None:
    """A process ended without being told to: schedule its restart, or give up on it."""
    c.quick_failures = c.quick_failures + 1 if now - c.started_at < QUICK else 1
    c.last_error = cause
    if c.quick_failures >= MAX_QUICK:
        c.state = "failed"
        c.last_error = f"gave up after {c.quick_failures} quick failures: {cause}"
        return
    c.state = "restarting"
    c.retry_at = now + backoff(c.quick_failures)


def due(c: Component, now: float) -> bool:
    return c.state == "restarting" and now >= c.retry_at
