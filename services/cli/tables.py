"""How `get` and `describe` print rows: a table (rich), JSON or YAML, and amounts as people
write them.

Tables (issue 13, item 15): on a terminal `rich` lays the columns out, the header bold and long
cells folded to the terminal's width; anywhere else (a pipe, `| head`, a file, a test) there is
no colour, no box and no wrapping, so every row is one line that `grep`/`awk` read — kubectl's
plain layout, with widths measured by rich's `cell_len`. rich is imported only when a table is
drawn, so commands that print JSON, or nothing, start as fast as before.

Amounts: the core counts in its own units (`services/core/workload/quantity.py`: CPU in
milli-cores, memory in MiB, every other resource in milli-units). People read cards as cards
(`2.9`, not `2938`), memory with its unit (`64Gi`) and CPU in cores (`2.5`) (issue 13, item 6).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

OUTPUTS = ["table", "json", "yaml"]
#: Above this many rows even a terminal gets the plain layout: rich's costs ~1 ms a row.
RICH_MAX_ROWS = 200
#: Device resources whose value is an amount of card memory (MB), not a count of cards.
DEVICE_MEMORY_SUFFIXES = ("-memory", "/gpumem")
#: Device resources whose value is a share of cores (%), not a count of cards.
DEVICE_CORE_SUFFIXES = ("-core", "/gpucores", "-memory-percentage", "/gpumem-percentage")


def _number(value: float) -> str:
    """One decimal at most, none when it is whole: 2938 milli-cards → `2.9`, 8000 → `8`."""
    text = f"{value:.1f}"
    return text.removesuffix(".0")


def _mebibytes(mib: float) -> str:
    """The largest unit that holds it exactly (`64Gi`, `1536Mi`), as kubectl prints quantities:
    a rounded `1.5Gi` would not parse back to the amount."""
    for unit, size in (("Ti", 1 << 20), ("Gi", 1 << 10)):
        if mib and mib % size == 0:
            return f"{int(mib // size)}{unit}"
    return f"{_number(mib)}Mi"


def amount(resource: str, units: int) -> str:
    """One amount in the core's units, as a person writes it for that resource."""
    if resource in ("memory", "ephemeral-storage"):
        return _mebibytes(units)
    if resource == "pods":
        return str(units)
    if resource == "cpu":
        return f"{units / 1000:g}"
    value = units / 1000  # scalar resources are held in milli-units
    if resource.endswith(DEVICE_MEMORY_SUFFIXES):
        return _mebibytes(value)  # HAMi's device memory is MB (MiB)
    if resource.endswith(DEVICE_CORE_SUFFIXES):
        return f"{_number(value)}%"
    return _number(value)


def amounts(values: Mapping[str, int]) -> str:
    """`cpu=8,memory=64Gi,huawei.com/Ascend910=2.9`: the form `--capability` takes."""
    return ",".join(f"{res}={amount(res, int(v))}" for res, v in values.items())


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Columns named in upper case, kubectl style; values as they are (no markup)."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    if sys.stdout.isatty() and len(cells) <= RICH_MAX_ROWS:
        return _rich(cells, columns)
    return _plain(cells, columns)


def _rich(cells: list[list[str]], columns: Sequence[str]) -> str:
    """For a person at a terminal: bold header, long cells folded to the terminal's width."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="bold")
    for c in columns:
        grid.add_column(Text(c.upper()), overflow="fold")
    for row in cells:
        grid.add_row(*(Text(v) for v in row))
    out = io.StringIO()
    Console(file=out, width=shutil.get_terminal_size().columns, force_terminal=True,
            highlight=False).print(grid)  # fmt: skip
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _plain(cells: list[list[str]], columns: Sequence[str]) -> str:
    """For a pipe (and very long lists): one row a line, columns two spaces apart, widths as
    rich measures them (`cell_len`: a CJK character takes two columns) — rich's Table costs
    about a millisecond a row, seconds for a large cluster's `get pods | grep`
    (benchmarks/results/cli_tables.md)."""
    from rich.cells import cell_len

    header = [c.upper() for c in columns]
    widths = [max([cell_len(h)] + [cell_len(row[i]) for row in cells]) for i, h in enumerate(header)]
    lines = []
    for row in [header, *cells]:
        padded = (v + " " * (w - cell_len(v)) for v, w in zip(row, widths, strict=True))
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def render(rows: list[dict], columns: Sequence[str], output: str) -> str:
    if output == "json":
        return json.dumps(rows, indent=2)
    if output == "yaml":
        return yaml.safe_dump(rows, sort_keys=False)
    return table(rows, columns)
