"""Per-node reasons for a gang `enqueue` refused (issue 14): a trial placement, thrown away.

A job refused at enqueue never reaches `allocate`, so nothing tried it on the nodes and its
reasons would name only the queue rule. Here, after the actions have decided, each refused job
(in the order enqueue considered them) has its pending tasks placed one by one as allocate
places them — task order, `pre_predicate`, `select_node` (predicates, scores, the sampled
search), the device binder's cards, Idle or FutureIdle — in a `Statement` that is always
discarded, inside `Session.trial` so that the plugins' tallies, the node search's rotating start
and the shape counts come back as they were: decisions never see a trial.

The first task that fits no node gives the per-node reasons, grouped in words on the trial's
state (the nodes as the gang's own first pods left them; the final state would show them free)
and Volcano's gang line `"<minAvailable − placed>/<tasks> tasks in gang unschedulable: 0/N nodes
…"`. A gang that fits whole is refused by its queue alone: no node list, and the words say so.

Cost is bounded: at most `TRIALS_PER_SESSION` trials per session, and a job whose tasks have the
same shapes (in task order) and gang numbers as one already tried reuses its result — the state
is the same for both, so is the outcome — whatever the number of equal waiting jobs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from msgspec.structs import replace

from contracts.events import ReasonGroup
from services.core.scheduling.actions.nodes import select_node, shape_of
from services.core.scheduling.decisions import ENQUEUE_REFUSED, QUOTA_PLUGIN
from services.core.scheduling.explain import Explanation, node_groups
from services.core.scheduling.model import JobInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement

#: refused jobs of distinct shapes tried per session (the rest keep the queue rule's words)
TRIALS_PER_SESSION = 16


@dataclass(frozen=True, slots=True)
class Trial:
    """The outcome of one trial: `summary` is empty when the gang fits the nodes whole (or
    stopped at a task-level rule, which no node list explains)."""

    placed: int
    summary: str = ""  # kube-scheduler style "0/N nodes are unavailable: …" of the failing task
    node_errors: dict[str, str] = dataclasses.field(default_factory=dict)
    groups: tuple[ReasonGroup, ...] = ()
    fix: str = ""
    fits: bool = False  # every task needed for the gang found a node


def _ordered(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The pending tasks allocate would try, in its order (TaskOrder)."""
    pending = [t for t in job.pending_tasks() if not t.best_effort]
    if len(pending) < 2:  # most waiting jobs are single pods: no heap needed
        return pending
    tasks = PriorityQueue(ssn.task_order, pending)
    return [tasks.pop() for _ in range(len(tasks))]


def _place(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> Trial:
    """Place `tasks` as allocate would until the gang is ready or one fits no node; undo it."""
    stmt = Statement(ssn)
    kept = [(t, t.score, t.runners_up, t.feasible, ssn.cards_why.get(t.uid)) for t in tasks]
    placed = 0
    with ssn.trial({shape_of(t) for t in tasks}):
        try:
            for task in tasks:
                if ssn.pre_predicate(task) is not None:
                    result = Trial(placed)  # a rule of the task itself, not of the nodes
                    break
                node, idle, fit = select_node(ssn, task, ssn.node_list)
                if node is None:
                    nodes = [ssn.nodes[n] for n in sorted(fit.errors) if n in ssn.nodes]
                    groups, fix = node_groups(ssn, task, nodes, {})  # words on the trial's state
                    result = Trial(placed, fit.summary(len(ssn.node_list)),
                                   dict(sorted(fit.errors.items())), groups, fix)  # fmt: skip
                    break
                slices = ssn.bind_devices(task, node)
                (stmt.allocate if idle else stmt.pipeline)(task, node, slices)
                placed += 1
                if ssn.job_ready(job):
                    result = Trial(placed, fits=True)
                    break
            else:  # every pending task found a node (a gang short of tasks stays unready)
                result = Trial(placed, fits=True)
        finally:
            stmt.discard()
            for t, score, runners_up, feasible, cards_why in kept:
                t.score, t.runners_up, t.feasible = score, runners_up, feasible
                if cards_why is None:
                    ssn.cards_why.pop(t.uid, None)
                else:
                    ssn.cards_why[t.uid] = cards_why
    return result


def _said_after(reason: str, after: str) -> str:
    """`after` put before the bracketed device plugin's words, if any, where it reads."""
    head, bracket, tail = reason.partition(" [")
    return f"{head}{after}{bracket}{tail}"


def gang_trials(ssn: Session, budget: int = TRIALS_PER_SESSION) -> dict[str, Trial]:
    """job key → its trial, for the jobs enqueue refused: the first `budget` distinct shapes in
    enqueue's order, and every later job of a shape already tried."""
    out: dict[str, Trial] = {}
    seen: dict[tuple[object, ...], Trial] = {}
    for job in ssn.refused:
        if job.phase != "Pending":
            continue
        tasks = _ordered(ssn, job)
        if not tasks:
            continue
        roles = job.min_task_member  # a role name matters only with a minimum of its own
        key = (job.min_available, tuple(sorted(roles.items())), job.ready_task_num(),
               job.waiting_task_num(),
               tuple((t.role if t.role in roles else "", shape_of(t)) for t in tasks))  # fmt: skip
        trial = seen.get(key)
        if trial is None:
            if len(seen) >= budget:
                continue
            trial = seen[key] = _place(ssn, job, tasks)
        out[job.key] = trial
    return out


#: the plugins whose enqueue refusal is the queue's or the cluster's share ("queue resource
#: quota insufficient or cluster overused" is true of them); a job refused because no node
#: can take it (no card of its kind, a gang larger than the cluster) is not the queue's fault,
#: and saying so first sent users to their queue (issue 26 item 5)
QUEUE_PLUGINS = frozenset({"proportion", "capacity", "overcommit", ""})


def with_trial(
    job: JobInfo, reason: str, why: Explanation, trial: Trial
) -> tuple[str, dict[str, str], Explanation]:
    """(reason, node reasons, words) of a refused job once its trial is known: Volcano's gang
    line after enqueue's words and the nodes' groups under the rule, or the rule saying the
    nodes are not the reason. A job without a trial (over the budget) keeps enqueue's words."""
    if trial.summary:
        missing = job.min_available - job.ready_task_num() - job.waiting_task_num() - trial.placed
        gang = f"{max(missing, 0)}/{len(job.tasks)} tasks in gang unschedulable: {trial.summary}"
        if job.why_plugin == QUOTA_PLUGIN and job.why:  # the quota's words are the reason
            gang = f"{reason}; {gang}"
        elif reason.startswith(ENQUEUE_REFUSED):
            # Volcano's words where the queue (or its share) is why; else the rule that is
            gang = f"{reason if why.plugin in QUEUE_PLUGINS or not why.why else why.why}; {gang}"
        groups, unblock = trial.groups, why.unblock or trial.fix
        if trial.placed:
            # the nodes as the gang's own first pods left them: "0 of 8 free" about a node with
            # 6 free read as false; said with what took them, and what the gang needs beyond
            after = (f" once the gang's first {trial.placed} pods are placed" if trial.placed > 1
                     else " once the gang's first pod is placed")  # fmt: skip
            groups = tuple(replace(g, reason=_said_after(g.reason, after)) for g in groups)
            if why.unblock and missing > 0 and why.plugin in QUEUE_PLUGINS:  # (a gang rule counts them)
                unblock = f"{why.unblock}; and room for {missing} more of the gang's pods beyond those {trial.placed}"
        return gang, trial.node_errors, Explanation(why.why, why.plugin, groups, unblock)
    if trial.fits and why.why:
        pods = (
            "the pod fits" if job.min_available <= 1 else f"the gang's {job.min_available} pods fit"
        )
        said = f"{why.why}; the nodes are not the reason: {pods} on them now"
        return reason, {}, Explanation(said, why.plugin, why.groups, why.unblock)
    return reason, {}, why


__all__ = ["TRIALS_PER_SESSION", "Trial", "gang_trials", "with_trial"]
