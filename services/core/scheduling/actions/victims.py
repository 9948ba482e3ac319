"""Shared preempt/reclaim machinery: victim ordering (Volcano `BuildVictimsPriorityQueue`) and
evicting on one node until the task fits FutureIdle."""

from __future__ import annotations

from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement


def victim_queue(
    ssn: Session, preemptor: TaskInfo, victims: list[TaskInfo]
) -> PriorityQueue[TaskInfo]:
    """Lowest first: same job → reverse TaskOrder; same queue → reverse JobOrder then TaskOrder;
    different queues → VictimQueueOrder."""
    pq_queue = ssn.queues[ssn.jobs[preemptor.job].queue]

    def less(lhs: TaskInfo, r: TaskInfo) -> bool:
        if lhs.job == r.job:
            return not ssn.task_order(lhs, r)
        lj, rj = ssn.jobs[lhs.job], ssn.jobs[r.job]
        if lj.queue == rj.queue:
            if ssn.job_order(lj, rj) != ssn.job_order(rj, lj):
                return not ssn.job_order(lj, rj)
            return not ssn.task_order(lhs, r)
        return ssn.victim_queue_order(ssn.queues[lj.queue], ssn.queues[rj.queue], pq_queue)

    return PriorityQueue(less, victims)


def validate_victims(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """FutureIdle + Σ victims must cover the request (Volcano `ValidateVictims`)."""
    avail = node.future_idle()
    for v in victims:
        avail.add(v.resreq)
    return task.resreq.less_equal(avail)


def evict_until_fits(
    ssn: Session, task: TaskInfo, node: NodeInfo, victims: list[TaskInfo], stmt: Statement,
    reason: str, check_first: bool,
) -> bool:  # fmt: skip
    """Evict victims lowest-first until the task fits FutureIdle (and the predicates pass)."""
    pq = victim_queue(ssn, task, victims)
    while True:
        if check_first and not ssn.fits_resources(task, node, future=True):
            return True
        if pq.empty():
            break
        victim = pq.pop()
        stmt.evict(victim, reason)
        if not check_first and not ssn.fits_resources(task, node, future=True):
            return True
    return not ssn.fits_resources(task, node, future=True)
