"""How long `tessera get pods` takes to lay out its table: `python -m benchmarks.cli_tables
[--rows N ...]`.

Compares rich's Table (what a terminal gets, up to `tables.RICH_MAX_ROWS` rows) with the plain
layout a pipe gets (widths by rich's `cell_len`), on pod rows shaped like the article's, and
times the import of rich. Writes `benchmarks/results/cli_tables.md`. Run by hand; never part of
the test suite.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

from services.cli import tables
from services.cli.get import POD_COLUMNS

RESULTS = Path(__file__).parent / "results" / "cli_tables.md"


def rows(n: int) -> list[list[str]]:
    return [["default", f"npu-train-job-worker-{i}", "Running", f"node-{i % 500}",
             f"node-{i % 500}-npu-{i % 8}:16384MB/5/20 cores[vir05_1c_16g]", ""] for i in range(n)]  # fmt: skip


def timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def import_ms() -> float:
    code = "import time; t = time.perf_counter(); import rich.table, rich.console; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100, 200, 2000, 10000], help="table sizes")
    args = parser.parse_args(argv)
    lines = [
        "# CLI table layout",
        "",
        f"`python -m benchmarks.cli_tables --rows {' '.join(map(str, args.rows))}` on {platform.machine()}, "
        f"CPython {platform.python_version()}; pod rows of `get pods` (6 columns).",
        "",
        f"Importing rich.table + rich.console: {import_ms():.0f} ms (paid only when a table is drawn).",
        "",
        "| rows | rich Table (terminal) s | plain (pipe) s | rich ms/row | plain ms/row |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in args.rows:
        cells = rows(n)
        plain_s = timed(tables._plain, cells, POD_COLUMNS)
        if n > 2000:
            lines.append(f"| {n} | — | {plain_s:.3f} | — | {plain_s / n * 1000:.3f} |")
            continue
        rich_s = timed(tables._rich, cells, POD_COLUMNS)
        lines.append(f"| {n} | {rich_s:.2f} | {plain_s:.3f} | {rich_s / n * 1000:.2f} | {plain_s / n * 1000:.3f} |")
    lines += ["", f"Terminals get rich up to {tables.RICH_MAX_ROWS} rows; longer lists and pipes get the plain "
              "layout (rich's Table above 2000 rows is not timed: it grows linearly)."]  # fmt: skip
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
