"""`decide(snapshot, conf) -> Decisions`: one pure scheduling session (no I/O, no clock).

Open a session over the frozen snapshot, run the configured actions in order, close it and
report per job: committed placements (to bind), pipelined reservations (not bound), evictions,
PodGroups promoted to Inqueue, and unschedulable jobs with the gang plugin's message
`"<minAvailable − ready>/<tasks> tasks in gang unschedulable: <fit errors>"` and per-node reasons
(for a job enqueue refused, from a trial placement thrown away after the decisions: trial.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from services.core.scheduling import snapshot as st
from services.core.scheduling.config import SchedulerConf, default_conf
from services.core.scheduling.decisions import (
    QUOTA_PLUGIN,
    Decisions,
    Eviction,
    JobPlacement,
    PhaseChange,
    Unschedulable,
    bounded_reasons,
)
from services.core.scheduling.explain import explain_job
from services.core.scheduling.gates import GATED_REASON, gated_reason
from services.core.scheduling.memo import SessionMemo
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo, TaskInfo
from services.core.scheduling.plugins.shares import shares_of
from services.core.scheduling.registry import Action, build_actions, build_plugins
from services.core.scheduling.session import PluginFactory, Session
from services.core.scheduling.trial import gang_trials, with_trial


@cache
def _registries() -> tuple[Mapping[str, PluginFactory], Mapping[str, Action]]:
    return build_plugins(), build_actions()


def plugin_names() -> frozenset[str]:
    """The plugins Tessera runs (a conf naming others: `config.not_run`)."""
    return frozenset(_registries()[0])


def open_session(
    snapshot: st.Snapshot, conf: SchedulerConf | None = None, *, node_cache: bool = True,
    memo: SessionMemo | None = None,
) -> Session:  # fmt: skip
    plugins, _ = _registries()
    return Session(snapshot, conf or default_conf(), plugins, node_cache=node_cache, memo=memo)


def decide(
    snapshot: st.Snapshot, conf: SchedulerConf | None = None, *, node_cache: bool = True,
    memo: SessionMemo | None = None,
) -> Decisions:  # fmt: skip
    """`node_cache=False` evaluates every node afresh (the reference the cached path is tested
    against, tests/core/scheduling/test_node_cache.py); decisions are the same either way.
    `memo`: what the caller's previous session left (memo.py), so the nodes unchanged since
    are not built again; the decisions are the same with or without it."""
    conf = conf or default_conf()
    _, actions = _registries()
    try:
        ssn = open_session(snapshot, conf, node_cache=node_cache, memo=memo)
        for name in conf.actions:
            if (action := actions.get(name)) is not None:  # Volcano's others: see config.not_run
                action.execute(ssn)
        for plugin in ssn.plugins.values():
            close = getattr(plugin, "on_session_close", None)
            if close is not None:
                close(ssn)
        decisions = close_session(ssn)
    except BaseException:
        if memo is not None:  # a session cut short may have changed nodes it did not log
            memo.forget()
        raise
    if memo is not None:
        memo.after(ssn)
    ssn.release()
    return decisions


def close_session(ssn: Session) -> Decisions:
    committed: dict[str, list[TaskInfo]] = {}
    for t in ssn.committed_allocations:
        if t.status == st.ALLOCATED:
            committed.setdefault(t.job, []).append(t)
    committed_ids = {t.uid for ts in committed.values() for t in ts}
    pipelined: dict[str, list[TaskInfo]] = {}
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.status == st.PIPELINED or (
                t.status == st.ALLOCATED and t.uid not in committed_ids
            ):
                pipelined.setdefault(job.key, []).append(t)
    placements: list[JobPlacement] = []
    for key, tasks in committed.items():
        job = ssn.jobs[key]
        placements.append(JobPlacement(job.namespace, job.name, ssn.placements_of(tasks)))
    for key, tasks in pipelined.items():
        job = ssn.jobs[key]
        placements.append(JobPlacement(job.namespace, job.name, ssn.placements_of(tasks), True))
    evictions = tuple(
        Eviction(ssn.jobs[t.job].namespace, ssn.jobs[t.job].name, t.pod,
                 ssn.eviction_reasons.get(t.uid, "preempt"), ssn.eviction_for.get(t.uid, ""))
        for t in ssn.committed_evictions
    )  # fmt: skip
    phases = tuple(PhaseChange(j.namespace, j.name, "Inqueue") for j in ssn.enqueued)
    unschedulable = []
    words: dict[tuple[object, ...], Any] = {}  # explain.py's cache for this session
    bounded: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], dict[str, int]]] = {}
    trials = gang_trials(ssn)  # jobs enqueue refused, tried on the nodes and thrown away
    for job in sorted(ssn.jobs.values(), key=lambda j: (j.created, j.key)):
        reason, code = _unschedulable_reason(ssn, job)
        if reason:
            why = explain_job(ssn, job, words)
            if (kept := ssn.kept.get(job.key)) is not None:
                why = replace(why, unblock=f"{why.unblock}; {kept}" if why.unblock else kept)
            if job.key in trials:
                reason, node_reasons, why = with_trial(job, reason, why, trials[job.key])
                node_reasons, counts = bounded_reasons(node_reasons)
            else:
                node_reasons, counts = _bounded(job.node_errors, bounded)
            pending = sum(1 for t in job.tasks.values() if t.status == st.PENDING)
            unschedulable.append(
                Unschedulable(
                    job.namespace, job.name, reason, node_reasons, reason_counts=counts,
                    why=why.why, plugin=why.plugin, groups=why.groups,
                    nodes=len(ssn.node_list), unblock=why.unblock, tasks=pending, code=code,
                )
            )
    allocated = queue_allocated(ssn)
    canonical = shares_of(ssn).canonical
    capability = {q: {k: round(v) for k, v in sorted(canonical(info.spec.capability).items())}
                  for q, info in sorted(ssn.queues.items())}  # fmt: skip
    deserved: dict[str, Mapping[str, int]] = {}
    share: dict[str, float] = {}
    prop = ssn.plugins.get("proportion") or ssn.plugins.get("capacity")
    if prop is not None:
        for q in ssn.queues:
            deserved[q] = prop.deserved_of(q)  # type: ignore[attr-defined]
            attr = prop.attrs.get(q)  # type: ignore[attr-defined]
            if attr is not None:  # queues with jobs, as Volcano's plugins keep them
                share[q] = attr.share
    return Decisions(
        revisit_at=_revisit_at(ssn),
        based_on=ssn.snapshot.seq,
        placements=tuple(placements),
        evictions=evictions,
        unschedulable=tuple(unschedulable),
        phases=phases,
        queue_allocated=allocated,
        queue_deserved=deserved,
        queue_share=share,
        queue_capability=capability,
    )


def _bounded(errors: dict[str, str], memo: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], dict[str, int]]],
             ) -> tuple[dict[str, str], dict[str, int]]:  # fmt: skip
    """`bounded_reasons` of a job's node errors, once per session for equal errors: jobs of one
    shape waiting on a full cluster fail on every node for the same words, and sorting and
    sampling 500 nodes' reasons per waiting job was a third of a session over a backlog (the
    result is only read: the events copy it)."""
    key = tuple(errors.items())
    got = memo.get(key)
    if got is None:
        got = memo[key] = bounded_reasons(errors)
    return got


def _revisit_at(ssn: Session) -> float | None:
    """The soonest a time rule turns (`Decisions.revisit_at`): the plugins that read the
    session's clock say when (sla, cdp), and a job held back for its refused pods is placeable
    again at its retry; the others' decisions do not move with it."""
    turns = [at for plugin in ssn.plugins.values()
             if (ahead := getattr(plugin, "revisit_at", None)) is not None and (at := ahead(ssn)) is not None]  # fmt: skip
    turns += [r.until for key, r in ssn.snapshot.refused.items() if r.until > ssn.now and key in ssn.jobs]
    return min(turns, default=None)


def queue_allocated(ssn: Session) -> dict[str, dict[str, int]]:
    """Σ of what each queue's allocated tasks count against it (devices as card shares)."""
    qs = shares_of(ssn)
    out: dict[str, dict[str, int]] = {}
    for job in ssn.jobs.values():
        acc = out.setdefault(job.queue, {})
        for t in job.tasks.values():
            if t.status in ALLOCATED_STATUSES:
                for k, v in qs.task(t).items():
                    acc[k] = acc.get(k, 0) + round(v)
    return {q: {k: v for k, v in sorted(r.items()) if v or k in ("cpu", "memory")}
            for q, r in sorted(out.items())}  # fmt: skip


def _unschedulable_reason(ssn: Session, job: JobInfo) -> tuple[str, str]:
    """(reason, code), or ("", "") when nothing of the job waits (see `Unschedulable.code`)."""
    pending = [t for t in job.tasks.values() if t.status == st.PENDING]
    if not pending and not (job.phase == "Pending" and not job.tasks):
        return "", ""  # (a PodGroup with no pods yet waits at enqueue: an operator's, before its pods)
    held = [t for t in pending if t.spec.scheduling_gates]
    if pending and len(held) == len(pending):  # no session tries them: not a matter of nodes or shares
        return gated_reason(sorted(held, key=lambda t: t.pod)), GATED_REASON
    if job.phase == "Pending":
        if job.why_plugin == QUOTA_PLUGIN and job.why:  # its namespace's quota holds it, not a queue
            return job.why, "NotEnqueued"
        return job.job_fit_error or "PodGroup is Pending: not admitted by enqueue", "NotEnqueued"
    if job.job_fit_error and not job.fit_errors:
        return job.job_fit_error, "NotEnoughTasks"
    errors = sorted({msg for msg in job.fit_errors.values()})
    ready = job.ready_task_num()
    if not errors:
        # none of its pods failed on a node: the session never tried them (its queue over its
        # share, the gang's minimum placed and the rest left) — a running elastic job's waiting
        # pods are told so too, as Volcano marks every pending task of a job it records
        errors = ["not enough resources (queue share or session order)"]
    missing = max(job.min_available - ready, 0)
    if ssn.job_ready(job):
        return f"{len(pending)}/{len(job.tasks)} tasks unschedulable: {'; '.join(errors)}", "NotEnoughResources"
    return f"{missing}/{len(job.tasks)} tasks in gang unschedulable: {'; '.join(errors)}", "NotEnoughResources"
