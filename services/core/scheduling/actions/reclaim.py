"""`reclaim` (Volcano `actions/reclaim/reclaim.go`): inter-queue reclaim.

Queues in QueueOrder; an Overused or non-Open queue is skipped. Per queue its best starving
job (JobOrder), per pending task (TaskOrder): skip `preemptionPolicy: Never`;
`Preemptive(queue, task)` must hold; on each candidate node (score order), reclaimees are
Running preemptable tasks of other queues that are `reclaimable`; `Reclaimable` filters
them, `ValidateVictims` needs FutureIdle + victims to cover the request (cards included);
victims are evicted in victim order while the task does not fit FutureIdle or its queue
could not take it (`Allocatable`, as Volcano's newer reclaimerFitsOnNode weighs the queue
too; cards: see `victims.py`); the task is pipelined on the first node that works. The job's statement is committed if JobPipelined, else discarded; the queue
is pushed back so its next job gets a turn.
"""

from __future__ import annotations

from services.core.scheduling import snapshot as st
from services.core.scheduling.actions.preempt import candidate_nodes
from services.core.scheduling.actions.topology import hard as hard_topology
from services.core.scheduling.actions.victims import (
    evict_until_fits,
    pipeline_on,
    validate_victims,
)
from services.core.scheduling.model import JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement


class ReclaimAction:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase == "Pending" or ssn.job_valid(job) or not ssn.job_starving(job):
                continue
            if hard_topology(job) or ssn.held(job):  # one HyperNode only; held: its pods refused
                continue
            if job.queue in ssn.queues and job.pending_tasks():
                by_queue.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            ssn.queue_order, [ssn.queues[q] for q in sorted(by_queue)]
        )
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue) or queue.state != "Open":
                continue
            jobs = by_queue[queue.name]
            if jobs.empty():
                continue
            job = jobs.pop()
            stmt = Statement(ssn)
            tasks = PriorityQueue(ssn.task_order, job.pending_tasks())
            while not tasks.empty():
                task = tasks.pop()
                if task.spec.preemption_policy == "Never" or not ssn.preemptive(queue, task):
                    continue
                if ssn.pre_predicate(task) is None:
                    reclaim_for(ssn, stmt, queue, task)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
            queues.push(queue)


def reclaim_for(ssn: Session, stmt: Statement, queue: QueueInfo, task: TaskInfo) -> bool:
    for node in candidate_nodes(ssn, task):
        candidates = [
            t for t in node.tasks.values()
            if t.status == st.RUNNING and t.spec.preemptable
            and ssn.jobs[t.job].queue != queue.name
            and ssn.queues[ssn.jobs[t.job].queue].reclaimable
        ]  # fmt: skip
        victims = ssn.reclaimable(task, candidates)
        if not victims or not validate_victims(ssn, task, node, victims):
            continue
        sub = Statement(ssn)
        if evict_until_fits(ssn, task, node, victims, sub, "reclaim", queue) and pipeline_on(
            ssn, sub, task, node
        ):
            stmt.merge(sub)
            return True
        sub.discard()
    return False
