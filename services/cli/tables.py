"""How `get` and `describe` print rows: a table (rich), JSON or YAML, and amounts as people
write them.

Tables: `rich` lays the columns out (issue 13, item 15: no hand-padded columns). On a terminal
the header is bold and long cells fold to the terminal's width; anywhere else (a pipe, `| head`,
a file, a test) there is no colour, no box and no wrapping, so every row is one line that
`grep`/`awk` read — the same text as kubectl's plain tables. rich is imported only when a table
is drawn, so commands that print JSON, or nothing, start as fast as before.

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
#: Wide enough that no row of a pipe is ever wrapped or cut.
UNWRAPPED = 1 << 16
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
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    tty = sys.stdout.isatty()
    grid = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False,
                 header_style="bold" if tty else "")  # fmt: skip
    for c in columns:
        grid.add_column(Text(c.upper()), overflow="fold", no_wrap=not tty)
    for r in rows:
        grid.add_row(*(Text(_cell(r.get(c))) for c in columns))
    out = io.StringIO()
    width = shutil.get_terminal_size().columns if tty else UNWRAPPED
    Console(file=out, width=width, force_terminal=tty, no_color=not tty, highlight=False,
            color_system="auto" if tty else None).print(grid)  # fmt: skip
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def render(rows: list[dict], columns: Sequence[str], output: str) -> str:
    if output == "json":
        return json.dumps(rows, indent=2)
    if output == "yaml":
        return yaml.safe_dump(rows, sort_keys=False)
    return table(rows, columns)
