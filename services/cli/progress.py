"""Progress of long operations (simulate over many cycles, replaying a large log) on stderr.

Only on a terminal: a pipe, a test or CI gets nothing extra, so stdout and stderr stay what
scripts parse. `rich` is imported only then, which keeps every command's start-up as fast as
without it (issue 13, item 15).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Advance = Callable[[int], None]


def _nothing(_done: int) -> None:
    """Where there is no terminal to draw on."""


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Advance]:
    """Yields `advance(done)`; a bar (or, without a total, a counter) while the block runs."""
    if not sys.stderr.isatty():
        yield _nothing
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)
