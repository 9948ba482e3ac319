"""Files generated from the contracts and committed (the JSON schema, the chart's permissions):
one way to rewrite them and one way for `make test` to say they are stale."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, text: str, command: str) -> int:
    """With `--check` on the command line: 1 (naming `command`) when `path` differs from `text`;
    otherwise write it."""
    if "--check" in sys.argv:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is stale: run `{command}`", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0
