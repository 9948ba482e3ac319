"""Churn: `python -m benchmarks.churn --minutes 10` → `benchmarks/results/churn.md` (issue 12 item 7).

NATS + the five services as processes (`ControlPlane` on `examples/inventory.yaml`). Slice pods
arrive at `--rate` per second and run 1–3 s (`tessera.io/duration`), for `--minutes`. At the end
of every block (`--block` s) the stream's size and each service's RSS are read, then every
service is SIGKILLed and restarted, one after the other, timing kill → `ready` while the churn
goes on. Two configurations, one after the other on a fresh log each:

* `retained`: snapshots every 500 messages, 100 finished jobs remembered, the queue service
  compacting every 60 s (the defaults, with a shorter compaction period to see it within minutes);
* `unbounded`: no snapshots (every start replays from #1), a retention no run reaches, no
  compaction — how the system behaved before.

Each restarted process has lived one block, so its RSS is what its recovered state plus one
block of live work costs; under `unbounded` that state is the whole history.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from benchmarks.chaos import INVENTORY, rss_mb, slice_pod
from contracts.api import ApplyReply, ApplyRequest, decode, encode
from services.cli.connection import Unreachable
from services.cli.control import request
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog

RESULTS = Path(__file__).parent / "results" / "churn.md"
SERVICES = ("admission", "allocator", "nodeagent", "queue", "scheduler")
REPLAYING = ("admission", "nodeagent", "queue", "scheduler")  # the allocator reads last-per-card
MODES = {
    "retained": {"TESSERA_SNAPSHOT_EVERY": "500", "TESSERA_KEEP_FINISHED": "100",
                 "TESSERA_COMPACT_EVERY": "60"},
    "unbounded": {"TESSERA_SNAPSHOT_EVERY": "0", "TESSERA_KEEP_FINISHED": "1000000000",
                  "TESSERA_COMPACT_EVERY": "0"},
}  # fmt: skip


@dataclass
class Block:
    minute: float
    pods: int  # submitted so far
    stream_msgs: int = 0
    stream_mb: float = 0.0
    rss_mb: dict[str, float] = field(default_factory=dict)
    restart_s: dict[str, float] = field(default_factory=dict)
    folded: dict[str, int] = field(default_factory=dict)  # messages the restart replayed


@dataclass
class Run:
    mode: str
    blocks: list[Block] = field(default_factory=list)
    pods: int = 0
    refused: int = 0


async def submit(url: str, text: str, patience: float = 30.0) -> ApplyReply:
    """Apply; right after admission's restart "no responder" means nobody got it: ask again."""
    deadline = time.monotonic() + patience
    while True:
        try:
            data = await request(url, "tessera", "admission", "apply", encode(ApplyRequest(manifest=text)))
            return decode(data, ApplyReply)
        except Unreachable as exc:
            if "no responder" not in str(exc) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)  # polling the service's presence, not timing an effect


async def churn(plane: ControlPlane, rate: float, seconds: float, run: Run, seed: int,
                stopping: asyncio.Event) -> None:  # fmt: skip
    rng = random.Random(seed)
    names = itertools.count()
    started = time.monotonic()
    while not stopping.is_set() and time.monotonic() - started < seconds:
        batch = [slice_pod(f"p{next(names)}", rng.choice((4096, 8192, 16384)), rng.randint(1, 3))
                 for _ in range(max(1, round(rate)))]  # fmt: skip
        try:
            reply = await submit(plane.url, yaml.safe_dump_all(batch))
            run.refused += sum(r.outcome != "accepted" for r in reply.results)
        except Unreachable:
            run.refused += len(batch)
        run.pods += len(batch)
        await asyncio.sleep(1.0)  # the arrival rate: a batch a second


async def measure(plane: ControlPlane, log: JetStreamLog, run: Run, started: float) -> Block:
    block = Block((time.monotonic() - started) / 60, run.pods)
    with contextlib.suppress(Exception):
        info = await log.js.stream_info(log.stream)
        block.stream_msgs, block.stream_mb = info.state.messages, info.state.bytes / 1e6
    block.rss_mb = {k: rss_mb(p.pid) for k, p in plane.procs.items()}
    for name in SERVICES:
        path = plane.log_dir / f"{name}.log"
        before = path.stat().st_size if path.exists() else 0
        await asyncio.to_thread(plane.kill, name)
        t0 = time.monotonic()
        await asyncio.to_thread(plane.restart, name)
        block.restart_s[name] = time.monotonic() - t0
        block.folded[name] = replayed(path.read_bytes()[before:].decode(errors="replace"))
    return block


_FROM_SNAPSHOT = re.compile(r"from the snapshot at #(\d+), replaying #\d+…#(\d+)")
_FROM_ONE = re.compile(r"replaying the log from #1 to #(\d+)")


def replayed(log_text: str) -> int:
    """How many sequences the recovery in this part of a service log folded (-1: not said —
    the allocator reads the last event per card and its job subjects above its ack floor)."""
    if m := _FROM_SNAPSHOT.search(log_text):
        return int(m.group(2)) - int(m.group(1))
    if m := _FROM_ONE.search(log_text):
        return int(m.group(1))
    return -1


async def play(state_dir: Path, mode: str, minutes: float, block: float, rate: float, seed: int,
               report: Callable[[str], None]) -> Run:  # fmt: skip
    plane = ControlPlane(state_dir, inventory=str(INVENTORY), env=MODES[mode])
    run = Run(mode)
    plane.start(report=lambda _line: None)
    stopping = asyncio.Event()
    try:
        log = await JetStreamLog.connect(plane.url)
        started = time.monotonic()
        load = asyncio.create_task(churn(plane, rate, minutes * 60, run, seed, stopping))
        while not load.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(load), block)
            if load.done():
                break
            b = await measure(plane, log, run, started)
            run.blocks.append(b)
            report(f"{mode:9s} {b.minute:5.1f} min  pods {b.pods:5d}  stream {b.stream_msgs:6d} msgs "
                   f"{b.stream_mb:5.2f} MB  RSS " + " ".join(f"{k}={v:.0f}" for k, v in sorted(b.rss_mb.items()))
                   + "  restart " + " ".join(f"{k}={v:.2f}" for k, v in b.restart_s.items())
                   + "  folded " + " ".join(f"{k}={v}" for k, v in b.folded.items()))  # fmt: skip
        stopping.set()
        await load
        await log.close()
    finally:
        stopping.set()
        plane.stop()
    return run


def render(runs: list[Run], args: argparse.Namespace) -> str:
    lines = [
        "# Churn: restart time, RSS and stream size under pods arriving and finishing",
        "",
        f"`python -m benchmarks.churn --minutes {args.minutes:g} --rate {args.rate:g} --block "
        f"{args.block:g}` (see its docstring): NATS + five service processes on "
        "`examples/inventory.yaml`, slice pods of 1–3 s arriving in a batch a second; at each "
        "block's end the stream's size and every service's RSS, then each service SIGKILLed and "
        "restarted (kill → `ready`, s) while the churn goes on. 2 CPU cores shared with other work.",
        "",
    ]
    for run in runs:
        env = ", ".join(f"{k}={v}" for k, v in MODES[run.mode].items())
        lines += [f"## {run.mode} ({env})", "", f"pods refused: {run.refused}", ""]
        lines.append("| min | pods | stream msgs | stream MB | " + " | ".join(f"{s} RSS MB" for s in SERVICES)
                     + " | " + " | ".join(f"{s} restart s" for s in SERVICES) + " |")  # fmt: skip
        lines[-1] = lines[-1] + " " + " | ".join(f"{s} replayed seqs" for s in REPLAYING) + " |"
        lines.append("|" + "---:|" * (4 + 2 * len(SERVICES) + len(REPLAYING)))
        for b in run.blocks:
            lines.append(f"| {b.minute:.1f} | {b.pods} | {b.stream_msgs} | {b.stream_mb:.2f} | "
                         + " | ".join(f"{b.rss_mb.get(s, 0):.0f}" for s in SERVICES) + " | "
                         + " | ".join(f"{b.restart_s.get(s, 0):.2f}" for s in SERVICES) + " | "
                         + " | ".join(str(b.folded.get(s, -1)) for s in REPLAYING) + " |")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[Run]:
    runs = []
    for mode in args.mode:
        state = Path(args.state_dir) / mode
        shutil.rmtree(state, ignore_errors=True)  # a fresh log per configuration
        runs.append(await play(state, mode, args.minutes, args.block, args.rate, args.seed, print))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.churn")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--block", type=float, default=60.0, help="seconds between measurements")
    parser.add_argument("--rate", type=float, default=2.0, help="pods submitted per second")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mode", action="append", choices=sorted(MODES), default=[])
    parser.add_argument("--state-dir", default=".tessera/churn")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    args.mode = args.mode or ["retained", "unbounded"]
    runs = asyncio.run(main_async(args))
    Path(args.output).write_text(render(runs, args) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
