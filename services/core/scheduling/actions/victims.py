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
    reason: str,
) -> bool:  # fmt: skip
    """Evict victims lowest-first while the task does not fit FutureIdle (checked before each
    eviction, so nothing is evicted when it already fits)."""
    pq = victim_queue(ssn, task, victims)
    while ssn.fits_resources(task, node, future=True):
        if pq.empty():
            return False
        stmt.evict(pq.pop(), reason)
    return True
