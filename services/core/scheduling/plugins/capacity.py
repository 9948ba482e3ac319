"""`capacity` (Volcano `plugins/capacity/capacity.go`): queue `deserved` used directly (no
water-filling). realCapability = min(capability, total − Σguarantee + own guarantee), per
ancestor with `enableHierarchy`; deserved := max(min(deserved, realCapability), guarantee).
Allocatable: queue Open (and a leaf under hierarchy) and allocated + req ≤ realCapability for
the queue and every ancestor. Enqueueable: minResources + allocated + inqueue − elastic ≤
realCapability. Reclaimable: victim keeps its queue ≥ guarantee and its queue is above deserved
on a dimension the victim requests. Preemptive: ≤ realCapability and < deserved on some
requested dimension; reclaimees are weighed in victim order. Share = max allocated/deserved (no deserved ⇒ 1). No Overused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.scheduling.actions.victims import victim_queue
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.plugins import shares as sh
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT


@dataclass
class CapAttr:
    name: str
    parent: str
    priority: int
    deserved: sh.Vec = field(default_factory=dict)
    allocated: sh.Vec = field(default_factory=dict)
    inqueue: sh.Vec = field(default_factory=dict)
    guarantee: sh.Vec = field(default_factory=dict)
    real_capability: sh.Vec = field(default_factory=dict)
    share: float = 0.0


class CapacityPlugin:
    name = "capacity"

    def __init__(self, conf: PluginConf) -> None:
        self.hierarchy = conf.enabled("enableHierarchy")
        self.ssn: Session | None = None
        self.attrs: dict[str, CapAttr] = {}
        self.qs = sh.QueueShares(())

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.qs = qs = sh.shares_of(ssn)
        total = sh.add(sh.vec(ssn.total), qs.total)
        guarantee_sum: sh.Vec = {}
        for q in ssn.queues.values():
            guarantee_sum = sh.add(guarantee_sum, qs.canonical(q.spec.guarantee))
        for q in sorted(ssn.queues.values(), key=lambda q: q.name):
            guarantee = qs.canonical(q.spec.guarantee)
            real = sh.add(sh.sub(total, guarantee_sum), guarantee)
            for k, v in qs.canonical(q.spec.capability).items():
                real[k] = min(real.get(k, sh.INF), v)
            deserved = {k: min(v, real.get(k, sh.INF))
                        for k, v in qs.canonical(q.spec.deserved).items()}  # fmt: skip
            for k, v in guarantee.items():
                deserved[k] = max(deserved.get(k, 0.0), v)
            self.attrs[q.name] = CapAttr(q.name, q.spec.parent, q.spec.priority, deserved,
                                         guarantee=guarantee, real_capability=real)  # fmt: skip
        for job in ssn.jobs.values():
            attr = self.attrs[job.queue]
            for t in job.tasks.values():
                if t.status in ALLOCATED_STATUSES:
                    for a in self._chain(job.queue):
                        a.allocated = sh.add(a.allocated, qs.task(t))
            minres = qs.min_resources(job)
            if job.phase == "Inqueue" and minres:
                attr.inqueue = sh.add(attr.inqueue, minres)
        for a in self.attrs.values():
            self._update_share(a)

    def _chain(self, queue: str) -> list[CapAttr]:
        out = []
        seen = set()
        name = queue
        while name in self.attrs and name not in seen:
            seen.add(name)
            out.append(self.attrs[name])
            if not self.hierarchy:
                break
            name = self.attrs[name].parent
        return out

    def _update_share(self, a: CapAttr) -> None:
        if not a.deserved:
            a.share = 1.0
            return
        s = 0.0
        for k, d in a.deserved.items():
            v = a.allocated.get(k, 0.0)
            s = max(s, (0.0 if v == 0 else 1.0) if d == 0 else v / d)
        a.share = s

    def deserved_of(self, queue: str) -> dict[str, int]:
        a = self.attrs.get(queue)
        return {k: round(v) for k, v in sorted(a.deserved.items())} if a else {}

    def queue_order(self, lhs: QueueInfo, r: QueueInfo) -> int:
        if lhs.spec.priority != r.spec.priority:
            return -1 if lhs.spec.priority > r.spec.priority else 1
        la, ra = self.attrs[lhs.name], self.attrs[r.name]
        if la.share != ra.share:
            return -1 if la.share < ra.share else 1
        if bool(la.deserved) != bool(ra.deserved):
            return -1 if la.deserved else 1
        return 0

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if queue.state != "Open":
            return False
        assert self.ssn is not None
        if self.hierarchy and any(q.spec.parent == queue.name for q in self.ssn.queues.values()):
            return False
        req = self.qs.task(task)
        dims = [k for k, v in req.items() if v > 0]
        return all(
            sh.le(sh.add(a.allocated, req), a.real_capability, dims=dims, missing=sh.INF)
            for a in self._chain(queue.name)
        )

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not self.allocatable(queue, task):
            return False
        a = self.attrs[queue.name]
        req = self.qs.task(task)
        return any(
            a.allocated.get(k, 0.0) < a.deserved.get(k, sh.INF) for k, v in req.items() if v > 0
        )

    def reclaimable(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        assert self.ssn is not None
        running: dict[str, sh.Vec] = {}
        victims = []
        rdims = {k for k, v in self.qs.task(reclaimer).items() if v > 0}
        ordered = victim_queue(self.ssn, reclaimer, reclaimees)
        while not ordered.empty():
            t = ordered.pop()
            q = self.ssn.jobs[t.job].queue
            a = self.attrs[q]
            alloc = running.setdefault(q, dict(a.allocated))
            req = self.qs.task(t)
            vdims = {k for k, v in req.items() if v > 0}
            if not (vdims & rdims):
                continue
            after = sh.sub(alloc, req)
            if not sh.le(a.guarantee, after, dims=[k for k, v in a.guarantee.items() if v > 0]):
                continue
            immediate = not (vdims & set(a.deserved))
            above = any(alloc.get(k, 0.0) > a.deserved.get(k, sh.INF) + sh.EPS for k in vdims)
            if immediate or above:
                victims.append(t)
                running[q] = after
        return victims, PERMIT

    def job_enqueueable(self, job: JobInfo) -> int:
        assert self.ssn is not None
        if self.ssn.queues[job.queue].state != "Open":
            return REJECT
        minres = self.qs.min_resources(job)
        if minres is None:
            return PERMIT
        dims = [k for k, v in minres.items() if v > 0]
        for a in self._chain(job.queue):
            want = sh.add(sh.add(minres, a.allocated), a.inqueue)
            if not sh.le(want, a.real_capability, dims=dims, missing=sh.INF):
                return REJECT
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        minres = self.qs.min_resources(job)
        if minres:
            a = self.attrs[job.queue]
            a.inqueue = sh.add(a.inqueue, minres)

    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, 1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)

    def _move(self, task: TaskInfo, sign: int) -> None:
        if task.status == "Pipelined":
            return
        assert self.ssn is not None
        req = self.qs.task(task)
        for a in self._chain(self.ssn.jobs[task.job].queue):
            a.allocated = sh.add(a.allocated, req) if sign > 0 else sh.sub(a.allocated, req)
            self._update_share(a)
