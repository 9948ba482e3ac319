"""`tessera events`: the log of a running system, for people and for replay.

`tessera events --job default/npu-train-job` prints that job's history (submitted, enqueued,
why it is unschedulable — with every node's reason —, proposed, committed, started, finished),
which is the answer to "why is my job pending". `tessera events -o FILE.jsonl` writes the whole
log in the format `tessera simulate --events` writes, so `tessera simulate --replay FILE.jsonl
--report R.json` rebuilds the same records offline, on any machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import msgspec

from contracts.envelope import TYPE
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from contracts.subjects import Subjects
from services.cli.control import connection_args, nats_url
from services.cli.get import read_log
from services.core.simulate.jsonl import write_jsonl
from services.runtime.eventlog.model import StoredMessage

SKIP = {"type", "namespace", "name", "spec", "manifest", "usage"}


def summary(msg: StoredMessage) -> str:
    """One line per event: its fields except the bulky ones (specs, manifests, usages); an
    event whose body does not match its type is shown as such and skipped, never fatal."""
    try:
        default_registry().decode(msg.headers.get(TYPE, ""), msg.data)
    except UnknownEventType:
        pass  # a newer writer's event: its fields are still worth showing
    except UndecodableEvent as exc:
        return f"(undecodable, skipped: {exc})"
    try:
        body = msgspec.json.decode(msg.data)
    except msgspec.DecodeError:
        return "(undecodable)"
    if not isinstance(body, dict):
        return f"(undecodable: {body!r})"
    parts = []
    spec = body.get("spec")
    if isinstance(spec, dict) and "tasks" in spec:  # JobSubmitted: what was asked for
        tasks = ", ".join(f"{t.get('name')}×{t.get('replicas', 1)}" for t in spec["tasks"])
        parts.append(f"queue={spec.get('queue', 'default')} minAvailable="
                     f"{spec.get('min_available', 0)} tasks=[{tasks}]")  # fmt: skip
    elif isinstance(spec, dict):  # QueueCreated
        parts.append(f"queue={spec.get('name')} weight={spec.get('weight', 1)}")
    for k, v in body.items():
        if k in SKIP:
            continue
        if k == "placements":
            v = ", ".join(f"{p['task']}→{p['node']}" + "".join(
                f" [{s['card']} {s['slice'].get('memory', 0)}MB]" for s in p.get("slices", []))
                for p in v)  # fmt: skip
        elif k == "node_reasons":
            v = "; ".join(f"{n}: {r}" for n, r in sorted(v.items()))
        parts.append(f"{k}={v}")
    return " ".join(parts)


def cmd_events(args: argparse.Namespace) -> int:
    root = args.root
    subject = None
    if args.job:
        ns, _, name = args.job.rpartition("/")
        subject = Subjects(root).job(ns or "default", name)
    try:
        messages = asyncio.run(read_log(nats_url(args), root, subject))
    except Exception as exc:  # no NATS, no stream
        print(f"error: cannot read the log: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_jsonl(Path(args.output), messages)
        print(f"{len(messages)} events written to {args.output} "
              f"(tessera simulate --replay {args.output} --report R.json)")  # fmt: skip
        return 0
    if not messages:
        print(f"no events{' for ' + args.job if args.job else ''}")
        return 1 if args.job else 0
    for m in messages:
        print(f"#{m.seq:<7d} {m.headers.get(TYPE, '?'):20s} {summary(m)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help="a job's history from the log, or the whole log as JSONL")
    p.add_argument("--job", default="", help="NAMESPACE/NAME (or NAME in default)")
    p.add_argument("-o", "--output", default="", help="write the log as JSONL for simulate --replay")
    connection_args(p)
    p.set_defaults(func=cmd_events)
