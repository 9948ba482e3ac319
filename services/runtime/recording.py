"""A child process started and its PID recorded as one step, as far as a stop signal goes.

`tessera up` and `tessera demo` turn SIGINT, SIGTERM and SIGHUP into an exception in the main
thread (`services.cli.up.catch_stop_signals`) and then stop every process they recorded. Raised
inside `subprocess.Popen(...)`, after the fork, that exception left a child nobody had recorded:
a service, or a nats-server (in a session of its own) running for good.

Blocking the signals around the start (`pthread_sigmask`) is not the way: a child inherits its
parent's signal mask through exec, and a service started with SIGTERM blocked never sees the
stop. So a handler asks `deferred(signum)` first; a signal that comes while a process is being
started and recorded is kept and handed to its handler once the process is recorded.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0
_pending: list[int] = []


def deferred(signum: int) -> bool:
    """For a stop signal's handler: True while a process is being started and recorded (the
    signal is kept and handled when that is done), False when it may act now."""
    if _depth:
        _pending.append(signum)
        return True
    return False


@contextmanager
def recording() -> Iterator[None]:
    """Around `Popen(...)` and the line that records the process where `stop()` looks."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending:
            signum = _pending[0]
            _pending.clear()
            handler = signal.getsignal(signum)
            if callable(handler):  # what it would have done had it come a moment later
                handler(signum, None)
