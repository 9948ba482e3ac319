"""`proportion` (Volcano `plugins/proportion/proportion.go`, volcano.md §2.6): weighted
water-filling of the cluster into queue `deserved` shares, capped by realCapability and request,
floored by guarantee; QueueOrder by priority then share; Overused when allocated reached deserved
in every dimension; Allocatable/Preemptive compare only the requested dimensions; Reclaimable
takes victims while their queue is above deserved; enqueue admission against realCapability.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.scheduling import snapshot as st
from services.core.scheduling.config import ADVICE_WORDS, PluginConf
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.plugins import shares as sh
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT


@dataclass
class QueueAttr:
    name: str
    weight: int
    priority: int
    deserved: sh.Vec = field(default_factory=dict)
    allocated: sh.Vec = field(default_factory=dict)
    request: sh.Vec = field(default_factory=dict)
    inqueue: sh.Vec = field(default_factory=dict)
    elastic: sh.Vec = field(default_factory=dict)
    guarantee: sh.Vec = field(default_factory=dict)
    capability: sh.Vec = field(default_factory=dict)
    real_capability: sh.Vec = field(default_factory=dict)
    share: float = 0.0


class ProportionPlugin:
    name = "proportion"

    def __init__(self, conf: PluginConf) -> None:
        self.ssn: Session | None = None
        self.attrs: dict[str, QueueAttr] = {}
        self.total: sh.Vec = {}
        self.qs = sh.QueueShares(())

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.qs = qs = sh.shares_of(ssn)
        self.total = sh.add(sh.vec(ssn.total), qs.total)
        # every queue's guarantee is set aside, a queue with no job too (Volcano sums
        # ssn.Queues'): reserving room for an idle queue is what a guarantee is for
        guarantee_sum: sh.Vec = {}
        for q in sorted(ssn.queues.values(), key=lambda q: q.name):
            guarantee_sum = sh.add(guarantee_sum, qs.canonical(q.spec.guarantee))
        for job in sorted(ssn.jobs.values(), key=lambda j: j.key):
            q = ssn.queues[job.queue]
            attr = self.attrs.get(q.name)
            if attr is None:
                cap = {k: (sh.INF if v <= 0 and k in ("cpu", "memory") else v)
                       for k, v in qs.canonical(q.spec.capability).items()}  # fmt: skip
                attr = self.attrs[q.name] = QueueAttr(
                    q.name, q.weight, q.spec.priority, guarantee=qs.canonical(q.spec.guarantee),
                    capability=cap,
                )  # fmt: skip
            for t in job.tasks.values():
                if t.status in ALLOCATED_STATUSES:
                    attr.allocated = sh.add(attr.allocated, qs.task(t))
                    attr.request = sh.add(attr.request, qs.task(t))
                elif t.status == st.PENDING:
                    attr.request = sh.add(attr.request, qs.task(t))
            minres = qs.min_resources(job)
            if minres is not None:
                job_alloc = allocated_of(qs, job)
                if job.phase == "Inqueue":
                    attr.inqueue = sh.add(attr.inqueue, _pos(sh.sub(minres, job_alloc)))
                if job.phase == "Running" and job.ready_task_num() >= job.min_available:
                    attr.elastic = sh.add(attr.elastic, _pos(sh.sub(job_alloc, minres)))
        for attr in self.attrs.values():
            real = sh.add(sh.sub(self.total, guarantee_sum), attr.guarantee)
            for k, v in attr.capability.items():
                real[k] = min(real.get(k, sh.INF), v)
            attr.real_capability = real
        self._water_fill()
        for attr in self.attrs.values():
            self._update_share(attr)

    def _water_fill(self) -> None:
        remaining = dict(self.total)
        met: set[str] = set()
        attrs = sorted(self.attrs.values(), key=lambda a: a.name)
        for _ in range(64):
            total_weight = sum(a.weight for a in attrs if a.name not in met)
            if total_weight == 0:
                break
            old_remaining = dict(remaining)
            increased: sh.Vec = {}
            decreased: sh.Vec = {}
            for a in attrs:
                if a.name in met:
                    continue
                old = dict(a.deserved)
                d = sh.add(
                    a.deserved, {k: v * a.weight / total_weight for k, v in remaining.items()}
                )
                d = {k: min(v, a.real_capability.get(k, sh.INF)) for k, v in d.items()}
                d = {k: min(v, a.request.get(k, 0.0)) for k, v in d.items()}
                for k, v in a.guarantee.items():
                    d[k] = max(d.get(k, 0.0), v)
                a.deserved = d
                if sh.le(a.request, d) or _same(old, d):
                    met.add(a.name)
                for k in set(d) | set(old):
                    diff = d.get(k, 0.0) - old.get(k, 0.0)
                    if diff > 0:
                        increased[k] = increased.get(k, 0.0) + diff
                    elif diff < 0:
                        decreased[k] = decreased.get(k, 0.0) - diff
            remaining = sh.add(sh.sub(remaining, increased), decreased)
            if sh.empty(remaining) or _same(remaining, old_remaining):
                break

    def _update_share(self, attr: QueueAttr) -> None:
        s = 0.0
        for k, d in attr.deserved.items():
            a = attr.allocated.get(k, 0.0)
            s = max(s, (0.0 if a == 0 else 1.0) if d == 0 else a / d)
        attr.share = s

    def deserved_of(self, queue: str) -> dict[str, int]:
        attr = self.attrs.get(queue)
        return {k: round(v) for k, v in sorted(attr.deserved.items()) if v} if attr else {}

    # --- hooks ----------------------------------------------------------------------------

    def queue_order(self, lhs: QueueInfo, r: QueueInfo) -> int:
        if lhs.spec.priority != r.spec.priority:
            return -1 if lhs.spec.priority > r.spec.priority else 1
        la, ra = self.attrs.get(lhs.name), self.attrs.get(r.name)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return False
        return sh.le(attr.deserved, attr.allocated, dims=list(attr.deserved))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if queue.state != "Open":
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        req = self.qs.task(task)
        return sh.le(
            sh.add(attr.allocated, req), attr.deserved, dims=[k for k, v in req.items() if v > 0]
        )

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.allocatable(queue, task)

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> tuple[str, str] | None:
        """`allocatable`'s refusal in words: the resource, the request, deserved, allocated."""
        if queue.state != "Open":
            return sh.closed_queue(queue.name, queue.state, "takes no new pods", "proportion")
        attr = self.attrs.get(queue.name)
        if attr is None:
            return None
        req = self.qs.task(task)
        dim = sh.first_over(sh.add(attr.allocated, req), attr.deserved,
                            [k for k, v in req.items() if v > 0], rules=self.qs.rules)  # fmt: skip
        if dim is None:
            return None
        cap = attr.capability.get(dim, sh.INF)
        capped = f", capability {sh.amount(dim, cap)}" if cap != sh.INF else ""
        total = self.total.get(dim, 0.0)
        if req[dim] > total + sh.EPS:
            return (f"queue {queue.name}: {sh.dim_name(dim)} {sh.amount(dim, req[dim])} requested, "
                    f"the cluster has {sh.amount(dim, total)} (proportion: deserved never exceeds "
                    "the cluster)", f"add {sh.amount(dim, sh.whole_units(dim, req[dim] - total))} {sh.dim_name(dim)} to "
                    "the cluster, or ask for less")  # fmt: skip
        return (f"queue {queue.name}: {sh.dim_name(dim)} {sh.amount(dim, req[dim])} requested, "
                f"deserved {sh.amount(dim, attr.deserved.get(dim, 0.0))}{capped}, allocated "
                f"{sh.amount(dim, attr.allocated.get(dim, 0.0))} (proportion: allocated + "
                "request must stay within deserved)",
                self.more_share(queue.name, attr, dim, attr.allocated.get(dim, 0.0) + req[dim]))  # fmt: skip

    def _older_share_words(self, name: str, dim: str, need: float, minimum: str) -> str:
        """`more_share` before ADVICE_WORDS (what a log of an older generation recorded)."""
        tail = f", or lower the job's minAvailable (now {minimum})" if minimum else ""
        return (f"queue {name} must deserve {sh.amount(dim, need)} {sh.dim_name(dim)}: raise its "
                f"capability or weight, or let its running pods finish{tail}")  # fmt: skip

    def more_share(self, name: str, attr: QueueAttr, dim: str, need: float, minimum: str = "") -> str:
        """What would let queue `name` deserve `need` of `dim`, as the water-filling decides it:
        deserved never exceeds the cluster, the queue's capability, or what the other queues'
        guarantees leave it (realCapability); below those, weight moves it. "Raise its
        capability or weight" was said of a queue that already deserved every card of the
        cluster, where no setting gives more (a platform lead's review): there the room can
        only come from its own running pods. `minimum`: the gang's way out, said last."""
        assert self.ssn is not None
        if self.ssn.conf.rules < ADVICE_WORDS:
            return self._older_share_words(name, dim, need, minimum)
        queue, want = f"queue {name}", f"{sh.amount(dim, need)} {sh.dim_name(dim)}"
        total = self.total.get(dim, 0.0)
        tail = f", or lower the job's minAvailable (now {minimum})" if minimum else ""
        if need > total + sh.EPS:
            return (f"{queue} would have to deserve {want}, more than the cluster's {sh.amount(dim, total)}: "
                    "no capability or weight gives it that; the room can only come from its own running "
                    f"pods — they finish, or preempt evicts some of them for this job{tail}")  # fmt: skip
        cap = attr.capability.get(dim, sh.INF)
        if cap + sh.EPS < need:
            return (f"raise {queue}'s capability of {sh.dim_name(dim)} to {sh.amount(dim, need)} (now "
                    f"{sh.amount(dim, cap)}), or let its running pods finish{tail}")  # fmt: skip
        real = attr.real_capability.get(dim, sh.INF)
        if real + sh.EPS < need:  # the other queues' guarantees are set aside first
            held = ", ".join(f"{q} {sh.amount(dim, v)}" for q, v in self._guarantors(name, dim))
            return (f"the guarantees of other queues ({held}) leave {queue} at most "
                    f"{sh.amount(dim, real)} {sh.dim_name(dim)}: lower them by "
                    f"{sh.amount(dim, need - real)}, or let its running pods finish{tail}")  # fmt: skip
        return (f"{queue} must deserve {want}: raise its weight (the other queues' demand shares the rest "
                f"of the cluster's {sh.amount(dim, total)}), or let its running pods finish{tail}")  # fmt: skip

    def _guarantors(self, name: str, dim: str) -> list[tuple[str, float]]:
        """The other queues' guarantees of `dim`, those without jobs too (all are set aside)."""
        assert self.ssn is not None
        got = ((q, self.qs.canonical(self.ssn.queues[q].spec.guarantee).get(dim, 0.0)) for q in sorted(self.ssn.queues))
        return [(q, v) for q, v in got if q != name and v > sh.EPS]

    def gang_reason(self, queue: QueueInfo, tasks: list[TaskInfo], min_available: int) -> tuple[str, str] | None:
        """A gang that fits the queue's share pod by pod but not whole: `allocatable` refused
        its later pods against the share its own first pods had taken in the session (then
        discarded). Said per pod at the session's end it was "1 requested, allocated 8" of a
        queue holding nothing, and "must deserve 9" of a gang needing 10."""
        attr = self.attrs.get(queue.name)
        if attr is None or queue.state != "Open" or not tasks:
            return None
        req: dict[str, float] = {}
        for t in tasks:
            req = sh.add(req, self.qs.task(t))
        dim = sh.first_over(sh.add(attr.allocated, req), attr.deserved, [k for k, v in req.items() if v > 0],
                            rules=self.qs.rules)
        if dim is None:
            return None
        have = attr.allocated.get(dim, 0.0)
        return (f"queue {queue.name}: the gang's {len(tasks)} pods need {sh.amount(dim, req[dim])} "
                f"{sh.dim_name(dim)} at once, deserved {sh.amount(dim, attr.deserved.get(dim, 0.0))}, "
                f"allocated {sh.amount(dim, have)} (proportion: allocated + request must stay within "
                "deserved)", self.more_share(queue.name, attr, dim, have + req[dim], str(min_available)))  # fmt: skip

    def enqueue_reason(self, job: JobInfo) -> tuple[str, str] | None:
        """`job_enqueueable`'s refusal in words: minResources against realCapability."""
        assert self.ssn is not None
        queue = self.ssn.queues[job.queue]
        if queue.state != "Open":
            return sh.closed_queue(queue.name, queue.state, "admits no new PodGroups", "proportion")
        minres = self.qs.min_resources(job)
        attr = self.attrs.get(job.queue)
        if minres is None or attr is None:
            return None
        want = sh.enqueue_want(minres, attr.allocated, attr.inqueue, attr.elastic)
        dim = sh.first_over(want, attr.real_capability, [k for k, v in minres.items() if v > 0],
                            missing=sh.INF, rules=self.qs.rules)  # fmt: skip
        if dim is None:
            return None
        return sh.enqueue_words(queue.name, dim, minres, attr.allocated, attr.inqueue,
                                attr.real_capability, want, "proportion", own=attr.capability,
                                elastic=attr.elastic, rules=self.ssn.conf.rules)  # fmt: skip

    def reclaimable(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        assert self.ssn is not None
        running: dict[str, sh.Vec] = {}
        victims = []
        for t in reclaimees:
            q = self.ssn.jobs[t.job].queue
            attr = self.attrs.get(q)
            if attr is None:
                continue
            if q not in running:
                running[q] = dict(attr.allocated)
            if not sh.le(running[q], attr.deserved, dims=list(running[q])):
                victims.append(t)
                running[q] = sh.sub(running[q], self.qs.task(t))
        return victims, PERMIT

    def job_enqueueable(self, job: JobInfo) -> int:
        assert self.ssn is not None
        queue = self.ssn.queues[job.queue]
        if queue.state != "Open":
            return REJECT
        minres = self.qs.min_resources(job)
        if minres is None:
            return PERMIT
        attr = self.attrs.get(job.queue)
        if attr is None:
            return PERMIT
        want = sh.enqueue_want(minres, attr.allocated, attr.inqueue, attr.elastic)
        dims = [k for k, v in minres.items() if v > 0]
        return PERMIT if sh.le(want, attr.real_capability, dims=dims, missing=sh.INF) else REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        minres = self.qs.min_resources(job)
        if attr is not None and minres:
            attr.inqueue = sh.add(attr.inqueue, minres)

    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)

    def _move(self, task: TaskInfo, sign: int) -> None:
        # a pipelined task counts too, as Volcano's Statement.Pipeline fires every plugin's
        # AllocateFunc: preempt pipelines a gang's pods one by one, and uncounted, each of them
        # found its queue's share as before it — one victim per session for the whole gang,
        # whose freed card the next session's allocate gave straight back to the victim's job
        assert self.ssn is not None
        attr = self.attrs.get(self.ssn.jobs[task.job].queue)
        if attr is None:
            return
        req = self.qs.task(task)
        attr.allocated = sh.moved(attr.allocated, req, sign)
        self._update_share(attr)


def allocated_of(qs: sh.QueueShares, job: JobInfo) -> sh.Vec:
    """What the job's allocated tasks count against its queue."""
    out: sh.Vec = {}
    for t in job.tasks.values():
        if t.status in ALLOCATED_STATUSES:
            out = sh.add(out, qs.task(t))
    return out


def _pos(v: sh.Vec) -> sh.Vec:
    return {k: max(0.0, x) for k, x in v.items()}


def _same(a: sh.Vec, b: sh.Vec) -> bool:
    keys = set(a) | set(b)
    return all(abs(a.get(k, 0.0) - b.get(k, 0.0)) < sh.EPS for k in keys)
