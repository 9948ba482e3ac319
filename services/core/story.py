"""A job's or a pod's story, from the log alone (what `tessera explain` prints; issue 16 item 2).

Pure: stored messages in, a plain dict out. The timeline is the object's own events in log
order with their sequence, time and session; "now" is the state the simulate report's fold
gives (`build_report`, the same one `get` prints), and the reasons are the ones the scheduler
recorded in its decision events (`JobUnschedulable.why/groups/unblock`, `TaskPlacement.parts/
runners_up/cards_why`), so the answer is what was decided, not a re-derivation.

Times: `Tessera-Time` (simulate's virtual clock, seconds) or `Nats-Time-Stamp` (JetStream's
store time, as the direct get returns it), read as `services.core.logpoint` reads them; `explain
--at` cuts the log there first (`logpoint.cut`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from contracts.events import (
    BindingFailed,
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
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from contracts.subjects import Subjects
from services.core.freshwords import Now, words_now
from services.core.ledger import core_capacity
from services.core.logpoint import STORE_TIME, VIRTUAL_TIME, store_time
from services.core.scheduling import record
from services.core.scheduling.lifecycle import TERMINAL_JOB_PHASES as ENDED
from services.core.scheduling.snapshot import task_names
from services.core.simulate.report import build_report
from services.core.stamps import RFC3339_SECONDS
from services.runtime.eventlog.model import StoredMessage

#: how many past events of the story the timeline shows (the newest; older ones are counted)
TIMELINE_LIMIT = 200


def message_time(msg: StoredMessage) -> str:
    """The message's time as recorded: `t=12.5s` (virtual) or the store's UTC timestamp."""
    if VIRTUAL_TIME in msg.headers:
        return f"t={float(msg.headers[VIRTUAL_TIME]):g}s"
    stamp = msg.headers.get(STORE_TIME, "")
    if not stamp:
        return ""
    when = store_time(stamp)
    return when.strftime(RFC3339_SECONDS) if when is not None else stamp


def _placement(p: TaskPlacement, card_cores: Mapping[str, int]) -> dict[str, Any]:
    """`card_cores`: each card's total cores — 100 where cores are a percentage (NVIDIA, HAMi
    soft slices), the aiCore count (20 on a 910B3) where they are counted (whole cards, vNPU
    templates): "5/20 aiCores" is what `vir05_1c_16g` holds, not "5% cores" (issue 26 item 4)."""
    return {
        "node": p.node,
        "cards": [{"uuid": s.card, "memory": s.slice.memory, "cores": s.slice.cores,
                   "card_cores": card_cores.get(s.card, 0),
                   "kind": s.slice.kind, "template": s.slice.template or ""} for s in p.slices],
        "score": p.score,
        "parts": {part.plugin: part.score for part in p.parts},
        "runners_up": [{"node": r.node, "score": r.score} for r in p.runners_up],
        "feasible": p.feasible,
        "cards_why": p.cards_why,
    }  # fmt: skip


def _line(ev: object, pod: str) -> tuple[str, str] | None:
    """(what, details) of one event of the story; None when it is not about `pod`."""
    match ev:
        case JobSubmitted():
            tasks = ", ".join(f"{t.name}×{t.replicas}" for t in ev.spec.tasks)
            return "submitted", (f"queue {ev.spec.queue}, minAvailable {ev.spec.min_available}, "
                                 f"tasks [{tasks}]")  # fmt: skip
        case JobUpdated():
            tasks = ", ".join(f"{t.name}×{t.replicas}" for t in ev.spec.tasks)
            return "updated", f"{ev.reason}; minAvailable {ev.spec.min_available}, tasks [{tasks}]"
        case JobRejected():
            return "rejected", "; ".join(ev.reasons)
        case JobPhaseChanged():
            what = "enqueued" if ev.phase == "Inqueue" else f"phase {ev.phase}"
            return what, ev.reason
        case JobUnschedulable():
            return "unschedulable", ev.why or ev.reason
        case PlacementProposed():
            mine = [p for p in ev.placements if not pod or p.task == pod]
            if not mine:
                return None
            where = ", ".join(f"{p.task}→{p.node}" + "".join(f" [{s.card}]" for s in p.slices)
                              for p in mine)  # fmt: skip
            # a proposal that admits its job is the enqueue's record too (no event of its own)
            return "enqueued, proposed" if ev.admits else "proposed", f"{where} (based on #{ev.based_on})"
        case PlacementCommitted():
            if pod and not any(p.task == pod for p in ev.placements):
                return None
            return "committed", f"proposal #{ev.proposal_seq}" if ev.proposal_seq else ""
        case PlacementRejected():
            return "proposal rejected", ev.reason
        case BindingFailed() if (not pod or ev.task == pod) and ev.retry_at:  # the pod itself refused
            at = datetime.fromtimestamp(ev.retry_at, UTC).strftime("%H:%M:%SZ")
            return "given back", f"{_on(ev.task, ev.node)}: {ev.reason}; held until {at}"
        case BindingFailed() if not pod or ev.task == pod:
            return "binding failed", f"{_on(ev.task, ev.node)}: {ev.reason}"
        case EvictionRequested() if not pod or ev.task == pod:
            return "evicted", f"{ev.task}: {ev.reason}" + (f" (room for {ev.for_job})" if ev.for_job else "")
        case TaskStarted() if not pod or ev.task == pod:
            return "started", _on(ev.task, ev.node)
        case TaskFinished() if not pod or ev.task == pod:
            how = f"exit code {ev.exit_code}" + (f", {ev.reason}" if ev.reason else "")
            return "finished", f"{_on(ev.task, ev.node)}: {how}"
        case JobDeleted():
            return "deleted", ""
    return None


def _on(task: str, node: str) -> str:
    """`pod on node`, or the pod alone when it never had one (killed before it was placed:
    the row read "finished w-0 on : exit code 137")."""
    return f"{task} on {node}" if node else task


def _making_room(reg: Any, msg: StoredMessage, kind: str, job: str,
                 room: dict[tuple[str, str, str], tuple[int, str, tuple[int, int]]]) -> EvictionRequested | None:  # fmt: skip
    """Keep `room` (pods evicted for `job`, not stopped yet) up to `msg`, another job's event;
    the eviction when `msg` is one made for `job`."""
    if kind == "TaskFinished" and not room:
        return None
    try:
        ev = reg.decode(kind, msg.data)
    except (UnknownEventType, UndecodableEvent):
        return None
    if isinstance(ev, EvictionRequested) and ev.for_job == job:
        room[(ev.namespace, ev.name, ev.task)] = (msg.seq, ev.reason, _which_session(msg))
        return ev
    if isinstance(ev, TaskFinished):
        room.pop((ev.namespace, ev.name, ev.task), None)
    return None


#: pods an "evicted for it" timeline line names (the rest are counted)
EVICTED_SHOWN = 8


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:EVICTED_SHOWN]) + (
        f" (and {len(names) - EVICTED_SHOWN} more)" if len(names) > EVICTED_SHOWN else "")


def _evicted_for_it(timeline: list[dict[str, Any]], msg: StoredMessage, ev: EvictionRequested, kind: str,
                    last: dict[str, Any]) -> None:  # fmt: skip
    """One timeline line per session and reason for the pods of other jobs evicted to make room
    for the story's job: the victims' stories named the preemptor, the preemptor's own story
    never named them (a platform lead's review). `last`: the line this session's evictions go
    on while nothing else came between (its names kept beside it)."""
    who = f"{ev.namespace}/{ev.task}"
    key = (_which_session(msg), ev.reason)
    if timeline and last.get("line") is timeline[-1] and last.get("key") == key:
        names = last["names"]
        names.append(who)
    else:
        names = [who]
        line = {"seq": msg.seq, "time": message_time(msg), "session": _session_of(ev, msg),
                "event": "evicted for it" if kind == "job" else "evicted for job", "details": ""}  # fmt: skip
        timeline.append(line)
        last.update(line=line, key=key, names=names)
    last["line"]["details"] = f"{len(names)} pod(s) of other jobs ({ev.reason}): {_shown(names)}"


def _deleted(messages: Sequence[StoredMessage], kind: str, name: str,
             namespace: str) -> tuple[str, StoredMessage] | None:  # fmt: skip
    """(its job, the JobDeleted) of a job or pod the log holds and whose job was deleted last:
    the report, as `kubectl get`, no longer lists it, but the log still tells what happened to
    it — "not found" sent the reader to look for a refused admission that never was."""
    reg = default_registry()
    job_of: dict[str, str] = {}  # pod (or job) name → the job that last submitted it
    ended: dict[str, StoredMessage] = {}  # job → its JobDeleted, while not submitted again
    for msg in messages:
        kind_of = msg.headers.get("Tessera-Type", "")
        if kind_of not in ("JobSubmitted", "JobDeleted"):
            continue
        try:
            ev = reg.decode(kind_of, msg.data)
        except (UnknownEventType, UndecodableEvent):
            continue
        if isinstance(ev, JobSubmitted) and ev.spec.namespace == namespace:
            ended.pop(ev.spec.name, None)
            names = [pod for pod, *_ in task_names(ev.spec)] if kind == "pod" else [ev.spec.name]
            job_of.update((n, ev.spec.name) for n in names)
        elif isinstance(ev, JobDeleted) and ev.namespace == namespace:
            ended[ev.name] = msg
    job = job_of.get(name)
    return (job, ended[job]) if job is not None and job in ended else None


def _stepped(msg: StoredMessage, ev: JobPhaseChanged | PlacementProposed, session: int,
             pod: str) -> dict[str, Any]:  # fmt: skip
    """Why it waits when a session's last word on it was a step, not a verdict: "no session has
    decided on it yet" under a timeline line "session 1 enqueued" contradicted it."""
    where = {"seq": msg.seq, "time": message_time(msg), "session": session, "groups": []}
    if isinstance(ev, PlacementProposed):
        nodes = sorted({p.node for p in ev.placements if not pod or p.task == pod})
        return {**where, "why": f"proposed for {', '.join(nodes)}: waiting for the allocator to commit its cards",
                "unblock": "nothing to do: the allocator commits the proposal, or rejects it and a later "
                           "session decides again"}  # fmt: skip
    return {**where, "why": "enqueued: no session has placed it or recorded why not since",
            "unblock": "nothing to do yet: a session places it or records why not"}  # fmt: skip


def _which_session(msg: StoredMessage) -> tuple[int, int]:
    """(based on, session number) of the session that wrote `msg`, (0, 0) for none: the number
    alone restarts at every scheduler process, the snapshot it was based on tells two apart."""
    ref = record.ref_of(msg.headers)
    return (ref.based_on, ref.session) if ref is not None else (0, 0)


def _session_of(ev: object, msg: StoredMessage) -> int:
    session = getattr(ev, "session", 0) or 0
    return int(session or msg.headers.get("Tessera-Session", "0") or 0)


def story(messages: Iterable[StoredMessage], kind: str, name: str, namespace: str = "default",
          root: str = "tessera", fresh: bool = False, clock: float | None = None) -> dict[str, Any] | None:  # fmt: skip
    """The story of job|pod `name`, or None when the log has no such object. `fresh`: a
    waiting job's words with the numbers a session would give them now (`freshwords`), where
    the log keeps those of the session that first said them; `clock`: that session's time (a
    live cluster's wall clock; else the newest recorded session's)."""
    messages = list(messages)
    report = build_report(messages)
    listed = report["pods" if kind == "pod" else "jobs"]
    found = next((r for r in listed if r["name"] == name and r["namespace"] == namespace), None)
    pod_name = name if kind == "pod" else ""
    deleted: StoredMessage | None = None
    state: dict[str, Any]
    if found is None:
        gone = _deleted(messages, kind, name, namespace)
        if gone is None:
            return None
        job_name, deleted = gone
        state = {"phase": "Deleted", "reason": "deleted"}
    elif kind == "pod":
        job_name = found["job"] or name
        state = {"phase": found["phase"], "node": found["node"] or "", "reason": found["reason"]}
    else:
        job_name = name
        state = {"phase": found["phase"], "queue": found["queue"], "reason": found["reason"]}
        state["pods"] = {p["name"]: p["phase"] for p in report["pods"]
                         if p["job"] == name and p["namespace"] == namespace}  # fmt: skip
    subject = Subjects(root).job(namespace, job_name)
    reg = default_registry()
    timeline: list[dict[str, Any]] = []
    last_unschedulable: tuple[StoredMessage, JobUnschedulable] | None = None
    proposals: dict[int, PlacementProposed] = {}
    placed: tuple[StoredMessage, PlacementProposed, TaskPlacement] | None = None
    spec = None
    card_cores: dict[str, int] = {}
    this_job = f"{namespace}/{job_name}"
    #: other jobs' pods evicted to make room for this job (preempt, reclaim), not yet stopped:
    #: (namespace, job, pod) → (seq, reason, (based on, session number))
    room: dict[tuple[str, str, str], tuple[int, str, tuple[int, int]]] = {}
    decided = 0  # the seq of this job's last verdict or commit: room made before it is spent,
    decided_session = (0, 0)  # unless made by that verdict's own session
    #: a session's step on it after its last verdict (enqueued, proposed), not yet followed by a
    #: verdict or a commit: the timeline shows it, so "why it waits" must start from it
    step: tuple[StoredMessage, JobPhaseChanged | PlacementProposed] | None = None
    #: every pod of other jobs evicted for it, stopped or not: (seq, reason, session, time, ns/pod)
    made: list[tuple[int, str, int, str, str]] = []
    evicted_line: dict[str, Any] = {}  # (`_evicted_for_it`'s line being filled)
    on_node = ""  # where the story's pod is placed, while it is ("" for a job's story)
    for msg in messages:
        kind_of = msg.headers.get("Tessera-Type", "")
        if kind_of in ("EvictionRequested", "TaskFinished") and msg.subject != subject:
            got = _making_room(reg, msg, kind_of, this_job, room)
            if got is not None:
                _evicted_for_it(timeline, msg, got, kind, evicted_line)
                made.append((msg.seq, got.reason, _session_of(got, msg), message_time(msg), f"{got.namespace}/{got.task}"))
            continue
        if kind_of in ("NodeRegistered", "CardRegistered") and msg.subject != subject:
            try:
                reg_ev = reg.decode(kind_of, msg.data)
            except (UnknownEventType, UndecodableEvent):
                continue
            specs = reg_ev.cards if isinstance(reg_ev, NodeRegistered) else (reg_ev.card,)  # type: ignore[attr-defined]
            card_cores.update((c.uuid, core_capacity(c)) for c in specs)
            continue
        if msg.subject != subject:
            continue
        try:
            ev = reg.decode(kind_of, msg.data)
        except (UnknownEventType, UndecodableEvent):
            continue
        line = _line(ev, pod_name)
        if line is not None and isinstance(ev, JobUnschedulable) and on_node:
            # the job's verdict is about its pending pods: under a running pod's own lines it
            # read as that pod's (a platform lead's review)
            line = (line[0], f"for the job's pending pods (this pod is on {on_node}): {line[1]}")
        if line is not None:
            timeline.append({"seq": msg.seq, "time": message_time(msg), "session": _session_of(ev, msg),
                             "event": line[0], "details": line[1]})  # fmt: skip
        match ev:
            case JobSubmitted():
                spec = ev.spec
                step, on_node = None, ""
                room.clear()  # a new incarnation: what was evicted for the old one is not its
                decided, decided_session = msg.seq, (0, 0)
            case JobUpdated():
                spec = ev.spec
            case JobUnschedulable():
                last_unschedulable, step = (msg, ev), None
                # (a verdict of the very session that evicted for it — the gang's replicas
                # beyond minAvailable — leaves that room current)
                decided, decided_session = msg.seq, _which_session(msg)
            case JobPhaseChanged() if ev.phase == "Inqueue" and line is not None:
                step = (msg, ev)
            case PlacementProposed():
                proposals[msg.seq] = ev
                if line is not None:
                    step = (msg, ev)
            case PlacementRejected() | TaskStarted() | TaskFinished() if line is not None:
                step = None  # (its state moved on; the report's reason says where to)
                if pod_name and isinstance(ev, TaskStarted):
                    on_node = ev.node
                elif pod_name and isinstance(ev, TaskFinished):
                    on_node = ""
            case PlacementCommitted():
                proposal = proposals.get(ev.proposal_seq)
                # the latest commit: after a restart the job runs where its last commit put it
                first = True
                for p in (proposal or ev).placements:
                    if (pod_name and p.task == pod_name) or (not pod_name and first):
                        placed = (msg, proposal or ev, p)  # type: ignore[assignment]
                        first = False
                        on_node = p.node if pod_name else ""
                last_unschedulable, step = None, None
                decided, decided_session = msg.seq, (0, 0)
    if deleted is not None:  # (its pods' last phases are the report's no more: the job's end)
        state["deleted"] = {"seq": deleted.seq, "time": message_time(deleted)}
        if kind == "job" and spec is not None:
            state["queue"] = spec.queue
    out: dict[str, Any] = {
        "kind": kind, "namespace": namespace, "name": name, "job": job_name, **state,
        "min_available": spec.min_available if spec else None,
        "timeline": timeline[-TIMELINE_LIMIT:], "timeline_dropped": max(0, len(timeline) - TIMELINE_LIMIT),
    }  # fmt: skip
    # a job that ended waits for nothing, whatever its pods' last phases (issue 26 item 4)
    ended = kind == "job" and state["phase"] in ENDED
    waiting = not ended and (state["phase"] in ("Pending", "Pipelined") or (
        kind == "job" and any(ph in ("Pending", "Pipelined") for ph in state.get("pods", {}).values())
    ))  # fmt: skip
    stopping = sorted((seq, which[1], reason, f"{ns}/{pod}") for (ns, _, pod), (seq, reason, which) in room.items()
                      if seq > decided or (decided_session != (0, 0) and which == decided_session))  # fmt: skip
    if waiting and stopping:  # (the pods it waits for are other jobs': their words, not a verdict)
        seq, session, reason, _ = stopping[0]
        names = [who for *_, who in stopping]
        shown = ", ".join(names[:8]) + (f" (and {len(names) - 8} more)" if len(names) > 8 else "")
        out["waiting"] = {
            "seq": seq, "session": session, "plugin": reason,
            "why": f"room is being made for it: {len(names)} pod(s) of other jobs evicted for it ({reason}) "
                   f"have not stopped yet: {shown}",
            "groups": [], "node_reasons": {},
            "unblock": "nothing to do: it is placed once they are gone (their grace period; a pod on a "
                       "node that does not answer stays until the node is back or the pod is force-deleted)",
        }  # fmt: skip
    elif waiting and step is not None:
        out["waiting"] = _stepped(*step, _session_of(step[1], step[0]), pod_name)
    elif waiting and (since := [m for m in made if m[0] > decided]):
        # room made for it after its last verdict, its victims gone, no step of a session since:
        # the log cut mid-session (`--at`), or the next session not run yet — "no session has
        # decided on it yet" under timeline lines of pods evicted for it contradicted them
        seq, reason, session, when, _ = since[0]
        out["waiting"] = {
            "seq": seq, "time": when, "session": session, "plugin": reason,
            "why": f"room was made for it: {len(since)} pod(s) of other jobs evicted for it ({reason}) have "
                   f"stopped: {_shown([who for *_, who in since])}; no session has placed it since",
            "groups": [], "node_reasons": {},
            "unblock": "nothing to do: the session that evicted them proposes it next, or a later one places it",
        }  # fmt: skip
    elif waiting and last_unschedulable is not None:
        msg, ev = last_unschedulable
        now = Now()
        if fresh:
            try:
                now = words_now(messages, namespace, job_name, ev.reason, ev.why, clock)
            except Exception as exc:  # (a log this build cannot re-run: the logged words, as they are)
                out["fresh_error"] = f"{type(exc).__name__}: {exc}"
        fresh_words = now.verdict
        if fresh_words is not None and (fresh_words.why, fresh_words.unblock, fresh_words.groups,
                                        fresh_words.reason) != (ev.why, ev.unblock, ev.groups, ev.reason):  # fmt: skip
            ev = fresh_words.event(ev.based_on, ev.session)  # same rule, today's amounts
            out["as_of"] = messages[-1].seq if messages else 0
        if now.placed:
            out["placeable_at"] = messages[-1].seq if messages else 0
        out["waiting"] = {
            "seq": msg.seq, "time": message_time(msg), "session": _session_of(ev, msg),
            "why": ev.why or ev.reason, "plugin": ev.plugin, "reason": ev.reason,
            "groups": [{"nodes": g.nodes, "reason": g.reason, "plugin": g.plugin,
                        "examples": list(g.examples)} for g in ev.groups],
            "nodes": ev.nodes or len(ev.node_reasons), "unblock": ev.unblock,
            "node_reasons": {} if ev.groups else dict(ev.node_reasons),
        }  # fmt: skip
    elif waiting:
        out["waiting"] = {"why": state.get("reason") or "no scheduling session has decided on it yet",
                          "groups": [], "unblock": ""}  # fmt: skip
    if (placed is not None and not waiting) or (placed is not None and kind == "pod" and state["node"]):
        msg, proposal, p = placed
        out["placed"] = {"seq": msg.seq, "time": message_time(msg), "session": proposal.session
                         if isinstance(proposal, PlacementProposed) else 0, "task": p.task,
                         **_placement(p, card_cores)}  # fmt: skip
    return out
