"""`tessera get queues|jobs|pods|nodes|cards|quota`: read a running system (found through `tessera
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
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import yaml

from contracts.api import KIND_RESOURCES
from contracts.events import NodeRegistered, SchedulerConfigured
from contracts.subjects import Subjects
from services.cli import kubeobjects as ko
from services.cli.connection import connect, connection_args, nats_url, open_log
from services.cli.progress import progress
from services.cli.tables import amounts, render
from services.cli.up import read_state
from services.core.devices.mig import MIG_WORDS
from services.core.devices.mig import kept_off as mig_kept_off
from services.core.simulate.report import undecodable_warning
from services.runtime.eventlog.model import EventLog, StoredMessage
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
#: a card's state in `get cards`' HEALTH column when the report says nothing (`report._health`)
HEALTHY = "Healthy"
POD_COLUMNS = ("namespace", "name", "phase", "node", "devices", "reason")
JOB_COLUMNS = ("namespace", "name", "queue", "phase", "reason")
PODGROUP_COLUMNS = ("namespace", "name", "kind", "queue", "phase")
#: `get vcjob|pg`'s columns: the printer columns of Volcano's CRDs (the chart's crds/, as
#: `kubectl get` prints them): STATUS, MINAVAILABLE / MINMEMBER, RUNNINGS, AGE; their
#: priority-1 QUEUE is `-o wide`'s first
GET_JOB_COLUMNS = ("namespace", "name", "status", "minavailable", "runnings", "age")
GET_PODGROUP_COLUMNS = ("namespace", "name", "status", "minmember", "runnings", "age")
#: Every name kubectl/vcctl users type for a kind → the kind (plural, as `get` lists it).
KINDS = {
    **dict.fromkeys(("pods", "pod", "po"), "pods"),
    **dict.fromkeys(("jobs", "job", "vcjob", "vcjobs", "vj"), "jobs"),
    **dict.fromkeys(("podgroups", "podgroup", "pg"), "podgroups"),
    **dict.fromkeys(("queues", "queue", "q"), "queues"),
    **dict.fromkeys(("nodes", "node", "no"), "nodes"),
    **dict.fromkeys(("cards", "card"), "cards"),
    **dict.fromkeys(("components", "component", "cs"), "components"),
    **dict.fromkeys(("quota", "quotas", "resourcequota", "resourcequotas"), "quotas"),
}
#: `get components`: what `up` supervises, from its state file (no NATS needed: it is how you
#: see why NATS or a service is down)
COMPONENT_COLUMNS = ("name", "state", "pid", "restarts", "last_error")
#: How often (in stream sequence) a replay redraws its progress: often enough to move, rarely
#: enough that drawing costs nothing next to decoding.
PROGRESS_EVERY = 1000
#: `vcctl queue list`'s name, weight, state and parent, with the amounts side by side.
QUEUE_COLUMNS = ("name", "state", "weight", "parent", "capability", "deserved", "allocated", "warning")
#: `get queues`: the same, and between them `vcctl queue list`'s PodGroup counts (the
#: Queue's status; the simulate report's records have none)
GET_QUEUE_COLUMNS = (*QUEUE_COLUMNS[:4], *ko.QUEUE_COUNTS, *QUEUE_COLUMNS[4:])
NODE_REGISTERED = frozenset({NodeRegistered.type_name()})
SCHEDULER_CONFIGURED = frozenset({SchedulerConfigured.type_name()})
#: `kubectl get quota`'s used/hard per name, and beside it what Tessera's own jobs hold (the
#: rest of `used` is other pods' use, as the API server's status.used counts it)
QUOTA_COLUMNS = ("namespace", "name", "used/hard", "tessera")


async def fetch_cards(url: str, root: str) -> list[dict]:
    nc = await connect(url)
    try:
        reply = await nc.request(f"{Subjects(root).api('allocator')}.cards", b"", timeout=10)
        return json.loads(reply.data)
    finally:
        await nc.close()


class NodeCards(NamedTuple):
    """A node's last registration, how many of the cards it lists are in use, and the cards it
    no longer lists that pods still hold (retired under them: `node_row` notes them)."""

    node: NodeRegistered
    in_use: int
    retired_held: tuple[str, ...] = ()


async def fetch_nodes(url: str, root: str) -> list[dict]:
    """Each node's allocatable (its last NodeRegistered) and its cards: how many of each type,
    and how many hold at least one slice now (from the ledger heads, no replay)."""
    return [node_row(*n) for n in await fetch_node_events(url, root)]


async def fetch_node_events(url: str, root: str) -> list[NodeCards]:
    """Each node's last NodeRegistered and how many of its cards are in use, by node name: those
    holding a slice (the ledger heads, no replay), and where a scheduler's configuration books no
    slice for a family (no deviceshare, the usual Ascend conf) those its pods hold whole by count
    — read from a replay, as only the pods say it (a full node read 0/8 in use). A retired card
    a pod still holds is not one of the node's cards: it is named apart (`get nodes` read 8/7)."""
    log = await open_log(url, root)
    try:
        return await node_events(log)
    finally:
        await log.close()


async def node_events(log: EventLog) -> list[NodeCards]:
    """`fetch_node_events` over an open log."""
    in_use: dict[str, int] = {}
    retired: dict[str, list[str]] = {}
    for msg in await log.last_per_subject(log.subjects.all_cards()):
        usage = getattr(await decode_stored(msg), "usage", None)  # state-carrying card events
        if usage is not None and usage.slices_used:
            node, card = log.subjects.parse(msg.subject)[1][:2]
            if usage.retired:
                retired.setdefault(node, []).append(card)
            else:
                in_use[node] = in_use.get(node, 0) + 1
    if await _counts_cards(log):
        from services.core.simulate.report import build_report, nodes_held_by_count

        for node, n in nodes_held_by_count(build_report([m async for m in log.replay(1)])).items():
            in_use[node] = in_use.get(node, 0) + n
    rows = []
    for msg in await log.last_per_subject(log.subjects.all_nodes()):
        node = await decode_stored(msg, types=NODE_REGISTERED)
        if not isinstance(node, NodeRegistered):
            continue
        rows.append(NodeCards(node, in_use.get(node.node, 0), tuple(sorted(retired.get(node.node, [])))))
    return sorted(rows, key=lambda r: r.node.node)


async def _counts_cards(log: EventLog) -> bool:
    """Whether a scheduler's last configuration leaves a device family to whole cards by count
    (`config.counted_vendors`: no deviceshare books it). A log with none: the built-in default's
    (deviceshare books every family)."""
    from services.core.scheduling.config import ConfigError, counted_vendors, parse_conf

    for msg in await log.last_per_subject(f"{log.subjects.root}.ev.sched.>"):
        record = await decode_stored(msg, types=SCHEDULER_CONFIGURED)
        if isinstance(record, SchedulerConfigured):
            try:
                if counted_vendors(parse_conf(record.conf)):
                    return True
            except ConfigError:
                continue
    return False


def node_row(node: NodeRegistered, cards_in_use: int, retired_held: tuple[str, ...] = ()) -> dict:
    """Allocatable as kubectl shows it (cores, Gi) and cards as `8×Ascend910B3`; a note names
    the cards the node reports unhealthy (the kubelet leaves them out of allocatable) and the
    retired ones pods still hold (`retired_held`, counted in no figure of the row)."""
    by_type: dict[str, int] = {}
    for card in node.cards:
        by_type[card.type] = by_type.get(card.type, 0) + 1
    row = {
        "node": node.node,
        "cpu": f"{node.cpu_milli / 1000:g}",
        "memory": f"{node.memory_mib / 1024:g}Gi",
        "pods": node.pods,
        "cards": ",".join(f"{n}×{t}" for t, n in sorted(by_type.items())) or "-",
        "cards_in_use": f"{cards_in_use}/{len(node.cards)}",
    }
    notes = []
    kept_off = sum(1 for card in node.cards if mig_kept_off(card))
    if kept_off:
        notes.append(f"{kept_off} card{'s' if kept_off > 1 else ''} kept off, in {MIG_WORDS}")
    if unhealthy := [card.uuid for card in node.cards if not card.healthy]:
        notes.append(f"unhealthy: {', '.join(unhealthy)}")
    if retired_held:
        notes.append(f"retired, still held by pods: {', '.join(retired_held)}")
    if notes:  # only then: other nodes' rows stay as they were
        row["note"] = "; ".join(notes)
    return row


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
    """Flatten nested fields for the table; `-o records` keeps the records as they are."""
    out = []
    for r in rows:
        r = dict(r)
        if what == "pods":
            r["devices"] = ",".join(device_text(d) for d in r["devices"])
            r["node"] = r["node"] or ""
        if what == "quotas":
            r["used/hard"] = ", ".join(f"{k}: {r['used'][k]}/{v}" for k, v in r["hard"].items())
            r["tessera"] = ", ".join(f"{k}: {v}" for k, v in r["tessera"].items())
        if what == "cards":  # the column shows only when a card is not (`with_notes`)
            r.setdefault("health", HEALTHY)
        if what == "queues":
            for k in ("capability", "deserved", "allocated"):
                r[k] = amounts(r.get(k) or {})
            if r["name"] == "root":  # the root of the tree has no parent (vcctl prints none)
                r["parent"] = ""
        out.append(r)
    return out


@dataclass
class Listing:
    """One kind as `get` read it: the records (`-o records`), the Kubernetes objects
    (`-o json|yaml`) and the table rows, index for index."""

    records: list[dict]
    objects: list[dict]
    rows: list[dict]

    def pick(self, keep: list[int]) -> Listing:
        return Listing([self.records[i] for i in keep], [self.objects[i] for i in keep],
                       [self.rows[i] for i in keep])  # fmt: skip


def _names(obj: dict) -> tuple[str, ...]:
    """The names `get KIND NAME` finds an object by: its own, and for a PodGroup its owner's
    (a Tessera user knows the job, Volcano names the group after a uid)."""
    meta = obj.get("metadata") or {}
    owners = tuple(o["name"] for o in meta.get("ownerReferences") or [] if obj.get("kind") == "PodGroup")
    return (meta.get("name", ""), *owners)


def listing(what: str, records: list[dict], cat: ko.Catalog, pods: list[dict] | None = None,
            nodes: list[NodeRegistered] | None = None, all_jobs: list[dict] | None = None) -> Listing:  # fmt: skip
    """Records → objects and rows (AGE and the wide columns come from the objects). `all_jobs`:
    every job record, for a queue's PodGroup counts (a record that has them, read from a
    cluster's Queue, keeps its own)."""
    pods = pods or []
    by_job: dict[tuple[str, str], list[dict]] = {}
    for p in pods:
        by_job.setdefault((p["namespace"], p["job"] or p["name"]), []).append(p)
    jobs = {(j["namespace"], j["name"]): j for j in records} if what in ("jobs", "podgroups") else {}
    objects: list[dict]
    groups = cat_jobs(cat, records) if what == "pods" else {}
    if what == "pods":
        objects = [ko.pod_object(cat, p, groups) for p in records]
    elif what == "jobs":
        objects = [ko.job_object(cat, j, by_job.get(k, [])) for k, j in jobs.items()]
    elif what == "podgroups":
        objects = [ko.podgroup_object(cat, j, by_job.get(k, [])) for k, j in jobs.items()]
    elif what == "queues":
        counts = ko.queue_counts(all_jobs or [])
        objects = [ko.queue_object(cat, q, {k: q[k] for k in ko.QUEUE_COUNTS if k in q} or counts.get(q["name"]))
                   for q in records]  # fmt: skip
    elif what == "nodes":
        objects = [ko.node_object(cat, n) for n in nodes or []]
    elif what == "cards":
        objects = [ko.card_object(c) for c in records]
    elif what == "quotas":
        objects = [quota_object(q) for q in records]
    else:
        objects = [ko.component_object(c) for c in records]
    rows = _table_view(what, records) if what in ("pods", "jobs", "queues", "quotas", "cards") else [dict(r) for r in records]
    if what == "cards":
        _held_cells(rows)
    now = ko.now()
    for row, obj, rec in zip(rows, objects, records, strict=True):
        meta = obj.get("metadata") or {}
        row["age"] = ko.age(meta.get("creationTimestamp", ""), now) if meta.get("creationTimestamp") else ""
        if what == "podgroups":
            row["name"] = meta["name"]
            row["owner"] = ",".join(o["name"] for o in meta.get("ownerReferences") or [])
        if what == "jobs":  # the CRD's printer columns: .status.state.phase, .status.minAvailable, .status.running
            row.update(status=obj["status"]["state"]["phase"], minavailable=obj["status"].get("minAvailable"),
                       runnings=obj["status"].get("running"))  # fmt: skip
        if what == "podgroups":  # .status.phase, .spec.minMember, .status.running
            row.update(status=obj["status"]["phase"], minmember=obj["spec"].get("minMember"),
                       runnings=obj["status"].get("running"))  # fmt: skip
        if what in ("jobs", "podgroups"):
            mine = by_job.get((rec["namespace"], rec["name"]), [])
            row["pods"] = f"{sum(p['phase'] == 'Running' for p in mine)}/{len(mine)}"
            row["nodes"] = ",".join(sorted({p["node"] for p in mine if p.get("node")}))
            row["cards"] = sum(len(p.get("devices") or []) for p in mine)
        if what == "queues":
            row.update({k: obj["status"].get(k, 0) for k in ko.QUEUE_COUNTS})
        if what == "pods":
            annotations = meta.get("annotations") or {}
            row["podgroup"] = annotations.get(ko.GROUP_NAME, "")
            # a plain pod in the default queue carries no queue annotation: its job's queue
            row["queue"] = annotations.get(ko.QUEUE_NAME) or groups.get((rec["namespace"], rec["job"] or rec["name"]), {}).get("queue", "")
            row["labels"] = ",".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items()))
    got = Listing(list(records), objects, rows)
    if what in ("jobs", "podgroups"):  # as the API server lists objects: by namespace, then name
        return got.pick(sorted(range(len(objects)), key=lambda i: (objects[i]["metadata"].get("namespace", ""),
                                                                   objects[i]["metadata"]["name"])))  # fmt: skip
    return got


def _held_cells(rows: list[dict]) -> None:
    """`held_by_count` as `8/8`: of the node's cards of that type, how many pods hold whole by
    count (no deviceshare books the family, so no row's slices show it; which ones the device
    plugin gave is not in the log)."""
    of_type: dict[tuple[str, str], int] = {}
    for r in rows:
        of_type[(r["node"], r["type"])] = of_type.get((r["node"], r["type"]), 0) + 1
    for r in rows:
        if "held_by_count" in r:
            r["held_by_count"] = f"{r['held_by_count']}/{of_type[(r['node'], r['type'])]}"


def quota_object(q: dict) -> dict:
    """A ResourceQuota as the API server shows it (`status.used` is the whole namespace's)."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": q["name"], "namespace": q["namespace"]},
            "spec": {"hard": q["hard"]}, "status": {"hard": q["hard"], "used": q["used"]}}  # fmt: skip


def cat_jobs(cat: ko.Catalog, pods: list[dict]) -> dict[tuple[str, str], dict]:
    """The job records pods hang off, rebuilt from the catalog (a pod's object names its group)."""
    out: dict[tuple[str, str], dict] = {}
    for p in pods:
        key = (p["namespace"], p["job"] or p["name"])
        born = cat.jobs.get(key)
        if born is not None and born.spec is not None and key not in out:
            out[key] = {"namespace": key[0], "name": key[1], "kind": born.spec.kind, "queue": born.spec.queue}
    return out


async def fetch_listing(url: str, root: str, what: str, namespace: str | None) -> tuple[Listing, str]:
    """Read the log once and list `what` (`namespace` None: every namespace); also the warning
    about undecodable events, for stderr."""
    if what == "nodes":
        log = await open_log(url, root)
        try:
            births = ko.catalog([m async for m in log.replay(1, log.subjects.all_nodes())])
        finally:
            await log.close()
        nodes = await fetch_node_events(url, root)
        return listing("nodes", [node_row(*n) for n in nodes], births, nodes=[n[0] for n in nodes]), ""
    return listing_of(await read_log(url, root), what, namespace)


def listing_of(messages: list[StoredMessage], what: str, namespace: str | None) -> tuple[Listing, str]:
    """`fetch_listing` over a log already read (pure): the listing and the undecodable warning."""
    from services.core.simulate.report import build_report

    report = build_report(messages)
    cat = ko.catalog(messages)
    records = report.get("jobs" if what == "podgroups" else what, [])
    pods = report["pods"]
    if what == "jobs":  # Volcano Jobs only: a Pod's or PodGroup's job is no vcjob
        records = [r for r in records if r.get("kind") == "Job"]
    if what == "podgroups":  # the groups a cluster holds, in the phase they show (a pod's
        # group being ended Running, ended Completed), as a cluster's `get pg` lists them; a
        # Volcano Job's group is deleted while it is ended or restarted (Volcano's killJob), a
        # refused one never was (`get pods` says why its pods wait)
        records = [{**r, "phase": ph} for r in records if (ph := ko.podgroup_phase(r))]
    if namespace is not None and what in ("pods", "jobs", "podgroups", "quotas"):
        records = [r for r in records if r["namespace"] == namespace]
    return listing(what, records, cat, pods, all_jobs=report["jobs"]), undecodable_warning(report)


def kube_listing(kubeconfig: str, what: str, namespace: str) -> Listing:
    """A cluster's objects: the records as `kuberows` reads them, and for `-o json|yaml` and
    `-l` the objects the API server returned (their labels, uids and status as written)."""
    from services.cli import kubeverbs

    records, objects, pods = kubeverbs.listed(kubeconfig, what, namespace)
    built = listing(what, records, ko.Catalog(), pods)
    served = {_key(o): o for o in objects}
    return Listing(built.records, [served.get(_key(o), o) for o in built.objects], built.rows)


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def cmd_get(args: argparse.Namespace) -> int:
    what = KINDS[args.what]
    try:
        selector = ko.parse_selector(args.selector) if args.selector else []
    except ko.SelectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.watch:
        from services.cli.watch import watch

        return watch(args, what, selector)
    if what == "components":
        from services.cli.supervise import with_readiness

        records = with_readiness(read_state(Path(args.state_dir)))
        return _print(args, what, listing(what, records, ko.Catalog()), selector)
    if args.kubeconfig:
        from services.cli import kubeverbs

        if what not in kubeverbs.KUBE_KINDS:
            print(f"error: with --kubeconfig, get lists {', '.join(kubeverbs.KUBE_KINDS)} "
                  f"(not {what}: those come from the log)", file=sys.stderr)  # fmt: skip
            return 2
        try:
            got = kube_listing(args.kubeconfig, what, "" if args.all_namespaces else args.namespace)
        except kubeverbs.Refused as exc:  # e.g. no Volcano CRDs: the chart's crds.install
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return _print(args, what, got, selector)
    got, warning = asyncio.run(fetch_listing(nats_url(args), args.root, what,
                                             None if args.all_namespaces else args.namespace))  # fmt: skip
    if warning:
        print(warning, file=sys.stderr)
    return _print(args, what, got, selector)


def select(got: Listing, selector: list[tuple[str, str, str]]) -> Listing:
    if not selector:
        return got
    return got.pick([i for i, o in enumerate(got.objects)
                     if ko.matches(selector, (o.get("metadata") or {}).get("labels") or {})])  # fmt: skip


def not_found(what: str, name: str) -> str:
    """kubectl's words for a missing object, the resource named as the API server names it."""
    return f'Error from server (NotFound): {RESOURCES[what]} "{name}" not found'


def columns_of(what: str, output: str, all_namespaces: bool = True) -> tuple[str, ...]:
    """kubectl's columns: NAMESPACE only when every namespace is listed (`-A`)."""
    cols = COLUMNS[what] + WIDE.get(what, ()) if output == "wide" else COLUMNS[what]
    return cols if all_namespaces else tuple(c for c in cols if c != "namespace")


def with_notes(columns: tuple[str, ...], rows: list[dict]) -> tuple[str, ...]:
    """A HEALTH column when a card is Unhealthy or Retired (every row then says its card's
    state), a NOTE column when a row carries one (a card kept off: ``devices/mig.py``); tables
    of rows without either stay as they were."""
    if any(r.get("health", HEALTHY) != HEALTHY for r in rows):
        columns = (*columns, "health")
    return (*columns, "note") if any(r.get("note") for r in rows) else columns


def _print(args: argparse.Namespace, what: str, got: Listing, selector: list[tuple[str, str, str]]) -> int:
    """The objects `args.names` picks (the ones that exist, and kubectl's NotFound line on
    stderr for each that does not: exit 1), in `args.output`'s form."""
    got = select(got, selector)
    code = 0
    if args.names:
        keep: list[int] = []
        for n in args.names:
            found = [i for i, o in enumerate(got.objects) if n in _names(o)]
            if not found:
                print(not_found(what, n), file=sys.stderr)
                code = 1
            keep += [i for i in found if i not in keep]
        got = got.pick(keep)
    if args.output in ("json", "yaml"):
        single = len(args.names) == 1 and len(got.objects) == 1
        doc = got.objects[0] if single else ko.as_list(got.objects)
        if args.names and not got.objects:
            return code  # kubectl prints no empty List after a NotFound
        print(json.dumps(doc, indent=4) if args.output == "json" else yaml.safe_dump(doc, sort_keys=False).rstrip("\n"))
    elif args.output == "records":
        print(json.dumps(got.records, indent=2))
    elif got.rows or not args.names:
        if not got.rows and not args.names:
            ns = "" if args.all_namespaces or what not in ("pods", "jobs", "podgroups", "quotas") else f" in {args.namespace} namespace"
            print(f"No resources found{ns}.", file=sys.stderr)
            return code
        columns = with_notes(columns_of(what, args.output, args.all_namespaces), got.rows)
        if what == "cards" and any("held_by_count" in r for r in got.rows):  # only then: see _held_cells
            columns = (*columns, "held_by_count")
        print(render(got.rows, columns, "table"))
    return code


#: `get`'s tables: the report's columns (simulate and replay print those too) and, for the
#: objects the log saw born, kubectl's AGE.
COLUMNS = {"pods": (*POD_COLUMNS, "age"), "jobs": GET_JOB_COLUMNS, "podgroups": GET_PODGROUP_COLUMNS,
           "queues": GET_QUEUE_COLUMNS, "cards": CARD_COLUMNS, "nodes": (*NODE_COLUMNS, "age"),
           "components": COMPONENT_COLUMNS, "quotas": QUOTA_COLUMNS}  # fmt: skip
#: `-o wide`'s extra columns, kubectl's habit: what a second look needs.
WIDE = {"pods": ("job", "podgroup", "queue", "labels"),
        "jobs": ("queue", "reason", "pods", "nodes", "cards"),
        "podgroups": ("queue", "kind", "owner", "pods", "nodes", "cards", "reason")}  # fmt: skip
#: The resource a NotFound names, as the API server says it (CRDs with their group).
RESOURCES = {"pods": KIND_RESOURCES["Pod"], "jobs": KIND_RESOURCES["Job"], "podgroups": KIND_RESOURCES["PodGroup"],
             "queues": KIND_RESOURCES["Queue"], "nodes": KIND_RESOURCES["Node"], "cards": "cards.tessera.io",
             "components": "componentstatuses", "quotas": KIND_RESOURCES["ResourceQuota"]}  # fmt: skip
#: `get -o`: a table (or a wider one), Kubernetes objects, or the simulate report's records.
GET_OUTPUTS = ("table", "wide", "json", "yaml", "records")


def kubeconfig_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default="", metavar="PATH",
                   help="act on the cluster's Volcano objects (Queue, Job, PodGroup, Command) "
                        "through this kubeconfig, as vcctl does, instead of the log")  # fmt: skip


def add_parsers(sub: argparse._SubParsersAction) -> None:
    get = sub.add_parser("get", help="list queues, jobs, podgroups, pods, nodes, cards or quotas")
    get.add_argument("what", choices=list(KINDS), metavar="KIND",
                     help="pods|pod|po, jobs|job|vcjob, podgroups|pg, queues|queue|q, nodes|no, cards, "
                          "components|cs (what `up` supervises), quota|resourcequota (namespaces' "
                          "ResourceQuotas: used/hard and what Tessera's jobs hold)")  # fmt: skip
    get.add_argument("names", nargs="*", metavar="NAME", help="only these objects (exit 1 if one is missing)")
    get.add_argument("-n", "--namespace", default="default", help="namespace of pods and jobs (default: default)")
    get.add_argument("-A", "--all-namespaces", action="store_true", help="pods and jobs of every namespace")
    get.add_argument("-o", "--output", choices=GET_OUTPUTS, default="table",
                     help="table (default); wide: more columns; json|yaml: Kubernetes objects (a List, or the "
                          "one object named); records: the simulate report's records as JSON")  # fmt: skip
    get.add_argument("-l", "--selector", default="", metavar="SELECTOR",
                     help="label selector: k=v, k!=v, k, !k; comma-separated terms must all hold")  # fmt: skip
    get.add_argument("-w", "--watch", action="store_true",
                     help="print the list, then each object again whenever it changes, until Ctrl-C")  # fmt: skip
    connection_args(get)
    kubeconfig_arg(get)
    get.set_defaults(func=cmd_get)
