"""How the services use Python's cyclic garbage collector (issue 29's profiles).

With the defaults (a young collection every 700 new container objects) a busy service kept
walking its own growing state: every young collection promoted what it found alive, and each
full collection then walked all of it — the scheduler spent 28 % of its CPU there in a
4,000-pod backlog (18 full collections), the other services 6-9 %. A scheduling session is the
other half: it builds the whole cluster's working set (nodes, jobs, tasks, resource vectors,
plugins that point back at the session) and drops it, and collections in the middle of it
walked and promoted all of that to an older generation, to be found garbage there later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: young collections after this many new container objects; cycles are still collected, in
#: fewer passes
THRESHOLDS = (20_000, 20, 10)


def tune() -> None:
    gc.set_threshold(*THRESHOLDS)


def freeze() -> None:
    """What recovery built lives on: later collections need not walk it again."""
    gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """No collection inside a pure computation that only allocates what it drops at the end
    (a session): its garbage is found in one young collection after it, not promoted first."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
