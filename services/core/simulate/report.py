"""The simulation report, derived ONLY from the event log (so `--replay` reproduces it exactly).

Pods, jobs, evictions, queues (state, deserved by proportion water-filling over the final
state, allocated), cards (from the ledger events' usage), namespace quotas (where there are
any) and metrics. Rejected objects appear
with the rule that rejected them: a Pod as a pods[] entry in phase Rejected, a Job/PodGroup as
a jobs[] entry, a Queue as a queues[] entry in state Rejected.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contracts.devices import CardSpec, CardUsage
from contracts.events import (
    CardRegistered,
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobRejected,
    JobSubmitted,
    JobUnschedulable,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    QueueCreated,
    QueueDeleted,
    QueueStateChanged,
    SchedulerConfigured,
    SliceReleased,
    SliceReserved,
    TaskFinished,
    TaskStarted,
)
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from services.core.devices.mig import card_note
from services.core.ledger import core_capacity
from services.core.scheduling import podreasons
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import (
    DEFAULT_CONF,
    DEVICE_SWITCHES,
    ConfigError,
    SchedulerConf,
    conf_from_mapping,
    parse_conf,
)
from services.core.scheduling.decide import open_session
from services.core.scheduling.lifecycle import counts_a_retry
from services.core.scheduling.plugins.shares import shares_of
from services.runtime.eventlog.model import StoredMessage

SESSION_HEADER = "Tessera-Session"
ENDED = frozenset({"Aborted", "Failed", "Terminated"})


def build_report(messages: Iterable[StoredMessage]) -> dict[str, Any]:
    reg = default_registry()
    projection = st.ClusterProjection()
    pods: dict[tuple[str, str, str], dict[str, Any]] = {}
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    kinds: dict[tuple[str, str], str] = {}
    evictions: list[dict[str, Any]] = []
    queues: dict[str, dict[str, Any]] = {}
    cards: dict[str, tuple[CardSpec, CardUsage]] = {}
    cycles = 0
    bound = 0
    rejected_placements = 0
    skipped: list[dict[str, Any]] = []
    scheduler_conf = ""  # the last configuration the scheduler recorded (queue shares depend on it)
    for msg in messages:
        kind = msg.headers.get("Tessera-Type", "")
        try:
            ev = reg.decode(kind, msg.data)
        except UnknownEventType:
            continue
        except UndecodableEvent as exc:  # as the services do: count it, say so, go on
            skipped.append({"seq": msg.seq, "subject": msg.subject, "type": kind,
                            "reason": str(exc)})  # fmt: skip
            continue
        cycles = max(cycles, int(msg.headers.get(SESSION_HEADER, "0") or 0))
        if (moved := projection.apply(msg.seq, ev)) is not None:
            job = projection.jobs[moved]
            j = jobs.get((job.spec.namespace, job.spec.name))
            if j is not None:  # as the JobPhaseChanged it stands for would show it
                j.update(phase=job.phase, reason="")
        match ev:
            case QueueCreated():
                queues[ev.spec.name] = {"name": ev.spec.name, "state": ev.spec.state, "deserved": {},
                                        "allocated": {}, "reason": ""}  # fmt: skip
            case QueueStateChanged():
                if ev.queue in queues:
                    queues[ev.queue]["state"] = ev.state
            case QueueDeleted():  # gone, as `kubectl get` no longer lists deleted objects
                queues.pop(ev.queue, None)
            case JobRejected():
                reason = "; ".join(ev.reasons)
                kind = reason.split(":", 1)[0]
                if kind == "Pod":
                    pods[(ev.namespace, ev.name, ev.name)] = _pod(
                        ev.namespace, ev.name, "", "Rejected", reason
                    )
                elif kind == "Queue":
                    queues[ev.name] = {"name": ev.name, "state": "Rejected", "deserved": {},
                                       "allocated": {}, "reason": reason}  # fmt: skip
                else:
                    jobs[(ev.namespace, ev.name)] = {"namespace": ev.namespace, "name": ev.name, "kind": kind,
                                                     "queue": "", "phase": "Rejected", "reason": reason}  # fmt: skip
                for pod in ev.pods:  # they exist, unbound: the scheduler ignores a missing group
                    pods[(ev.namespace, ev.name, pod)] = _pod(ev.namespace, pod, ev.name, "Pending",
                                                              f"waiting for PodGroup {ev.name}, "
                                                              f"which was refused: {reason}")  # fmt: skip
            case JobSubmitted():
                spec = ev.spec
                if jobs.get((spec.namespace, spec.name), {}).get("phase") == "Rejected":
                    for key in [k for k in pods if k[:2] == (spec.namespace, spec.name)]:
                        del pods[key]  # they waited for the refused group; now they are its pods
                kinds[(spec.namespace, spec.name)] = spec.kind
                jobs[(spec.namespace, spec.name)] = {
                    "namespace": spec.namespace, "name": spec.name, "kind": spec.kind,
                    "queue": spec.queue, "phase": spec.phase or "Pending", "reason": "",
                }  # fmt: skip
                if ev.warnings:  # values admission changed (clamps), as the apply reply said
                    jobs[(spec.namespace, spec.name)]["warnings"] = list(ev.warnings)
                for pod, _, _, _ in st.task_names(spec):
                    pods[(spec.namespace, spec.name, pod)] = _pod(
                        spec.namespace, pod, spec.name, "Pending", ""
                    )
            case JobUpdated():
                _scaled(pods, projection, ev)
            case JobPhaseChanged():
                j = jobs.get((ev.namespace, ev.name))
                if j is not None:
                    if counts_a_retry(ev.phase, ev.reason, j.get("phase", "")):  # Volcano's status.retryCount
                        j["retries"] = j.get("retries", 0) + 1
                    j["phase"] = ev.phase
                    j["reason"] = ev.reason
            case JobUnschedulable():
                j = jobs.get((ev.namespace, ev.name))
                if j is not None:
                    j["reason"] = ev.reason
                # a job-level rule in the words its PodScheduled condition says on a cluster (a
                # closed queue's, where the scheduler's reason said "quota insufficient"); the
                # nodes' reasons as the scheduler said them (the condition's are shorter)
                said = ev.reason
                if not ev.node_reasons:
                    live = projection.jobs.get(f"{ev.namespace}/{ev.name}")
                    said = podreasons.message(ev.reason, ev.node_reasons, len(projection.nodes),
                                              live.spec if live else None, ev.why, ev.reason_counts)  # fmt: skip
                for key, p in pods.items():
                    if key[:2] == (ev.namespace, ev.name) and p["phase"] in (
                        "Pending",
                        "Pipelined",
                    ):
                        p["reason"] = said
            case PlacementProposed():
                for tp in ev.placements:
                    p = pods.get((ev.namespace, ev.name, tp.task))
                    if p is not None and p["phase"] in ("Pending", "Pipelined"):
                        # reserved in the session: the node and the cards it waits for
                        p.update(phase="Pipelined", node=tp.node,
                                 devices=[_device(cards, s.card, s.slice) for s in tp.slices])
            case PlacementRejected():
                rejected_placements += 1
                for key, p in pods.items():  # a refused proposal reserves nothing: they wait
                    if key[:2] == (ev.namespace, ev.name) and p["phase"] == "Pipelined":
                        p.update(phase="Pending", node=None, devices=[])
            case PlacementCommitted():
                for tp in ev.placements:
                    p = pods.get((ev.namespace, ev.name, tp.task))
                    if p is None:
                        continue
                    bound += 1
                    p.update(phase="Bound", node=tp.node, reason="")
                    p["devices"] = [_device(cards, s.card, s.slice) for s in tp.slices]
            case TaskStarted():
                p = pods.get((ev.namespace, ev.name, ev.task))
                if p is not None:
                    p["phase"] = "Running"
            case TaskFinished():
                p = pods.get((ev.namespace, ev.name, ev.task))
                job = jobs.get((ev.namespace, ev.name))
                ending = job is not None and (job["phase"] in ENDED or job["phase"] in st.ENDING_PHASES)
                if p is not None:
                    if p["phase"] in ("Succeeded", "Failed") and not (ev.reason == "restarted" or
                                                                      (ev.reason == "evicted" and not ending)):
                        # a terminal phase is final: a late second end (a lagging monitor's, a
                        # kill asked for what the log showed running as it finished) changes
                        # nothing, as the projection's `ends_again` and audit have it — read
                        # first, a kill turned a Succeeded pod `Failed killed: job finished`.
                        # Only a restart (or a rerun's eviction) makes it again
                        pass
                    elif ev.reason in ("evicted", "deleted") and ending:
                        # stopped because its job ended or is ending (suspended, failed, asked to
                        # terminate or complete): not recreated — a terminated job's pods read
                        # "Pending … evicted" as though they would run again
                        p.update(phase="Evicted", reason=job["reason"] or job["phase"])
                    elif ev.reason in st.BACK_TO_PENDING:
                        p.update(phase="Pending", node=None, devices=[], reason=ev.reason)
                    elif ev.reason == "evicted-deleted":
                        p.update(phase="Evicted", reason="evicted")
                    elif ev.reason == "killed":
                        p.update(phase="Failed", reason="killed: job finished")
                    else:
                        p["phase"] = "Succeeded" if ev.exit_code == 0 else "Failed"
                        if ev.exit_code:
                            p["reason"] = f"exit code {ev.exit_code}"
                    if ev.task not in projection.tasks.get(f"{ev.namespace}/{ev.name}", {ev.task: None}):
                        del pods[(ev.namespace, ev.name, ev.task)]  # scaled down: it left its job
            case EvictionRequested():
                evictions.append(
                    {
                        "namespace": ev.namespace,
                        "name": ev.task,
                        "job": ev.name,
                        "reason": ev.reason,
                    }
                )
            case JobDeleted():  # gone, as `kubectl get` no longer lists deleted objects
                jobs.pop((ev.namespace, ev.name), None)
                for key in [k for k in pods if k[:2] == (ev.namespace, ev.name)]:
                    del pods[key]
            case CardRegistered():
                cards[ev.card.uuid] = (ev.card, ev.usage)
            case NodeRegistered():
                # a node's cards as it registers them: after `compact`, a card in use keeps only
                # its last ledger event (a SliceReserved), no CardRegistered to learn it from —
                # `get cards` left such cards out and `get po` lost their aiCore totals
                for c in ev.cards:
                    cards[c.uuid] = (c, cards[c.uuid][1] if c.uuid in cards else CardUsage())
            case SliceReserved() | SliceReleased():
                if ev.card in cards:
                    cards[ev.card] = (cards[ev.card][0], ev.usage)
            case SchedulerConfigured():
                scheduler_conf = ev.conf
            case _:
                pass
    _queue_shares(projection, queues, scheduler_conf)
    card_rows = []
    mem_total = mem_used = core_total = core_used = 0
    for spec, usage in sorted(cards.values(), key=lambda c: (c[0].node, c[0].type, c[0].index)):
        cap = core_capacity(spec)
        card_rows.append({
            "node": spec.node, "uuid": spec.uuid, "type": spec.type, "index": spec.index,
            "memory_total": spec.memory, "memory_used": usage.memory_used, "cores_total": cap,
            "cores_used": usage.cores_used, "slices_used": usage.slices_used,
            "slices_total": spec.split_count,
        })  # fmt: skip
        if note := card_note(spec, usage):  # only then: other cards' rows stay as they were
            card_rows[-1]["note"] = note
        mem_total += spec.memory
        mem_used += usage.memory_used
        core_total += cap
        core_used += usage.cores_used
    pod_rows = sorted(pods.values(), key=lambda p: (p["namespace"], p["job"], p["name"]))
    phases: dict[str, int] = {}
    for p in pod_rows:
        phases[p["phase"]] = phases.get(p["phase"], 0) + 1
    report: dict[str, Any] = {
        "pods": pod_rows,
        "jobs": sorted(jobs.values(), key=lambda j: (j["namespace"], j["name"])),
        "evictions": evictions,
        "queues": sorted(queues.values(), key=lambda q: q["name"]),
        "cards": card_rows,
        "metrics": {
            "cycles": cycles,
            "pods_bound": bound,
            "pods_by_phase": dict(sorted(phases.items())),
            "placements_rejected": rejected_placements,
            "evictions": len(evictions),
            "card_memory_allocated_ratio": round(mem_used / mem_total, 6) if mem_total else 0.0,
            "card_core_allocated_ratio": round(core_used / core_total, 6) if core_total else 0.0,
            "cards_in_use": sum(1 for c in card_rows if c["slices_used"]),
            "cards_total": len(card_rows),
        },
    }
    quotas = _quotas(projection)
    if quotas:  # only then: reports of clusters without quotas stay as they were
        report["quotas"] = quotas
    if skipped:  # only then: a clean log's report stays byte-identical to what it was
        report["undecodable"] = skipped
    return report


def undecodable_warning(report: dict[str, Any]) -> str:
    """One line for a reader's stderr about the events a report had to skip ("" if none)."""
    skipped = report.get("undecodable", [])
    if not skipped:
        return ""
    first = ", ".join(f"#{s['seq']} {s['type']}" for s in skipped[:5])
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return f"warning: {len(skipped)} undecodable event(s) skipped: {first}{more}"


def _pod(ns: str, name: str, job: str, phase: str, reason: str) -> dict[str, Any]:
    return {"namespace": ns, "name": name, "job": job, "phase": phase, "node": None, "devices": [],
            "reason": reason}  # fmt: skip


def _device(cards: dict[str, tuple[CardSpec, CardUsage]], uuid: str, s: Any) -> dict[str, Any]:
    spec = cards[uuid][0] if uuid in cards else None
    return {
        "uuid": uuid, "type": spec.type if spec else "", "index": spec.index if spec else -1,
        "memory": s.memory, "cores": s.cores,
        "template": s.template if s.kind == "template" else None,
        "kind": s.kind, "card_cores": spec.cores if spec else 0,
    }  # fmt: skip


#: the deviceshare arguments that decide which device families it books
_SWITCH_KEYS = frozenset(key for key, _ in DEVICE_SWITCHES.values())


def _counting_conf(scheduler_conf: str) -> SchedulerConf:
    """A session of `proportion` alone that counts devices as the scheduler's configuration
    does: its deviceshare switches decide which families are whole cards by count
    (`config.counted_vendors`), so a queue shows the cards it is charged as the scheduler
    charged them. A log with no readable record: the built-in default's."""
    try:
        ds = parse_conf(scheduler_conf or DEFAULT_CONF).plugin("deviceshare")
    except ConfigError:
        ds = parse_conf(DEFAULT_CONF).plugin("deviceshare")
    plugins: list[dict[str, Any]] = [{"name": "proportion"}]
    if ds is not None:  # its switches only (its hooks never run here: a session with no action)
        switches = {k: v for k, v in ds.arguments.items() if k in _SWITCH_KEYS}
        plugins.append({"name": "deviceshare", "arguments": switches})
    return conf_from_mapping({"actions": "", "tiers": [{"plugins": plugins}]})


def _queue_shares(projection: st.ClusterProjection, queues: dict[str, dict[str, Any]],
                  scheduler_conf: str = "") -> None:  # fmt: skip
    """deserved: proportion's water-filling over the final state; allocated: Σ running requests
    (devices as the card shares they hold, `plugins/shares.py`)."""
    snap = projection.snapshot()
    ssn = open_session(snap, _counting_conf(scheduler_conf))
    prop = ssn.plugins["proportion"]
    qs = shares_of(ssn)
    alloc: dict[str, dict[str, int]] = {}
    for job in ssn.jobs.values():
        acc = alloc.setdefault(job.queue, {})
        for t in job.tasks.values():
            if t.status in (st.RUNNING, st.BOUND, st.ALLOCATED):
                for k, v in qs.task(t).items():
                    if round(v):
                        acc[k] = acc.get(k, 0) + round(v)
    for name, q in queues.items():
        if q["state"] == "Rejected":
            continue
        q["deserved"] = prop.deserved_of(name)  # type: ignore[attr-defined]
        q["allocated"] = dict(sorted(alloc.get(name, {}).items()))
        queue = ssn.queues.get(name)
        if queue is not None:  # what `vcctl queue list` shows beside the shares
            # capability as the shares read it: a family alias is the one type of it the
            # cluster has (issue 26 item 2: no `Ascend910` row beside `Ascend910B3`)
            capability = {k: round(v) for k, v in qs.canonical(queue.spec.capability).items()}
            q.update(weight=queue.spec.weight, parent=queue.spec.parent or "root",
                     capability=dict(sorted(capability.items())))  # fmt: skip
        missing = qs.unreported(queue.spec.capability) if queue is not None else []
        notes = [f"capability names {', '.join(missing)}, which no node reports"] if missing else []
        notes += qs.family_caps(queue.spec.capability) if queue is not None else []
        if notes:  # only then: other queue records stay as they were
            q["warning"] = "; ".join(notes)


def _quotas(projection: st.ClusterProjection) -> list[dict[str, Any]]:
    """Each namespace ResourceQuota: hard, used, held by Tessera's jobs and used by others, as
    the `resourcequota` plugin counts them over the final state (`tessera get quota`)."""
    if not projection.quotas.quotas:
        return []
    conf = conf_from_mapping({"actions": "", "tiers": [{"plugins": [{"name": "resourcequota"}]}]})
    plugin = open_session(projection.snapshot(), conf).plugins["resourcequota"]
    return plugin.records()  # type: ignore[attr-defined, no-any-return]


def _scaled(pods: dict[tuple[str, str, str], dict[str, Any]], projection: st.ClusterProjection,
            ev: JobUpdated) -> None:  # fmt: skip
    """A job's pods after its update, as the projection keeps them: added ones Pending, removed
    ones gone unless they still run (they go when they finish)."""
    tasks = projection.tasks.get(f"{ev.namespace}/{ev.name}")
    if tasks is None:
        return
    for key in [k for k in pods if k[:2] == (ev.namespace, ev.name) and k[2] not in tasks]:
        del pods[key]
    for pod in tasks:
        if (ev.namespace, ev.name, pod) not in pods:
            pods[(ev.namespace, ev.name, pod)] = _pod(ev.namespace, pod, ev.name, "Pending", "")
