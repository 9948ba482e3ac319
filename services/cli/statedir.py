"""Where a Tessera's state directory (`up.json`, logs, the embedded NATS store) is: one rule.

`tessera up` writes its state in one directory and every later command (`get`, `apply`,
`down`, …) must find that directory again, typed from wherever the user stands (issue 26,
item 9). Git's way of finding `.git` is what people expect, so:

1. `--state-dir` (the caller passes it; it always wins),
2. `TESSERA_STATE_DIR` (`TESSERA_HOME`, its older name, still read),
3. to find a running system: the nearest `.tessera` directory from the current one up to the
   root; to start one: `./.tessera`, as `up` always did,
4. else a user-level default, `$XDG_STATE_HOME/tessera` (`~/.local/state/tessera`), the XDG
   base-directory place for state that outlives a run.

Both halves take the environment and the current directory as arguments so that a test can
pin them; the defaults read the process's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV = "TESSERA_STATE_DIR"
LEGACY_ENV = "TESSERA_HOME"
NAME = ".tessera"

HELP = (f"where the state file, logs and embedded NATS store live (default: ${ENV}, else the "
        f"nearest {NAME} up from here, else $XDG_STATE_HOME/tessera)")  # fmt: skip
UP_HELP = f"where to keep the state file, logs and embedded NATS store (default: ${ENV}, else ./{NAME})"


def _named(env: Mapping[str, str]) -> Path | None:
    value = env.get(ENV) or env.get(LEGACY_ENV)
    return Path(value).expanduser() if value else None


def user_default(env: Mapping[str, str] | None = None) -> Path:
    """The XDG state home's `tessera`: a relative XDG_STATE_HOME is invalid by the spec."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "tessera"


def find(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The state directory of the system a command talks to (see the module's rule)."""
    env = os.environ if env is None else env
    if (named := _named(env)) is not None:
        return named
    here = (cwd or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / NAME).is_dir():
            return directory / NAME
    return user_default(env)


def for_up(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """Where a new `tessera up` keeps its state: not searched for, since an `up` in a
    subdirectory of a project that already runs one is a second system, not the same."""
    env = os.environ if env is None else env
    named = _named(env)
    return named if named is not None else (cwd or Path(".")) / NAME
