"""Shared preempt/reclaim machinery: victim ordering (Volcano `BuildVictimsPriorityQueue`), the
FutureIdle fit, evicting on one node until the task fits it, and pipelining the task there.

"Fits FutureIdle" covers cards too: the card slices of tasks evicted in this session count as
free, pipelined ones as taken (`Session.card_view`), as Volcano's FutureIdle = Idle + Releasing
− Pipelined does for cpu and memory. Without that, a node whose cards are all held by
preemptable pods would never be a place to preempt on, however low their priority.
"""

from __future__ import annotations

from services.core.scheduling.model import NodeInfo, QueueInfo, TaskInfo
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


def validate_victims(ssn: Session, task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """FutureIdle + Σ victims must cover the request (Volcano `ValidateVictims`), and the task's
    cards must fit once the victims' slices are free as well: evicting pods whose slices cannot
    make room for it would only lose their work."""
    avail = node.future_idle()
    for v in victims:
        avail.add(v.resreq)
    if not task.resreq.less_equal(avail):
        return False
    return ssn.predicate(task, node, future=True, without=victims) is None


def fits_future(ssn: Session, task: TaskInfo, node: NodeInfo) -> bool:
    """The task fits the node's FutureIdle, cards included (Volcano: `request ≤ FutureIdle` and
    `PredicateFn` passes once the evicted tasks' devices are released)."""
    if ssn.fits_resources(task, node, future=True):
        return False
    return ssn.predicate(task, node, future=True) is None


def evict_until_fits(
    ssn: Session, task: TaskInfo, node: NodeInfo, victims: list[TaskInfo], stmt: Statement,
    reason: str, queue: QueueInfo | None = None,
) -> bool:  # fmt: skip
    """Evict victims lowest-first while the task does not fit FutureIdle, or (`queue` given)
    its queue could not take it (checked before each eviction, so nothing is evicted when it
    already would). With free cards on the node but the queue held by an ancestor's capability
    that the victims fill, fitting the node alone evicted nothing and left the reclaimer
    pipelined on room its queue could never take, for good."""
    pq = victim_queue(ssn, task, victims)
    while not (fits_future(ssn, task, node) and (queue is None or ssn.allocatable(queue, task))):
        if pq.empty():
            return False
        stmt.evict(pq.pop(), reason, task.job)
    return True


def pipeline_on(ssn: Session, stmt: Statement, task: TaskInfo, node: NodeInfo) -> bool:
    """Pipeline the task on the node with cards from the future view; False (nothing done) when
    the cards it needs are not there, so a device task is never pipelined without its cards."""
    slices = ssn.bind_devices(task, node, future=True)
    if task.spec.devices and not slices and ssn.device_binder is not None:
        return False
    stmt.pipeline(task, node, slices)
    return True
