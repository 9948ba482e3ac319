"""`capacity` (Volcano `plugins/capacity/capacity.go`): queue `deserved` used directly (no
water-filling). realCapability = min(capability, total − Σguarantee + own guarantee), per
ancestor with `enableHierarchy`; deserved := max(min(deserved, realCapability), guarantee).
Allocatable: queue Open (and a leaf under hierarchy) and allocated + req ≤ realCapability for
the queue and every ancestor. Enqueueable: minResources + allocated + inqueue − elastic ≤
realCapability. Reclaimable: victim keeps its queue ≥ guarantee and its queue is above deserved
on a dimension the victim requests; reclaimees are weighed in victim order. Preemptive:
allocated + request ≤ realCapability, and ≤ deserved on at least one requested dimension (a
dimension deserved does not name counts as 0: a queue without `deserved` never reclaims, and one
over its deserved in every requested dimension reclaims nothing). Share = max
allocated/deserved (no deserved ⇒ 1). QueueOrder: priority, share, then "has deserved" first.
With `enableHierarchy`, VictimQueueOrder takes victims first from the queue whose closest common
ancestor with the reclaimer's queue is deepest (its siblings before its cousins). No Overused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.scheduling.actions.victims import victim_queue
from services.core.scheduling.config import ADVICE_WORDS, PluginConf
from services.core.scheduling.model import JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.plugins import shares as sh
from services.core.scheduling.plugins.proportion import allocated_of
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
    #: what its jobs hold beyond their minResources (preempt can take it back)
    elastic: sh.Vec = field(default_factory=dict)
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
        if self.hierarchy:
            self._hierarchical_capability(ssn)
        for job in ssn.jobs.values():
            job_alloc = allocated_of(qs, job)
            minres = qs.min_resources(job)
            # Volcano's GetElasticResources: allocated beyond minResources (all of it without)
            elastic = job_alloc if minres is None else {k: v for k, v in sh.sub(job_alloc, minres).items() if v > 0}
            inqueue = minres if job.phase == "Inqueue" and minres else None
            for a in self._chain(job.queue):  # every ancestor counts its descendants' jobs
                a.allocated = sh.add(a.allocated, job_alloc)
                a.elastic = sh.add(a.elastic, elastic)
                if inqueue:
                    a.inqueue = sh.add(a.inqueue, inqueue)
        for a in self.attrs.values():
            self._update_share(a)

    def _hierarchical_capability(self, ssn: Session) -> None:
        """Volcano's hierarchical capacity: `root` is bounded by its own capability only
        (infinite when unset: jobs may ask more than the cluster has now), and each child's
        realCapability is its parent's minus the children's guarantees plus its own, capped by
        its capability. A dimension missing from a vector is unbounded."""
        children: dict[str, list[CapAttr]] = {}
        for a in self.attrs.values():
            if a.name != "root":
                children.setdefault(a.parent or "root", []).append(a)
        root = self.attrs.get("root")
        if root is None:
            return
        root.real_capability = self.qs.canonical(ssn.queues["root"].spec.capability)
        todo = [root]
        while todo:
            parent = todo.pop()
            kids = sorted(children.get(parent.name, []), key=lambda a: a.name)
            guarantees: sh.Vec = {}
            for kid in kids:
                guarantees = sh.add(guarantees, kid.guarantee)
            for kid in kids:
                real = {k: v - guarantees.get(k, 0.0) + kid.guarantee.get(k, 0.0)
                        for k, v in parent.real_capability.items()}  # fmt: skip
                for k, v in self.qs.canonical(ssn.queues[kid.name].spec.capability).items():
                    real[k] = min(real.get(k, sh.INF), v)
                kid.real_capability = real
                todo.append(kid)

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

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> tuple[str, str] | None:
        """`allocatable`'s refusal in words: the resource, the request, capability, allocated."""
        if queue.state != "Open":
            return sh.closed_queue(queue.name, queue.state, "takes no new pods", "capacity")
        assert self.ssn is not None
        if self.hierarchy and any(q.spec.parent == queue.name for q in self.ssn.queues.values()):
            return (f"queue {queue.name} has child queues: only leaf queues run pods (capacity)",
                    "submit the job to a leaf queue")
        req = self.qs.task(task)
        dims = [k for k, v in req.items() if v > 0]
        over = [(a, dim) for a in self._chain(queue.name)
                if (dim := sh.first_over(sh.add(a.allocated, req), a.real_capability, dims, missing=sh.INF,
                                             rules=self.qs.rules))]  # fmt: skip
        if not over:
            return None
        a, dim = self._binding(over)
        limit, have = a.real_capability.get(dim, sh.INF), a.allocated.get(dim, 0.0)
        asked = f"queue {a.name}: {sh.dim_name(dim)} {sh.amount(dim, req[dim])} requested"
        if self._inherited(a, dim):
            words = f"{asked}, capability {sh.amount(dim, limit)}, allocated {sh.amount(dim, have)} (capacity)"
            return words, sh.parent_fix(a.name, a.parent, dim, limit)
        need = have + req[dim]
        assert self.ssn is not None
        if self.hierarchy or self.ssn.conf.rules < ADVICE_WORDS:  # (what a parent leaves it is said above)
            words = f"{asked}, capability {sh.amount(dim, limit)}, allocated {sh.amount(dim, have)} (capacity)"
            return words, (f"raise queue {a.name}'s capability of {sh.dim_name(dim)} to {sh.amount(dim, need)}, "
                           "or let its running pods finish")  # fmt: skip
        return self._limit_words(a, dim, asked, need)

    def _limit_words(self, a: CapAttr, dim: str, asked: str, need: float) -> tuple[str, str]:
        """(words, fix) for a queue over its realCapability: min(its capability, the cluster
        less the other queues' guarantees), as Volcano's capacity computes it — naming the one
        that binds. A queue that set no capability was told "capability 4 … raise queue
        inference's capability to 5", where only lowering another queue's guarantee would help
        (a platform lead's review)."""
        assert self.ssn is not None
        limit, have = a.real_capability.get(dim, sh.INF), a.allocated.get(dim, 0.0)
        n, amt = sh.dim_name(dim), sh.amount
        own = self.qs.canonical(self.ssn.queues[a.name].spec.capability).get(dim, sh.INF)
        total = sh.add(sh.vec(self.ssn.total), self.qs.total).get(dim, 0.0)
        others = [(q.name, g) for q in sorted(self.ssn.queues.values(), key=lambda q: q.name)
                  if q.name != a.name and (g := self.qs.canonical(q.spec.guarantee).get(dim, 0.0)) > sh.EPS]  # fmt: skip
        left = total - sum(g for _, g in others)  # (its own guarantee is its own to hold)
        own_binds = own <= limit + sh.EPS
        raise_cap = f"raise queue {a.name}'s capability of {n} to {amt(dim, need)}" if own + sh.EPS < need else ""
        held = ", ".join(f"{q} {amt(dim, g)}" for q, g in others)
        if own_binds:
            words = f"{asked}, capability {amt(dim, limit)}, allocated {amt(dim, have)} (capacity)"
        elif not others:
            words = (f"{asked}, allocated {amt(dim, have)}, limit {amt(dim, limit)}: all the cluster has "
                     "(capacity realCapability; the queue sets no lower capability)")  # fmt: skip
        else:
            words = (f"{asked}, allocated {amt(dim, have)}, limit {amt(dim, limit)}: the cluster's "
                     f"{amt(dim, total)} less the guarantees of other queues ({held}) (capacity realCapability; "
                     "the queue sets no lower capability)")  # fmt: skip
        if need > total + sh.EPS:  # no setting gives it more than the cluster has
            return words, (f"queue {a.name} would need {amt(dim, need)} {n}, more than the cluster's "
                           f"{amt(dim, total)}: let its running pods finish (or preempt evict some of them for "
                           f"this job), or add {n} to the cluster{' and ' + raise_cap if raise_cap else ''}")  # fmt: skip
        if own_binds and left + sh.EPS >= need:  # its own capability alone binds
            return words, f"{raise_cap}, or let its running pods finish"
        many = len(others) > 1
        fix = (f"lower the guarantee{'s' if many else ''} of queue{'s' if many else ''} "
               f"{', '.join(q for q, _ in others)} on {n} by {amt(dim, need - left)}{' in all' if many else ''}")
        if own_binds:
            words = f"{words[:-len(' (capacity)')]}; the other queues' guarantees ({held}) leave it no more (capacity)"
            fix = f"{raise_cap} and {fix}"
        return words, f"{fix}, or let queue {a.name}'s running pods finish"

    def _inherited(self, a: CapAttr, dim: str) -> bool:
        """Whether `a`'s limit on `dim` is what its parent leaves it (hierarchy: it sets no lower
        capability of its own). Raising it there is refused (a child above its parent), so the
        words must name the parent."""
        assert self.ssn is not None
        if not self.hierarchy or not a.parent:
            return False
        own = self.qs.canonical(self.ssn.queues[a.name].spec.capability).get(dim, sh.INF)
        return own > a.real_capability.get(dim, sh.INF) + sh.EPS

    def _binding(self, over: list[tuple[CapAttr, str]]) -> tuple[CapAttr, str]:
        """Of the queues on the chain (leaf first) over their limit, the one whose own setting
        binds: past a leaf whose limit is inherited, the first ancestor over on that resource."""
        a, dim = over[0]
        limit = a.real_capability.get(dim, sh.INF)
        inherited = self._inherited(a, dim)
        for b, d in over[1:]:  # (an ancestor as tight as the leaf binds it too: raising the leaf's
            # capability alone would change nothing, and above its parent's it is refused)
            if d == dim and (inherited or b.real_capability.get(dim, sh.INF) <= limit + sh.EPS):
                return b, d
        return a, dim

    def enqueue_reason(self, job: JobInfo) -> tuple[str, str] | None:
        """`job_enqueueable`'s refusal in words."""
        assert self.ssn is not None
        queue = self.ssn.queues[job.queue]
        if queue.state != "Open":
            return sh.closed_queue(queue.name, queue.state, "admits no new PodGroups", "capacity")
        minres = self.qs.min_resources(job)
        if minres is None:
            return None
        dims = [k for k, v in minres.items() if v > 0]
        over = []
        for a in self._chain(job.queue):
            want = sh.enqueue_want(minres, a.allocated, a.inqueue, a.elastic)
            if (dim := sh.first_over(want, a.real_capability, dims, missing=sh.INF, rules=self.qs.rules)) is not None:
                over.append((a, dim))
        if not over:
            return None
        a, dim = self._binding(over)
        own = self.qs.canonical(self.ssn.queues[a.name].spec.capability)
        return sh.enqueue_words(a.name, dim, minres, a.allocated, a.inqueue, a.real_capability,
                                sh.enqueue_want(minres, a.allocated, a.inqueue, a.elastic), "capacity",
                                own=own, elastic=a.elastic, parent=a.parent if self.hierarchy else "",
                                rules=self.ssn.conf.rules)  # fmt: skip

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if queue.state != "Open":
            return False
        a = self.attrs[queue.name]
        req = self.qs.task(task)
        future = sh.add(a.allocated, req)
        dims = [k for k, v in req.items() if v > 0]
        if not sh.le(future, a.real_capability, dims=dims, missing=sh.INF):
            return False
        return any(
            future.get(k, 0.0) <= a.deserved.get(k, 0.0) + sh.EPS for k, v in req.items() if v > 0
        )

    def victim_queue_order(self, lhs: QueueInfo, r: QueueInfo, preemptor: QueueInfo) -> int:
        """Hierarchy only (Volcano registers it with `enableHierarchy`): the queue sharing the
        deeper ancestor with the preemptor's queue gives first; equal depth abstains."""
        if not self.hierarchy:
            return 0
        lv, rv = self._common_depth(lhs.name, preemptor.name), self._common_depth(r.name, preemptor.name)
        return 0 if lv == rv else (-1 if lv > rv else 1)

    def _common_depth(self, queue: str, other: str) -> int:
        """Index (from root) of the last ancestor the two queues' ancestor paths share."""
        a, b = self._ancestors(queue), self._ancestors(other)
        depth = 0
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                break
            depth = i
        return depth

    def _ancestors(self, queue: str) -> list[str]:
        """The queue's ancestors, root first (the queue itself excluded)."""
        chain = [a.name for a in self._chain(queue)][1:]
        return chain[::-1]

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
            want = sh.enqueue_want(minres, a.allocated, a.inqueue, a.elastic)
            if not sh.le(want, a.real_capability, dims=dims, missing=sh.INF):
                return REJECT
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        minres = self.qs.min_resources(job)
        if minres:
            for a in self._chain(job.queue):  # (Volcano adds it to every ancestor's inqueue too)
                a.inqueue = sh.add(a.inqueue, minres)

    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, 1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)

    def _move(self, task: TaskInfo, sign: int) -> None:
        # pipelined tasks count, as in proportion (Volcano's Pipeline fires AllocateFunc)
        assert self.ssn is not None
        req = self.qs.task(task)
        for a in self._chain(self.ssn.jobs[task.job].queue):
            a.allocated = sh.moved(a.allocated, req, sign)
            self._update_share(a)
