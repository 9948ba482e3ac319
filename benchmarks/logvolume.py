"""Log volume: `python -m benchmarks.logvolume --pods 500` → `benchmarks/results/logvolume.md`.

NATS + the five services as processes (`ControlPlane` on `examples/inventory.yaml`, default
`--log-level INFO`). `--pods` one-second slice pods (4, 8 or 16 GB of a 910B3) are applied at
once, more than the 16 cards hold, so most wait and are judged again in every session while
the others run; once every one finished, each service's log is measured: lines and bytes
written since the plane was ready, and per pod, beside each process's CPU time over the same
span (user + system, from /proc: the per-pod cost issue 29 counts). What an operator's log
shipper stores at the default level, and what a line per pod per session costs on a backlog.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.chaos import INVENTORY, slice_pod
from benchmarks.churn import submit
from contracts.envelope import TYPE
from contracts.events import TaskFinished
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog

RESULTS = Path(__file__).parent / "results" / "logvolume.md"
SERVICES = ("admission", "allocator", "nodeagent", "queue", "scheduler")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, s (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def finished(log: JetStreamLog, pods: int, patience: float) -> int:
    """Wait until `pods` TaskFinished are in the log (polling the stream, not timing an
    effect); returns how many were seen."""
    deadline = time.monotonic() + patience
    seen, start = 0, 1
    while time.monotonic() < deadline:
        last = await log.last_sequence()
        async for msg in log.replay(start, log.subjects.events):
            if msg.seq > last:
                break
            start = msg.seq + 1
            seen += msg.headers.get(TYPE) == TaskFinished.type_name()
        if seen >= pods:
            return seen
        await asyncio.sleep(0.5)
    return seen


async def play(state_dir: Path, pods: int, seed: int) -> dict[str, tuple[int, int, float]]:
    plane = ControlPlane(state_dir, inventory=str(INVENTORY))
    plane.start(report=lambda _line: None)
    try:
        before = {s: (plane.log_dir / f"{s}.log").stat().st_size for s in SERVICES}
        cpu = {s: cpu_seconds(plane.procs[s].pid) for s in SERVICES}
        rng = random.Random(seed)
        manifests = [slice_pod(f"p{i}", rng.choice((4096, 8192, 16384)), 1) for i in range(pods)]
        log = await JetStreamLog.connect(plane.url)
        for i in range(0, pods, 100):  # admission's per-request limits: 100 at a time
            await submit(plane.url, yaml.safe_dump_all(manifests[i:i + 100]))
        seen = await finished(log, pods, patience=60 + pods)
        await log.close()
        if seen < pods:
            raise SystemExit(f"only {seen}/{pods} pods finished")
        out = {}
        for s in SERVICES:
            data = (plane.log_dir / f"{s}.log").read_bytes()[before[s]:]
            out[s] = (data.count(b"\n"), len(data), cpu_seconds(plane.procs[s].pid) - cpu[s])
        return out
    finally:
        plane.stop()


def render(got: dict[str, tuple[int, int, float]], pods: int, note: str) -> str:
    lines = [
        "# Log volume at the default level (INFO)",
        "",
        f"`python -m benchmarks.logvolume --pods {pods}` (see its docstring): {pods} one-second "
        "slice pods applied at once on `examples/inventory.yaml` (16 cards), every service's log "
        "measured from ready until the last pod finished.",
        "",
        note,
        "",
        "| service | lines | bytes | lines / pod | bytes / pod | CPU s | CPU ms / pod |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s, (n, size, cpu) in got.items():
        lines.append(f"| {s} | {n} | {size} | {n / pods:.2f} | {size / pods:.0f} | {cpu:.2f} | {cpu * 1000 / pods:.2f} |")
    total_n, total_b = sum(g[0] for g in got.values()), sum(g[1] for g in got.values())
    total_c = sum(g[2] for g in got.values())
    lines.append(f"| all | {total_n} | {total_b} | {total_n / pods:.2f} | {total_b / pods:.0f} | {total_c:.2f} | "
                 f"{total_c * 1000 / pods:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.logvolume")
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--keep-logs", default="", help="copy the services' logs into this directory")
    args = parser.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="tessera-logvolume-"))
    try:
        got = asyncio.run(play(state, args.pods, args.seed))
        if args.keep_logs:
            shutil.copytree(state / "logs", args.keep_logs, dirs_exist_ok=True)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    text = render(got, args.pods, args.note)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
