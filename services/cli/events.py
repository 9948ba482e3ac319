"""`tessera events`: the log of a running system, for people and for replay.

`tessera events --job default/npu-train-job` prints that job's history (submitted, enqueued,
why it is unschedulable — with every node's reason —, proposed, committed, started, finished),
which is the answer to "why is my job pending". `tessera events --output-file FILE.jsonl`
writes the whole log in the format `tessera simulate --events` writes (`-o jsonl` prints it), so
`tessera simulate --replay FILE.jsonl --report R.json` rebuilds the same records offline, on any
machine. `-o` is a format, as for `get`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import msgspec
import yaml

from contracts.envelope import TYPE
from contracts.events import JobSubmitted, JobUpdated
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from contracts.subjects import Subjects
from services.cli.connection import connection_args, nats_url
from services.cli.get import read_log
from services.core.simulate.jsonl import jsonl_line, write_jsonl
from services.runtime.eventlog.model import StoredMessage

FORMATS = ("table", "json", "yaml", "jsonl")
SKIP = {"type", "namespace", "name", "spec", "manifest", "usage", "groups"}


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
    if isinstance(spec, dict) and "tasks" in spec:  # JobSubmitted/Updated: what was asked for
        tasks = ", ".join(f"{t.get('name')}×{t.get('replicas', 1)}" for t in spec["tasks"])
        # the decoded spec, not the body: msgspec omits fields at their default (minAvailable 1)
        decoded = default_registry().decode(msg.headers.get(TYPE, ""), msg.data)
        js = decoded.spec if isinstance(decoded, JobSubmitted | JobUpdated) else None
        parts.append(f"queue={spec.get('queue', 'default')} minAvailable="
                     f"{js.min_available if js else spec.get('min_available', 1)} tasks=[{tasks}]")  # fmt: skip
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
        else:
            k, v = _readable(k, v)
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _card(c: dict) -> str:
    """A card as registered: an unhealthy one says so, and why (its registration read as a
    healthy one's did, and only the raw log showed `"healthy": false`)."""
    slices = f", {c['split_count']} slices" if c.get("split_count", 1) > 1 else ""
    sick = ""
    if c.get("healthy") is False:
        sick = f", unhealthy: {c['health_reason']}" if c.get("health_reason") else ", unhealthy"
    return f"{c.get('uuid')}({c.get('type')}, {c.get('memory', 0)}MB, {c.get('cores', 0)} cores{slices}{sick})"


def _readable(key: str, value: object) -> tuple[str, object]:
    """A field in people's units (issue 26, item 6): times as RFC3339, CPU in cores, memory
    with its unit, cards by type, maps as `k=v` — never a Python repr or epoch seconds."""
    from services.cli.tables import amount
    from services.core.stamps import utc_stamp

    if key in ("at", "arrive_at", "time") and isinstance(value, int | float) and value > 0:
        return key, utc_stamp(float(value))
    if key == "cpu_milli" and isinstance(value, int):
        return "cpu", amount("cpu", value)
    if key == "memory_mib" and isinstance(value, int):
        return "memory", amount("memory", value)
    if key == "cards" and isinstance(value, list) and all(isinstance(c, dict) for c in value):
        by_type: dict[str, int] = {}
        for c in value:
            by_type[str(c.get("type"))] = by_type.get(str(c.get("type")), 0) + 1
        sick = [str(c.get("uuid")) for c in value if c.get("healthy") is False]
        unhealthy = f" (unhealthy: {', '.join(sick)})" if sick else ""
        return key, (",".join(f"{n}×{t}" for t, n in sorted(by_type.items())) or "none") + unhealthy
    if key == "card" and isinstance(value, dict):
        return key, _card(value)
    if key == "slice" and isinstance(value, dict):
        cores = f"/{value.get('cores')} cores" if value.get("cores") else ""
        template = f"[{value['template']}]" if value.get("template") else ""
        return key, f"{value.get('kind', '')}:{value.get('memory', 0)}MB{cores}{template}"
    if isinstance(value, dict):
        return key, "[" + ",".join(f"{k}={v}" for k, v in value.items()) + "]"
    if isinstance(value, list):
        return key, "[" + "; ".join(" ".join(f"{k}={v}" for k, v in i.items()) if isinstance(i, dict) else str(i)
                                    for i in value) + "]"  # fmt: skip
    if isinstance(value, str) and "\n" in value:
        return key, value.strip().replace("\n", " ")
    return key, value


def event_line(msg: StoredMessage, about: str = "") -> str:
    """`#SEQ TYPE fields…`: how `events` and `describe` show one event (`about`: which object,
    where the listing holds more than one)."""
    what = f"{about:32s} " if about else ""
    return f"#{msg.seq:<7d} {msg.headers.get(TYPE, '?'):20s} {what}{summary(msg)}"


def about(subjects: Subjects, msg: StoredMessage) -> str:
    """The object an event is about, from its subject: `job default/npu-train-job`, `card
    node-a/<uuid>`, `node node-a`, `queue team-a` (the whole log's listing said `JobDeleted`
    with nothing after it)."""
    try:
        kind, ids = subjects.parse(msg.subject)
    except ValueError:
        return msg.subject
    return f"{kind} {'/'.join(ids)}"


def cmd_events(args: argparse.Namespace) -> int:
    root = args.root
    subject = None
    if args.job:
        ns, _, name = args.job.rpartition("/")
        subject = Subjects(root).job(ns or "default", name)
    messages = asyncio.run(read_log(nats_url(args), root, subject))
    if args.output_file:
        write_jsonl(Path(args.output_file), messages)
        print(f"{len(messages)} events written to {args.output_file} "
              f"(tessera simulate --replay {args.output_file} --report R.json)")  # fmt: skip
        return 0
    if args.output == "jsonl":
        for m in messages:
            print(jsonl_line(m))
        return 0
    if args.output in ("json", "yaml"):
        rows = [{"seq": m.seq, "subject": m.subject, "type": m.headers.get(TYPE, ""),
                 "data": msgspec.json.decode(m.data)} for m in messages]  # fmt: skip
        print(json.dumps(rows, indent=2) if args.output == "json" else yaml.safe_dump(rows, sort_keys=False))
        return 0
    if not messages:
        print(f"no events{' for ' + args.job if args.job else ''}")
        return 1 if args.job else 0
    subjects = Subjects(root)
    for m in messages:  # one job's history names its job once, in the command
        print(event_line(m) if args.job else event_line(m, about(subjects, m)))
    return 0


def output_format(value: str) -> str:
    """`-o` is a format, as for `get`; a file name there is the old spelling of --output-file."""
    if value in FORMATS:
        return value
    hint = f"; to write the log to a file use --output-file {value}" if "." in value or "/" in value else ""
    raise argparse.ArgumentTypeError(f"invalid format {value!r} (choose from {', '.join(FORMATS)}){hint}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help="a job's history from the log, or the whole log")
    p.add_argument("--job", default="", help="NAMESPACE/NAME (or NAME in default)")
    p.add_argument("-o", "--output", type=output_format, default="table", metavar="FORMAT",
                   help="table (default), json, yaml, or jsonl (the format simulate --replay reads)")  # fmt: skip
    p.add_argument("--output-file", default="", metavar="FILE",
                   help="write the events as JSONL to FILE, for `simulate --replay FILE`")  # fmt: skip
    connection_args(p)
    p.set_defaults(func=cmd_events)
