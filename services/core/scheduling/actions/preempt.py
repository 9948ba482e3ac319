"""`preempt` (Volcano `actions/preempt/preempt.go`): intra-queue preemption.

Preemptor jobs: non-Pending, valid and starving. Per queue, per job (JobOrder), per pending
task (TaskOrder): skip `preemptionPolicy: Never`; candidates on each node are Bound/Running,
`volcano.sh/preemptable` tasks of other jobs in the same queue (a BestEffort preemptor never
takes a non-BestEffort victim); `Preemptable` filters them; victims are evicted lowest-first
until the task fits FutureIdle, then the task is pipelined there. Nodes are tried in descending
score order; a per-node statement is merged only on success. The job's statement is committed
only if JobPipelined, else discarded. Then intra-job preemption of lower-priority tasks.
"""

from __future__ import annotations

from services.core.scheduling import snapshot as st
from services.core.scheduling.actions.nodes import predicate_nodes
from services.core.scheduling.actions.victims import evict_until_fits, validate_victims
from services.core.scheduling.model import JobInfo, NodeInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement

VICTIM_STATUSES = frozenset({st.BOUND, st.RUNNING})


class PreemptAction:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase == "Pending" or ssn.job_valid(job) or not ssn.job_starving(job):
                continue
            by_queue.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        for qname in sorted(by_queue, key=lambda q: (ssn.queues[q].created, q)):
            jobs = by_queue[qname]
            while not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                tasks = PriorityQueue(ssn.task_order, job.pending_tasks())
                while not tasks.empty():
                    task = tasks.pop()
                    if task.spec.preemption_policy == "Never":
                        continue
                    if not self.preempt_task(ssn, job, task, stmt, same_job=False):
                        break
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
        # intra-job: tasks of a starving job evict lower-priority tasks of the same job
        for job in sorted(ssn.jobs.values(), key=lambda j: (j.created, j.key)):
            if job.phase == "Pending" or ssn.job_valid(job) or not ssn.job_starving(job):
                continue
            for task in sorted(job.pending_tasks(), key=lambda t: (-t.priority, t.index)):
                if task.spec.preemption_policy == "Never":
                    continue
                stmt = Statement(ssn)
                if self.preempt_task(ssn, job, task, stmt, same_job=True):
                    stmt.commit()
                else:
                    stmt.discard()

    def preempt_task(
        self, ssn: Session, job: JobInfo, task: TaskInfo, stmt: Statement, same_job: bool
    ) -> bool:
        if not ssn.allocatable(ssn.queues[job.queue], task) and not same_job:
            return False
        if ssn.pre_predicate(task) is not None:
            return False
        nodes = _candidate_nodes(ssn, task)
        for node in nodes:
            candidates = [
                t for t in node.tasks.values()
                if t.status in VICTIM_STATUSES and t.spec.preemptable
                and ((t.job == task.job) if same_job else
                     (t.job != task.job and ssn.jobs[t.job].queue == job.queue))
                and not (task.best_effort and not t.best_effort)
            ]  # fmt: skip
            victims = ssn.preemptable(task, candidates)
            if not victims or not validate_victims(task, node, victims):
                continue
            sub = Statement(ssn)
            if evict_until_fits(ssn, task, node, victims, sub, "preempt", check_first=True) and (
                ssn.predicate(task, node) is None
            ):
                sub.pipeline(task, node, ssn.bind_devices(task, node))
                stmt.merge(sub)
                return True
            sub.discard()
        return False


def _candidate_nodes(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """Nodes passing the non-resource predicates, in descending score order (stable)."""
    out = []
    for node in ssn.node_list:
        if ssn.predicate(task, node) is None:
            out.append((ssn.node_score(task, node), node.order, node))
    out.sort(key=lambda x: (-x[0], x[1]))
    _ = predicate_nodes  # resource fit is checked per node after evictions
    return [n for _, _, n in out]
