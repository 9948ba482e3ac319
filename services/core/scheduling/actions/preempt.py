"""`preempt` (Volcano `actions/preempt/preempt.go`): intra-queue preemption.

Preemptor jobs: non-Pending, valid and starving, grouped by queue (JobOrder). Per job, its
pending tasks (TaskOrder) preempt one after another while the job is still starving; a task
with `preemptionPolicy: Never` is skipped. Candidates on each node (nodes tried in descending
score order) are Bound/Running `volcano.sh/preemptable` tasks of other jobs in the same queue
(a BestEffort preemptor never takes a non-BestEffort victim); `Preemptable` filters them and
`ValidateVictims` needs FutureIdle + victims to cover the request, cards included. Victims are
evicted lowest-first until the queue is Allocatable for the task (evictions in the same queue
free its share — volcano #3161) and the task fits FutureIdle (cards: the evicted tasks' slices
free, pipelined ones taken, `victims.py`); then it is pipelined there, on cards no remaining
task holds. A
per-node sub-statement is merged only on success. The job's statement is committed only if
JobPipelined, else discarded; a job that got a task placed is pushed back. After each queue,
every starving job's pending tasks may evict lower-priority tasks of the same job (Volcano
nests this pass inside the queue loop; its victim filter does not look at preemptable).
"""

from __future__ import annotations

from collections.abc import Callable

from services.core.scheduling import snapshot as st
from services.core.scheduling.actions.topology import hard as hard_topology
from services.core.scheduling.actions.victims import (
    fits_future,
    pipeline_on,
    validate_victims,
    victim_queue,
)
from services.core.scheduling.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement

VICTIM_STATUSES = frozenset({st.BOUND, st.RUNNING})


class PreemptAction:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        queues: dict[str, QueueInfo] = {}
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_of: dict[str, PriorityQueue[TaskInfo]] = {}
        under_request: list[JobInfo] = []
        for job in sorted(ssn.jobs.values(), key=lambda j: (j.created, j.key)):
            if job.phase == "Pending" or ssn.job_valid(job) or job.queue not in ssn.queues:
                continue
            queues.setdefault(job.queue, ssn.queues[job.queue])
            if ssn.job_starving(job) and not hard_topology(job) and not ssn.held(job):  # (held: its pods refused)
                preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
                under_request.append(job)
                tasks_of[job.key] = PriorityQueue(ssn.task_order, job.pending_tasks())
        for queue in queues.values():
            jobs = preemptors.get(queue.name)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                assigned = False
                tasks = tasks_of[job.key]
                while ssn.job_starving(job) and not tasks.empty():
                    task = tasks.pop()
                    if task.spec.preemption_policy == "Never":
                        continue
                    assigned = preempt(ssn, stmt, task, queue, _other_job_same_queue(ssn, task))
                if not ssn.job_pipelined(job):
                    stmt.discard()
                    continue
                stmt.commit()
                if assigned:
                    jobs.push(job)
            for job in under_request:
                pending = PriorityQueue(ssn.task_order, job.pending_tasks())
                while not pending.empty():
                    task = pending.pop()
                    if task.spec.preemption_policy == "Never":
                        continue
                    stmt = Statement(ssn)
                    assigned = preempt(ssn, stmt, task, ssn.queues[job.queue], _same_job(task))
                    stmt.commit()
                    if not assigned:
                        break


def _other_job_same_queue(ssn: Session, preemptor: TaskInfo) -> Callable[[TaskInfo], bool]:
    queue = ssn.jobs[preemptor.job].queue

    def keep(t: TaskInfo) -> bool:
        return (
            t.status in VICTIM_STATUSES
            and not (preemptor.best_effort and not t.best_effort)
            and t.spec.preemptable
            and t.job != preemptor.job
            and ssn.jobs[t.job].queue == queue
        )

    return keep


def _same_job(preemptor: TaskInfo) -> Callable[[TaskInfo], bool]:
    def keep(t: TaskInfo) -> bool:
        return (
            t.status in VICTIM_STATUSES
            and not (preemptor.best_effort and not t.best_effort)
            and t.job == preemptor.job
        )

    return keep


def preempt(
    ssn: Session, stmt: Statement, task: TaskInfo, queue: QueueInfo,
    keep: Callable[[TaskInfo], bool],
) -> bool:  # fmt: skip
    """Try the nodes in score order; True when the task was pipelined somewhere."""
    if ssn.pre_predicate(task) is not None:
        return False
    for node in candidate_nodes(ssn, task):
        victims = ssn.preemptable(task, [t for t in node.tasks.values() if keep(t)])
        if not victims or not validate_victims(ssn, task, node, victims):
            continue
        sub = Statement(ssn)
        pq = victim_queue(ssn, task, victims)
        while not pq.empty() and not _placeable(ssn, queue, task, node):
            sub.evict(pq.pop(), "preempt", task.job)
        if _placeable(ssn, queue, task, node) and pipeline_on(ssn, sub, task, node):
            stmt.merge(sub)
            return True
        sub.discard()
    return False


def _placeable(ssn: Session, queue: QueueInfo, task: TaskInfo, node: NodeInfo) -> bool:
    return ssn.allocatable(queue, task) and fits_future(ssn, task, node)


def candidate_nodes(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """Nodes a predicate does not rule out for good (`Session.predicate_for_preempt`: cards
    taken by other tasks do not), in descending score order (stable); the fit, cards included,
    is checked per node against its victims and after evictions."""
    out = []
    for node in ssn.node_list:
        if ssn.predicate_for_preempt(task, node) is None:
            out.append((ssn.node_score(task, node), node.order, node))
    out.sort(key=lambda x: (-x[0], x[1]))
    return [n for _, _, n in out]
