"""`tessera describe pod|job|queue|node NAME`: everything known about one object, with its events.

kubectl habit: `get` lists, `describe` explains. The record is the one `get` prints (the
simulate report built from a replay of the log), followed by what hangs off it (a job's pods, a
queue's spec and jobs) and the object's own part of the log — the same lines `tessera events`
prints — so "why does it wait" has its answer in one place.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from contracts.subjects import Subjects
from services.cli.connection import connection_args, nats_url
from services.cli.control import queue_spec_of
from services.cli.events import event_line
from services.cli.get import (
    JOB_COLUMNS,
    KINDS,
    POD_COLUMNS,
    _table_view,
    fetch_nodes,
    read_log,
    render,
)
from services.runtime.eventlog.model import StoredMessage

DESCRIBABLE = {alias: kind for alias, kind in KINDS.items() if kind in ("pods", "jobs", "queues", "nodes")}


def fields(record: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    """`Key:  value` lines, kubectl style; empty values shown as `<none>`."""
    shown = {k: v for k, v in record.items() if k not in skip}
    width = max((len(k) for k in shown), default=0) + 2
    return [f"{(k.replace('_', ' ').capitalize() + ':').ljust(width)} {v if v not in ('', None, [], {}) else '<none>'}"
            for k, v in shown.items()]  # fmt: skip


def indent(text: str) -> list[str]:
    return [f"  {line}" for line in text.splitlines()]


def queue_fields(messages: list[StoredMessage]) -> dict[str, Any]:
    """The queue's spec as the log last set it, in the words of a Volcano Queue."""
    s = queue_spec_of(messages)
    if s is None:
        return {}
    return {"weight": s.weight, "capability": s.capability, "deserved": s.deserved,
            "guarantee": s.guarantee, "reclaimable": s.reclaimable, "parent": s.parent or "root",
            "priority": s.priority}  # fmt: skip


def describe(kind: str, name: str, namespace: str, report: dict[str, Any],
             messages: list[StoredMessage], subjects: Subjects) -> list[str] | None:  # fmt: skip
    """The lines of `describe`, or None when there is no such object (pure: report + log in)."""
    lines: list[str]
    if kind == "pods":
        pod = next((p for p in report["pods"] if p["name"] == name and p["namespace"] == namespace), None)
        if pod is None:
            return None
        lines = fields(_table_view("pods", [pod])[0])
        subject = subjects.job(namespace, pod["job"] or name)
    elif kind == "jobs":
        job = next((j for j in report["jobs"] if j["name"] == name and j["namespace"] == namespace), None)
        if job is None:
            return None
        pods = [p for p in report["pods"] if p["job"] == name and p["namespace"] == namespace]
        lines = [*fields(job), "Pods:", *indent(render(_table_view("pods", pods), POD_COLUMNS, "table"))]
        subject = subjects.job(namespace, name)
    else:  # queues
        queue = next((q for q in report["queues"] if q["name"] == name), None)
        if queue is None:
            return None
        subject = subjects.queue(name)
        own = [m for m in messages if m.subject == subject]
        jobs = [j for j in report["jobs"] if j["queue"] == name]
        lines = [*fields(_table_view("queues", [queue])[0]), "Spec:", *indent("\n".join(fields(queue_fields(own)))),
                 "Jobs:", *indent(render(jobs, JOB_COLUMNS, "table"))]  # fmt: skip
    events = [event_line(m) for m in messages if m.subject == subject]
    return [*lines, "Events:", *([f"  {e}" for e in events] or ["  <none>"])]


def describe_node(name: str, nodes: list[dict], messages: list[StoredMessage], report: dict[str, Any],
                  subjects: Subjects) -> list[str] | None:  # fmt: skip
    node = next((n for n in nodes if n["node"] == name), None)
    if node is None:
        return None
    pods = [p for p in report["pods"] if p["node"] == name]
    subject = subjects.node(name)
    events = [event_line(m) for m in messages if m.subject == subject]
    return [*fields(node), "Pods:", *indent(render(_table_view("pods", pods), POD_COLUMNS, "table")),
            "Events:", *([f"  {e}" for e in events] or ["  <none>"])]  # fmt: skip


def cmd_describe(args: argparse.Namespace) -> int:
    from services.core.simulate.report import build_report

    kind = DESCRIBABLE[args.kind]
    url = nats_url(args)
    messages = asyncio.run(read_log(url, args.root))
    report = build_report(messages)
    subjects = Subjects(args.root)
    if kind == "nodes":
        lines = describe_node(args.name, asyncio.run(fetch_nodes(url, args.root)), messages, report, subjects)
    else:
        lines = describe(kind, args.name, args.namespace, report, messages, subjects)
    if lines is None:
        where = f" in namespace {args.namespace}" if kind in ("pods", "jobs") else ""
        print(f"error: {kind[:-1]} {args.name!r} not found{where}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("describe", help="everything known about one pod, job, queue or node, events included")
    p.add_argument("kind", choices=list(DESCRIBABLE), metavar="KIND", help="pod|po, job|vcjob, queue|q, node|no")
    p.add_argument("name", metavar="NAME", help="the object's name")
    p.add_argument("-n", "--namespace", default="default", help="namespace of a pod or job (default: default)")
    connection_args(p)
    p.set_defaults(func=cmd_describe)
