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
from pathlib import Path

from contracts.events import NodeRegistered
from contracts.subjects import Subjects
from services.cli.connection import connect, connection_args, nats_url, open_log
from services.cli.progress import progress
from services.cli.tables import OUTPUTS, amounts, render
from services.cli.up import read_state
from services.core.simulate.report import undecodable_warning
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
NODE_COLUMNS = ("node", "cpu", "memory", "pods", "cards", "cards_in_use")
POD_COLUMNS = ("namespace", "name", "phase", "node", "devices", "reason")
JOB_COLUMNS = ("namespace", "name", "queue", "phase", "reason")
PODGROUP_COLUMNS = ("namespace", "name", "kind", "queue", "phase")
#: Every name kubectl/vcctl users type for a kind → the kind (plural, as `get` lists it).
KINDS = {
    **dict.fromkeys(("pods", "pod", "po"), "pods"),
    **dict.fromkeys(("jobs", "job", "vcjob", "vcjobs", "vj"), "jobs"),
    **dict.fromkeys(("podgroups", "podgroup", "pg"), "podgroups"),
    **dict.fromkeys(("queues", "queue", "q"), "queues"),
    **dict.fromkeys(("nodes", "node", "no"), "nodes"),
    **dict.fromkeys(("cards", "card"), "cards"),
    **dict.fromkeys(("components", "component", "cs"), "components"),
}
#: `get components`: what `up` supervises, from its state file (no NATS needed: it is how you
#: see why NATS or a service is down)
COMPONENT_COLUMNS = ("name", "state", "pid", "restarts", "last_error")
#: How often (in stream sequence) a replay redraws its progress: often enough to move, rarely
#: enough that drawing costs nothing next to decoding.
PROGRESS_EVERY = 1000
#: `vcctl queue list`'s name, weight, state and parent, with the amounts side by side.
QUEUE_COLUMNS = ("name", "state", "weight", "parent", "capability", "deserved", "allocated", "warning")
NODE_REGISTERED = frozenset({NodeRegistered.type_name()})


async def fetch_cards(url: str, root: str) -> list[dict]:
    nc = await connect(url)
    try:
        reply = await nc.request(f"{Subjects(root).api('allocator')}.cards", b"", timeout=10)
        return json.loads(reply.data)
    finally:
        await nc.close()


async def fetch_nodes(url: str, root: str) -> list[dict]:
    """Each node's allocatable (its last NodeRegistered) and its cards: how many of each type,
    and how many hold at least one slice now (from the ledger heads, no replay)."""
    log = await open_log(url, root)
    try:
        in_use: dict[str, int] = {}
        for msg in await log.last_per_subject(log.subjects.all_cards()):
            usage = getattr(await decode_stored(msg), "usage", None)  # state-carrying card events
            if usage is not None and usage.slices_used:
                node = log.subjects.parse(msg.subject)[1][0]
                in_use[node] = in_use.get(node, 0) + 1
        rows = []
        for msg in await log.last_per_subject(log.subjects.all_nodes()):
            node = await decode_stored(msg, types=NODE_REGISTERED)
            if not isinstance(node, NodeRegistered):
                continue
            rows.append(node_row(node, in_use.get(node.node, 0)))
        return sorted(rows, key=lambda r: r["node"])
    finally:
        await log.close()


def node_row(node: NodeRegistered, cards_in_use: int) -> dict:
    """Allocatable as kubectl shows it (cores, Gi) and cards as `8×Ascend910B3`."""
    by_type: dict[str, int] = {}
    for card in node.cards:
        by_type[card.type] = by_type.get(card.type, 0) + 1
    return {
        "node": node.node,
        "cpu": f"{node.cpu_milli / 1000:g}",
        "memory": f"{node.memory_mib / 1024:g}Gi",
        "pods": node.pods,
        "cards": ",".join(f"{n}×{t}" for t, n in sorted(by_type.items())) or "-",
        "cards_in_use": f"{cards_in_use}/{len(node.cards)}",
    }


async def read_log(url: str, root: str, subject: str | None = None) -> list[StoredMessage]:
    """The whole log (or one subject's part of it), as stored."""
    log = await open_log(url, root)
    try:
        out: list[StoredMessage] = []
        with progress("reading the log: events", await log.last_sequence()) as advance:
            async for m in log.replay(1, subject):
                out.append(m)
                if m.seq % PROGRESS_EVERY == 0:
                    advance(m.seq)
        return out
    finally:
        await log.close()


async def fetch_report(url: str, root: str) -> dict:
    """Replay the log and build the simulate report's records from it."""
    from services.core.simulate.report import build_report

    return build_report(await read_log(url, root))


def device_text(d: dict) -> str:
    """One booked card as the card has it (issue 13, item 7): a vNPU template's AI cores as
    `5/20 cores` of the card, a soft slice's as a percentage, a whole card as `whole`."""
    kind = d.get("kind") or ("template" if d.get("template") else "soft")
    if kind == "template":
        total = f"/{d['card_cores']}" if d.get("card_cores") else ""
        return f"{d['uuid']}:{d['memory']}MB/{d['cores']}{total} cores[{d['template']}]"
    if kind == "whole":
        return f"{d['uuid']}:{d['memory']}MB/whole"
    return f"{d['uuid']}:{d['memory']}MB/{d['cores']}%"


def _table_view(what: str, rows: list[dict]) -> list[dict]:
    """Flatten nested fields for the table; -o json/yaml keep the records as they are."""
    out = []
    for r in rows:
        r = dict(r)
        if what == "pods":
            r["devices"] = ",".join(device_text(d) for d in r["devices"])
            r["node"] = r["node"] or ""
        if what == "queues":
            for k in ("capability", "deserved", "allocated"):
                r[k] = amounts(r.get(k) or {})
        out.append(r)
    return out


def cmd_get(args: argparse.Namespace) -> int:
    what = KINDS[args.what]
    if what == "components":
        return _print(args, what, read_state(Path(args.state_dir)).get("components", []),
                      COMPONENT_COLUMNS)  # fmt: skip
    if args.kubeconfig:
        from services.cli import kubeverbs

        if what not in kubeverbs.KUBE_KINDS:
            print(f"error: with --kubeconfig, get lists {', '.join(kubeverbs.KUBE_KINDS)} "
                  f"(not {what}: those come from the log)", file=sys.stderr)  # fmt: skip
            return 2
        ns = "" if args.all_namespaces else args.namespace
        try:
            rows = kubeverbs.rows(args.kubeconfig, what, ns)
        except kubeverbs.Refused as exc:  # e.g. no Volcano CRDs: the chart's crds.install
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return _print(args, what, rows, COLUMNS[what])
    url = nats_url(args)
    if what == "nodes":
        rows, columns = asyncio.run(fetch_nodes(url, args.root)), COLUMNS["nodes"]
    else:
        report = asyncio.run(fetch_report(url, args.root))
        if warning := undecodable_warning(report):
            print(warning, file=sys.stderr)
        rows = report["jobs" if what == "podgroups" else what]
        if what in ("pods", "jobs", "podgroups") and not args.all_namespaces:
            rows = [r for r in rows if r["namespace"] == args.namespace]
        columns = COLUMNS[what]
    return _print(args, what, rows, columns)


def _print(args: argparse.Namespace, what: str, rows: list[dict], columns: tuple[str, ...]) -> int:
    """The rows `args.names` picks (exit 1 naming the missing), in `args.output`'s form."""
    if args.names:
        key = "uuid" if what == "cards" else "node" if what == "nodes" else "name"
        missing = [n for n in args.names if not any(r[key] == n for r in rows)]
        if missing:
            print(f'error: {what} {", ".join(repr(n) for n in missing)} not found', file=sys.stderr)
            return 1
        rows = [r for n in args.names for r in rows if r[key] == n]
    if args.output == "table" and what not in ("nodes", "podgroups", "components"):
        rows = _table_view(what, rows)
    print(render(rows, columns, args.output))
    return 0


COLUMNS = {"pods": POD_COLUMNS, "jobs": JOB_COLUMNS, "podgroups": PODGROUP_COLUMNS,
           "queues": QUEUE_COLUMNS, "cards": CARD_COLUMNS, "nodes": NODE_COLUMNS}  # fmt: skip


def kubeconfig_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default="", metavar="PATH",
                   help="act on the cluster's Volcano objects (Queue, Job, PodGroup, Command) "
                        "through this kubeconfig, as vcctl does, instead of the log")  # fmt: skip


def add_parsers(sub: argparse._SubParsersAction) -> None:
    get = sub.add_parser("get", help="list queues, jobs, podgroups, pods, nodes or cards")
    get.add_argument("what", choices=list(KINDS), metavar="KIND",
                     help="pods|pod|po, jobs|job|vcjob, podgroups|pg, queues|queue|q, nodes|no, cards, "
                          "components|cs (what `up` supervises)")  # fmt: skip
    get.add_argument("names", nargs="*", metavar="NAME", help="only these objects (exit 1 if one is missing)")
    get.add_argument("-n", "--namespace", default="default", help="namespace of pods and jobs (default: default)")
    get.add_argument("-A", "--all-namespaces", action="store_true", help="pods and jobs of every namespace")
    get.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="table (default), json or yaml")
    connection_args(get)
    kubeconfig_arg(get)
    get.set_defaults(func=cmd_get)
