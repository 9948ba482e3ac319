"""Named fault-injection points for crash tests of real processes.

`TESSERA_FAULT=<point>` makes the process SIGKILL itself when it reaches that point, e.g.
`allocator.after-commit` (the batch is durable, the proposal not yet acked). Reached once per
process: the restarted process (without the variable) must finish the job exactly once.
"""

from __future__ import annotations

import os
import signal


def fault_point(name: str) -> None:
    if os.environ.get("TESSERA_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
