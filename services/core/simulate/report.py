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
    CardHealthChanged,
    CardRegistered,
    CardRetired,
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
from services.core.devices.catalogue import default_catalogue
from services.core.devices.mig import card_note
from services.core.ledger import core_capacity
from services.core.scheduling import lifecycle, podreasons
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import (
    DEFAULT_CONF,
    DEVICE_SWITCHES,
    PIPELINES_END,
    ConfigError,
    SchedulerConf,
    conf_from_mapping,
    parse_conf,
)
from services.core.scheduling.decide import open_session
from services.core.scheduling.lifecycle import counts_a_retry
from services.core.scheduling.model import card_count_name
from services.core.scheduling.plugins.shares import shares_of
from services.core.scheduling.session import Session
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
    # a card that is not Healthy: its state and the event that made it so (`_health`)
    health: dict[str, tuple[str, int]] = {}
    cycles = 0
    bound = 0
    rejected_placements = 0
    skipped: list[dict[str, Any]] = []
    scheduler_conf = ""  # the last configuration the scheduler recorded (queue shares depend on it)
    # a simulation's pipelined reservation lasts one session (`record.decision_events`'
    # `pipelines_end`): from a record of that generation on, the session a pod was last
    # pipelined in, so a later decision on its job that leaves it out sends it back to Pending
    pipelines_end = False
    pipelined_at: dict[tuple[str, str, str], int] = {}
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
        session = int(msg.headers.get(SESSION_HEADER, "0") or 0)
        cycles = max(cycles, session)
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
                if pipelines_end:
                    _unpipeline(pods, pipelined_at, ev.namespace, ev.name, session, ())
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
                if pipelines_end:
                    _unpipeline(pods, pipelined_at, ev.namespace, ev.name, session,
                                {tp.task for tp in ev.placements})  # fmt: skip
                for tp in ev.placements:
                    p = pods.get((ev.namespace, ev.name, tp.task))
                    if p is not None and p["phase"] in ("Pending", "Pipelined"):
                        pipelined_at[(ev.namespace, ev.name, tp.task)] = session
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
                _health(health, ev.card.uuid, ev.usage, msg.seq)
            case NodeRegistered():
                # a node's cards as it registers them: after `compact`, a card in use keeps only
                # its last ledger event (a SliceReserved), no CardRegistered to learn it from —
                # `get cards` left such cards out and `get po` lost their aiCore totals
                for c in ev.cards:
                    cards[c.uuid] = (c, cards[c.uuid][1] if c.uuid in cards else CardUsage())
            case SliceReserved() | SliceReleased() | CardHealthChanged() | CardRetired():
                if ev.card in cards:
                    cards[ev.card] = (cards[ev.card][0], ev.usage)
                _health(health, ev.card, ev.usage, msg.seq)
            case SchedulerConfigured():
                scheduler_conf = ev.conf
                pipelines_end = ev.mode == "simulate" and ev.rules >= PIPELINES_END
            case _:
                pass
    ssn = open_session(projection.snapshot(), _counting_conf(scheduler_conf))
    _queue_shares(ssn, queues)
    by_count = held_by_count(ssn)
    card_rows = []
    mem_total = mem_used = core_total = core_used = in_use = 0
    taken: dict[tuple[str, str], int] = {}  # (node, type): its cards held by count counted so far
    for spec, usage in sorted(cards.values(), key=lambda c: (c[0].node, c[0].type, c[0].index)):
        cap = core_capacity(spec)
        row = {
            "node": spec.node, "uuid": spec.uuid, "type": spec.type, "index": spec.index,
            "memory_total": spec.memory, "memory_used": usage.memory_used, "cores_total": cap,
            "cores_used": usage.cores_used, "slices_used": usage.slices_used,
            "slices_total": spec.split_count,
        }  # fmt: skip
        if note := card_note(spec, usage):  # only then: other cards' rows stay as they were
            row["note"] = note
        if spec.uuid in health:  # only then: healthy cards' rows stay as they were
            state, since = health[spec.uuid]
            row.update(health=state, health_since=since,
                       health_reason=RETIRED_WORDS if state == RETIRED else spec.health_reason)  # fmt: skip
        mem_total += spec.memory
        mem_used += usage.memory_used
        core_total += cap
        core_used += usage.cores_used
        in_use += 1 if usage.slices_used else 0
        held = by_count.get(spec.node, {}).get(spec.type)
        if held is not None:  # only then: a family deviceshare books keeps its rows as they were
            # the node's cards of this type pods hold whole by count: which of them the device
            # plugin gave is not in the log, so each row says how many of the node's are held
            row["held_by_count"] = held
            if taken.get((spec.node, spec.type), 0) < held and not usage.slices_used:
                taken[(spec.node, spec.type)] = taken.get((spec.node, spec.type), 0) + 1
                in_use += 1  # a whole card: all its memory and cores are its pod's
                mem_used += spec.memory
                core_used += cap
        card_rows.append(row)
    for (ns, name), j in jobs.items():
        live = projection.jobs.get(f"{ns}/{name}")
        if live is not None and j["phase"] == "Running":
            statuses = [t.status for t in projection.tasks.get(f"{ns}/{name}", {}).values()]
            if lifecycle.podgroup_shown(j["phase"], j["kind"], live.spec.min_available, statuses) == "Unknown":
                j["podgroup"] = "Unknown"  # only then: other records stay as they were
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
            "cards_in_use": in_use,
            "cards_total": len(card_rows),
        },
    }
    quotas = _quotas(projection)
    if quotas:  # only then: reports of clusters without quotas stay as they were
        report["quotas"] = quotas
    if skipped:  # only then: a clean log's report stays byte-identical to what it was
        report["undecodable"] = skipped
    return report


#: a card's states other than Healthy, as `get cards`' HEALTH column says them
UNHEALTHY = "Unhealthy"
RETIRED = "Retired"
#: why a card is Retired (CardRetired): the allocator retires a card its node's registration
#: no longer lists; a pod holding it keeps its booking until it ends
RETIRED_WORDS = "its node no longer reports it"


def _health(health: dict[str, tuple[str, int]], uuid: str, usage: CardUsage, seq: int) -> None:
    """The card's state after a ledger event (its usage carries the admission state): Retired,
    Unhealthy or Healthy (dropped), and since which event — kept while it stays so, so
    `describe card` says when it went unhealthy, not when a slice last moved on it."""
    state = RETIRED if usage.retired else UNHEALTHY if not usage.healthy else ""
    if not state:
        health.pop(uuid, None)
    elif health.get(uuid, ("", 0))[0] != state:
        health[uuid] = (state, seq)


def undecodable_warning(report: dict[str, Any]) -> str:
    """One line for a reader's stderr about the events a report had to skip ("" if none)."""
    skipped = report.get("undecodable", [])
    if not skipped:
        return ""
    first = ", ".join(f"#{s['seq']} {s['type']}" for s in skipped[:5])
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return f"warning: {len(skipped)} undecodable event(s) skipped: {first}{more}"


def _unpipeline(pods: dict[tuple[str, str, str], dict[str, Any]], pipelined_at: dict[tuple[str, str, str], int],
                ns: str, job: str, session: int, kept: Iterable[str]) -> None:  # fmt: skip
    """A decision of `session` on a job: its pods pipelined in an earlier session and not in
    `kept` (what this decision places) are Pending again, with no node — Volcano's Pipelined
    is a session's state, dropped when the session closes. Before, a pod read "Pipelined on
    node-a" for good once the room reclaimed for it went to another pod."""
    keep = set(kept)
    for key, p in pods.items():
        if (key[:2] == (ns, job) and p["phase"] == "Pipelined" and key[2] not in keep
                and pipelined_at.get(key, session) < session):  # fmt: skip
            p.update(phase="Pending", node=None, devices=[])


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
    """A session of the scheduler's queue-share plugin alone (`proportion`, else `capacity` with
    its arguments: `enableHierarchy` bounds children by their parent) that counts devices as the
    scheduler's configuration does: its deviceshare switches decide which families are whole
    cards by count (`config.counted_vendors`), so a queue shows the cards it is charged as the
    scheduler charged them, and the deserved share the scheduler decides by — the one its
    `/metrics` report (`decide.close_session`); a capacity cluster read proportion's
    water-filling (spec.deserved 4 shown as 6). A log with no readable record: the built-in
    default's."""
    try:
        parsed = parse_conf(scheduler_conf or DEFAULT_CONF)
    except ConfigError:
        parsed = parse_conf(DEFAULT_CONF)
    ds = parsed.plugin("deviceshare")
    share = parsed.plugin("proportion") or parsed.plugin("capacity")
    plugins: list[dict[str, Any]] = [{"name": "proportion"}]
    if share is not None and share.name == "capacity":
        plugins = [{"name": "capacity", "enableHierarchy": share.enabled("enableHierarchy")}]
    if ds is not None:  # its switches only (its hooks never run here: a session with no action)
        switches = {k: v for k, v in ds.arguments.items() if k in _SWITCH_KEYS}
        plugins.append({"name": "deviceshare", "arguments": switches})
    return conf_from_mapping({"actions": "", "tiers": [{"plugins": plugins}]})


def held_by_count(ssn: Session) -> dict[str, dict[str, int]]:
    """node → card type → how many of its cards running pods hold whole by count, for the
    families no deviceshare books (`config.counted_vendors`): such a pod books no slice, so the
    ledgers read its card free while the scheduler counts it taken ("free 0 of 8") — `get
    nodes`, `describe node`, `get cards` and the summary read 0 in use on a full node, where
    `kubectl describe node` shows `huawei.com/Ascend910B3 8 8` allocated. Only counted
    families' types appear (an empty mapping when deviceshare books every family)."""
    if not ssn.counted_vendors:
        return {}
    catalogue = ssn.conf.vendors.catalogue if ssn.conf.vendors is not None else default_catalogue()
    out: dict[str, dict[str, int]] = {}
    for node in ssn.node_list:
        groups: dict[str, list[str]] = {}  # count name → the types of the cards it counts
        for c in node.cards:
            if c.spec.vendor in ssn.counted_vendors and (name := card_count_name(c.spec, catalogue)):
                groups.setdefault(name, []).append(c.spec.type)
        for name, types in groups.items():
            held = min(round(node.used.scalars.get(name, 0) / 1000), len(types))
            for t in sorted(set(types)):  # one count name per type, as a chip's resource name is
                share = min(held, types.count(t))
                out.setdefault(node.name, {})[t] = share
                held -= share
    return out


def nodes_held_by_count(report: dict[str, Any]) -> dict[str, int]:
    """node → its cards pods hold whole by count (`held_by_count`), from a report's card rows."""
    out: dict[str, int] = {}
    for (node, _type), held in {(c["node"], c["type"]): c.get("held_by_count", 0) for c in report["cards"]}.items():
        if held:
            out[node] = out.get(node, 0) + held
    return out


def _queue_shares(ssn: Session, queues: dict[str, dict[str, Any]]) -> None:
    """deserved: the scheduler's queue-share plugin's over the final state (proportion's
    water-filling, or capacity's deserved bounded by realCapability); allocated: Σ running requests
    (devices as the card shares they hold, `plugins/shares.py`)."""
    prop = ssn.plugins.get("proportion") or ssn.plugins["capacity"]
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
