"""`tessera get queues|jobs|pods|nodes|cards`: read a running system (found through `tessera
up`'s state file).

Nodes come from the log itself (the last NodeRegistered of every node subject); queues, jobs,
pods and cards are the records of a `tessera simulate` report built from a replay of the log —
the same function, so the two agree field for field, and `get` works even while a service
restarts. (The allocator's own view of the ledgers, with owners, is `fetch_cards`: the demo's
per-card view.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import nats
import yaml

from contracts.events import NodeRegistered
from contracts.subjects import Subjects
from services.cli.control import connection_args, nats_url
from services.core.simulate.report import undecodable_warning
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import StoredMessage
from services.runtime.service import decode_stored

CARD_COLUMNS = (
    "node",
    "uuid",
    "type",
    "memory_used",
    "memory_total",
    "cores_used",
    "cores_total",
    "slices_used",
    "slices_total",
)
NODE_COLUMNS = ("node", "cpu_milli", "memory_mib", "cards")
POD_COLUMNS = ("namespace", "name", "phase", "node", "devices", "reason")
JOB_COLUMNS = ("namespace", "name", "queue", "phase", "reason")
QUEUE_COLUMNS = ("name", "state", "deserved", "allocated", "warning")
NODE_REGISTERED = frozenset({NodeRegistered.type_name()})


def render(rows: list[dict], columns: tuple[str, ...], output: str) -> str:
    if output == "json":
        return json.dumps(rows, indent=2)
    if output == "yaml":
        return yaml.safe_dump(rows, sort_keys=False)
    table = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [
        max(len(c), *(len(row[i]) for row in table)) if table else len(c)
        for i, c in enumerate(columns)
    ]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in table]
    return "\n".join(lines)


async def fetch_cards(url: str, root: str) -> list[dict]:
    nc = await nats.connect(url)
    try:
        reply = await nc.request(f"{Subjects(root).api('allocator')}.cards", b"", timeout=10)
        return json.loads(reply.data)
    finally:
        await nc.close()


async def fetch_nodes(url: str, root: str) -> list[dict]:
    log = await JetStreamLog.connect(url, subjects=Subjects(root))
    try:
        rows = []
        for msg in await log.last_per_subject(log.subjects.all_nodes()):
            node = await decode_stored(msg, types=NODE_REGISTERED)
            if not isinstance(node, NodeRegistered):
                continue
            rows.append(
                {
                    "node": node.node,
                    "cpu_milli": node.cpu_milli,
                    "memory_mib": node.memory_mib,
                    "cards": len(node.cards),
                }
            )  # type: ignore[attr-defined]
        return sorted(rows, key=lambda r: r["node"])
    finally:
        await log.close()


async def read_log(url: str, root: str, subject: str | None = None) -> list[StoredMessage]:
    """The whole log (or one subject's part of it), as stored."""
    log = await JetStreamLog.connect(url, subjects=Subjects(root))
    try:
        return [m async for m in log.replay(1, subject)]
    finally:
        await log.close()


async def fetch_report(url: str, root: str) -> dict:
    """Replay the log and build the simulate report's records from it."""
    from services.core.simulate.report import build_report

    return build_report(await read_log(url, root))


def _table_view(what: str, rows: list[dict]) -> list[dict]:
    """Flatten nested fields for the table; -o json/yaml keep the records as they are."""
    out = []
    for r in rows:
        r = dict(r)
        if what == "pods":
            r["devices"] = ",".join(
                f"{d['uuid']}:{d['memory']}MB/{d['cores']}%" + (f"[{d['template']}]" if d["template"] else "")
                for d in r["devices"]
            )
            r["node"] = r["node"] or ""
        if what == "queues":
            for k in ("deserved", "allocated"):
                r[k] = " ".join(f"{res}={v}" for res, v in r[k].items())
        out.append(r)
    return out


def cmd_get(args: argparse.Namespace) -> int:
    url = nats_url(args)
    if args.what == "nodes":
        rows, columns = asyncio.run(fetch_nodes(url, args.root)), NODE_COLUMNS
    else:
        report = asyncio.run(fetch_report(url, args.root))
        if warning := undecodable_warning(report):
            print(warning, file=sys.stderr)
        rows = report[args.what]
        if args.what in ("pods", "jobs") and not args.all_namespaces:
            rows = [r for r in rows if r["namespace"] == args.namespace]
        columns = {"pods": POD_COLUMNS, "jobs": JOB_COLUMNS, "queues": QUEUE_COLUMNS,
                   "cards": CARD_COLUMNS}[args.what]  # fmt: skip
        if args.output == "table":
            rows = _table_view(args.what, rows)
    print(render(rows, columns, args.output))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    get = sub.add_parser("get", help="list queues, jobs, pods, nodes or cards of the running system")
    get.add_argument("what", choices=["queues", "jobs", "pods", "nodes", "cards"])
    get.add_argument("-n", "--namespace", default="default")
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    connection_args(get)
    get.set_defaults(func=cmd_get)
