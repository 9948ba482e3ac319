"""`tessera describe KIND NAME`: everything known about one object, with its events, for every
kind `get` lists (pods, Volcano Jobs, PodGroups, queues, nodes, cards, components).

kubectl habit: `get` lists, `describe` explains. The object is the one `get` prints (the
simulate report built from a replay of the log, shaped as `get -o yaml` shapes it), followed by
what hangs off it (a job's or group's pods, a queue's jobs, a node's pods, a card's holders) and
the object's own part of the log — the same lines `tessera events` prints — so "why does it
wait" has its answer in one place. Everything is in people's units (issue 26, item 6): amounts
as `get queues` prints them (`cpu=64,memory=256Gi,huawei.com/Ascend910B3=8`), times as RFC3339
with an age, maps as `k=v`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts.subjects import Subjects
from services.cli import kubeobjects as ko
from services.cli.connection import connection_args, nats_url
from services.cli.control import queue_spec_of
from services.cli.events import event_line
from services.cli.get import (
    HEALTHY,
    JOB_COLUMNS,
    KINDS,
    POD_COLUMNS,
    Listing,
    _names,
    fetch_node_events,
    listing,
    node_row,
    read_log,
    render,
)
from services.cli.tables import amounts
from services.runtime.eventlog.model import StoredMessage

DESCRIBABLE = dict(KINDS)
NONE = "<none>"


def fields(pairs: list[tuple[str, Any]]) -> list[str]:
    """`Key:  value` lines, kubectl style; empty values shown as `<none>`."""
    width = max((len(k) for k, _ in pairs), default=0) + 2
    return [f"{(k + ':').ljust(width)}{_text(v)}" for k, v in pairs]


def _text(v: Any) -> str:
    if v in ("", None, [], {}):
        return NONE
    if isinstance(v, Mapping):
        return ",".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    return str(v)


def indent(text: str) -> list[str]:
    return [f"  {line}" for line in text.splitlines()]


def when(meta: Mapping[str, Any]) -> str:
    """`2026-12-02T06:17:04Z (4m ago)`: the instant, and how long ago as AGE says it."""
    stamp = meta.get("creationTimestamp", "")
    return f"{stamp} ({ko.age(stamp, ko.now())} ago)" if stamp else ""


def _pods_table(pods: list[dict]) -> list[str]:
    if not pods:
        return [f"  {NONE}"]
    from services.cli.get import _table_view

    return indent(render(_table_view("pods", pods), POD_COLUMNS, "table"))


def _events(messages: list[StoredMessage], subject: str) -> list[str]:
    events = [event_line(m) for m in messages if m.subject == subject]
    return ["Events:", *([f"  {e}" for e in events] or [f"  {NONE}"])]


def _one(got: Listing, name: str, namespace: str | None) -> tuple[dict, dict, dict] | None:
    """(record, object, row) of the object `name` names; None when there is none."""
    for rec, obj, row in zip(got.records, got.objects, got.rows, strict=True):
        meta = obj.get("metadata") or {}
        if name in _names(obj) and (namespace is None or meta.get("namespace") == namespace):
            return rec, obj, row
    return None


def describe(kind: str, name: str, namespace: str, report: dict[str, Any], messages: list[StoredMessage],
             subjects: Subjects, nodes: list | None = None) -> list[str] | None:  # fmt: skip
    """The lines of `describe`, or None when there is no such object (pure: report + log in)."""
    cat = ko.catalog(messages)
    pods = report["pods"]
    if kind == "pods":
        return _pod(listing("pods", [p for p in pods if p["namespace"] == namespace], cat), name, messages, subjects,
                    report["cards"])  # fmt: skip
    if kind in ("jobs", "podgroups"):
        jobs = [j for j in report["jobs"] if j["namespace"] == namespace and (kind == "podgroups" or j["kind"] == "Job")]
        got = _one(listing(kind, jobs, cat, pods), name, namespace)
        if got is None:
            return None
        return _group(kind, *got, pods, messages, subjects)
    if kind == "queues":
        got = _one(listing("queues", report["queues"], cat, all_jobs=report["jobs"]), name, None)
        return None if got is None else _queue(*got, report, messages, subjects)
    if kind == "nodes":
        events = nodes or []
        got = _one(listing("nodes", [node_row(*n) for n in events], cat, nodes=[n[0] for n in events]), name, None)
        return None if got is None else _node(*got, pods, messages, subjects, report["cards"])
    if kind == "cards":
        got = _one(listing("cards", report["cards"], cat), name, None)
        return None if got is None else _card(got[0], pods, messages, subjects, report["cards"])
    return None


def _pod(got: Listing, name: str, messages: list[StoredMessage], subjects: Subjects,
         cards: list[dict]) -> list[str] | None:  # fmt: skip
    one = _one(got, name, None)
    if one is None:
        return None
    pod, obj, row = one
    meta, status = obj["metadata"], obj["status"]
    pairs: list[tuple[str, Any]] = [
        ("Name", pod["name"]), ("Namespace", pod["namespace"]), ("Job", pod["job"]),
        ("PodGroup", row["podgroup"]), ("Queue", row["queue"]), ("Labels", meta.get("labels")),
        ("Created", when(meta)), ("Status", pod["phase"]),
        ("Kubernetes phase", status["phase"]), ("Reason", pod["reason"]), ("Node", pod["node"]),
        ("Cards", row["devices"].split(",") if row["devices"] else ""),
    ]  # fmt: skip
    held = {d["uuid"] for d in pod.get("devices") or []}
    if bad := [c for c in cards if c["uuid"] in held and "health" in c]:  # only then: see `_health`
        pairs.append(("Card health", [f"{c['uuid']} {_health(c, messages)}" for c in bad]))
    return [*fields(pairs), *_events(messages, subjects.job(pod["namespace"], pod["job"] or name))]


def _group(kind: str, job: dict, obj: dict, row: dict, pods: list[dict], messages: list[StoredMessage],
           subjects: Subjects) -> list[str]:  # fmt: skip
    meta, spec = obj["metadata"], obj["spec"]
    mine = [p for p in pods if p["namespace"] == job["namespace"] and (p["job"] or p["name"]) == job["name"]]
    pairs: list[tuple[str, Any]] = [("Name", meta["name"]), ("Namespace", job["namespace"])]
    if kind == "podgroups":
        owners = [f"{o['kind']}/{o['name']}" for o in meta.get("ownerReferences") or []]
        pairs += [("Owner", owners), ("Min member", spec.get("minMember"))]
    else:
        tasks = [f"{t['name']}×{t['replicas']}" for t in spec.get("tasks") or []]
        pairs += [("Min available", spec.get("minAvailable")), ("Max retry", spec.get("maxRetry")),
                  ("Retry count", obj.get("status", {}).get("retryCount", 0)), ("Tasks", tasks)]  # fmt: skip
    pairs += [("Queue", job["queue"]), ("Priority class", spec.get("priorityClassName")),
              ("Created", when(meta)), ("Phase", job["phase"]), ("Reason", job["reason"]),
              ("Pods", f"{row['pods']} running"), ("Nodes", row["nodes"]), ("Cards", row["cards"])]  # fmt: skip
    if job.get("warnings"):
        pairs.append(("Warnings", job["warnings"]))
    return [*fields(pairs), "Pods:", *_pods_table(mine),
            *_events(messages, subjects.job(job["namespace"], job["name"]))]


def _queue(queue: dict, obj: dict, row: dict, report: dict[str, Any], messages: list[StoredMessage],
           subjects: Subjects) -> list[str]:  # fmt: skip
    subject = subjects.queue(queue["name"])
    spec = queue_spec_of(m for m in messages if m.subject == subject)
    pairs: list[tuple[str, Any]] = [
        ("Name", queue["name"]), ("State", queue["state"]), ("Weight", queue.get("weight", "")),
        ("Parent", row.get("parent", "")), ("Created", when(obj["metadata"])),
        ("Capability", row.get("capability", "")), ("Deserved", row.get("deserved", "")),
        ("Allocated", row.get("allocated", "")),
    ]  # fmt: skip
    if spec is not None:
        pairs += [("Spec deserved", amounts(spec.deserved)), ("Guarantee", amounts(spec.guarantee)),
                  ("Reclaimable", spec.reclaimable), ("Priority", spec.priority)]  # fmt: skip
    pairs.append(("PodGroups", ", ".join(f"{row[k]} {k}" for k in ko.QUEUE_COUNTS)))  # `vcctl queue list`'s
    pairs += [("Reason", queue.get("reason", "")), ("Warning", queue.get("warning", ""))]
    jobs = [j for j in report["jobs"] if j["queue"] == queue["name"]]
    table = indent(render(jobs, JOB_COLUMNS, "table")) if jobs else [f"  {NONE}"]
    return [*fields(pairs), "Jobs:", *table, *_events(messages, subject)]


def _node(node: dict, obj: dict, row: dict, pods: list[dict], messages: list[StoredMessage],
          subjects: Subjects, cards: list[dict]) -> list[str]:  # fmt: skip
    meta = obj["metadata"]
    taints = [t["key"] for t in obj["spec"].get("taints") or []]
    pairs = [("Name", node["node"]), ("Labels", meta.get("labels")), ("Taints", taints), ("Created", when(meta)),
             ("CPU", node["cpu"]), ("Memory", node["memory"]), ("Pods", node["pods"]), ("Cards", node["cards"]),
             ("Cards in use", node["cards_in_use"])]  # fmt: skip
    if node.get("note"):  # cards kept off (MIG mode), unhealthy, retired under a pod
        pairs.append(("Note", node["note"]))
    if bad := [c for c in cards if c["node"] == node["node"] and "health" in c]:  # only then
        pairs.append(("Card health", [f"{c['uuid']} {_health(c, messages)}" for c in bad]))
    mine = [p for p in pods if p["node"] == node["node"]]
    return [*fields(pairs), "Pods:", *_pods_table(mine), *_events(messages, subjects.node(node["node"]))]


def _card(card: dict, pods: list[dict], messages: list[StoredMessage], subjects: Subjects,
          cards: list[dict]) -> list[str]:  # fmt: skip
    holders = [p for p in pods if any(d["uuid"] == card["uuid"] for d in p.get("devices") or [])]
    unit = "%" if card["cores_total"] == 100 else f"/{card['cores_total']} cores"
    pairs = [("Name", card["uuid"]), ("Node", card["node"]), ("Type", card["type"]), ("Index", card.get("index")),
             ("Memory", f"{card['memory_used']}MB / {card['memory_total']}MB used"),
             ("Cores", f"{card['cores_used']}{unit} used"),
             ("Slices", f"{card['slices_used']}/{card['slices_total']} used"),
             ("Health", _health(card, messages) if "health" in card else HEALTHY)]  # fmt: skip
    if card.get("note"):  # a card kept off (MIG mode): why no pod lands on it
        pairs.append(("Note", card["note"]))
    if "held_by_count" in card:  # no deviceshare books its family: no slice says it is held
        same = sum(1 for c in cards if c["node"] == card["node"] and c["type"] == card["type"])
        pairs.append(("Held by count", f"{card['held_by_count']}/{same} {card['type']} of {card['node']} held whole "
                                       "by pods (which ones the device plugin gave is not in the log)"))
    return [*fields(pairs), "Pods:", *_pods_table(holders),
            *_events(messages, subjects.card(card["node"], card["uuid"]))]


def _health(card: dict, messages: list[StoredMessage]) -> str:
    """`Unhealthy since #47 2026-12-07T22:55:01Z (4m ago): npu-smi Health: Critical`: the
    state, the event that made it so (with its time where the log kept one) and why."""
    since = card.get("health_since")
    stamp = next((m.headers.get(ko.TIME_HEADER, "") for m in messages if m.seq == since), "")
    at = f" since #{since}" if since else ""
    if stamp:
        at += f" {when({'creationTimestamp': ko.rfc3339(stamp)})}"
    why = f": {card['health_reason']}" if card.get("health_reason") else ""
    return f"{card['health']}{at}{why}"


def _component(name: str, state_dir: str) -> list[str] | None:
    from services.cli.supervise import with_readiness
    from services.cli.up import read_state

    c = next((c for c in with_readiness(read_state(Path(state_dir))) if c["name"] == name), None)
    if c is None:
        return None
    return fields([(k.replace("_", " ").capitalize(), v) for k, v in c.items()])


def cmd_describe(args: argparse.Namespace) -> int:
    from services.cli.get import not_found
    from services.core.simulate.report import build_report

    kind = DESCRIBABLE[args.kind]
    if kind == "components":
        lines = _component(args.name, args.state_dir)
    else:
        url = nats_url(args)
        messages = asyncio.run(read_log(url, args.root))
        nodes = asyncio.run(fetch_node_events(url, args.root)) if kind == "nodes" else None
        lines = describe(kind, args.name, args.namespace, build_report(messages), messages, Subjects(args.root),
                         nodes)  # fmt: skip
    if lines is None:
        print(not_found(kind, args.name), file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("describe", help="everything known about one object (any kind `get` lists), events included")
    p.add_argument("kind", choices=list(DESCRIBABLE), metavar="KIND",
                   help="pod|po, job|vcjob, podgroup|pg, queue|q, node|no, card, component|cs")  # fmt: skip
    p.add_argument("name", metavar="NAME", help="the object's name (a PodGroup also by its job's or pod's)")
    p.add_argument("-n", "--namespace", default="default", help="namespace of a pod, job or podgroup (default: default)")
    connection_args(p)
    p.set_defaults(func=cmd_describe)
