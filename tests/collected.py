"""Workers that collect different tests (issue 22: "Different tests were collected between gw1
and gw0", 0 tests run): pytest-xdist says only how many each saw; this says which ids differ,
so the cause (an id from a set's order, a file on disk, the clock) can be found from the log."""

from __future__ import annotations

from collections.abc import Sequence


def differing(first: tuple[str, Sequence[str]], other: tuple[str, Sequence[str]]) -> list[str]:
    """Lines naming the ids one worker collected and the other did not, and any order change."""
    (a, ids_a), (b, ids_b) = first, other
    seen_a, seen_b = set(ids_a), set(ids_b)
    only_a = [i for i in ids_a if i not in seen_b]
    only_b = [i for i in ids_b if i not in seen_a]
    lines = [f"collected by {a} only: {i}" for i in only_a]
    lines += [f"collected by {b} only: {i}" for i in only_b]
    if not lines and list(ids_a) != list(ids_b):
        at = next(n for n, (x, y) in enumerate(zip(ids_a, ids_b, strict=True)) if x != y)
        lines.append(f"same ids in another order from #{at}: {a} {ids_a[at]}, {b} {ids_b[at]}")
    return lines
