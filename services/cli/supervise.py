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


#: seconds `get components` waits for a service's /readyz
PROBE_TIMEOUT = 1.0


def readiness(port: int, timeout: float = PROBE_TIMEOUT) -> str:
    """What a running service's `/readyz` says when it is not ready ('' when it is, or when it
    does not answer in time: the state `up` recorded stands then). A service whose API server
    or NATS has been away showed `running` with no error: the supervisor sees processes only."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=timeout):
            return ""
    except urllib.error.HTTPError as exc:  # 503: not ready, and why
        return exc.read().decode(errors="replace").strip() or f"/readyz answered {exc.code}"
    except (OSError, ValueError):
        return ""


def with_readiness(state: dict) -> list[dict]:
    """`state`'s component records, each running service that answers `/readyz` 503 shown
    `unready` with what it said as its LAST_ERROR (a crash's cause kept after it)."""
    ports = state.get("metrics") or {}
    out = []
    for c in state.get("components", []):
        port = ports.get(c.get("name"))
        why = readiness(int(port)) if c.get("state") == "running" and port else ""
        if why:
            before = c.get("last_error") or ""
            c = {**c, "state": "unready", "last_error": why + (f" (before: {before})" if before else "")}
        out.append(c)
    return out
