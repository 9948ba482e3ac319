"""`overcommit` (Volcano `plugins/overcommit`): enqueue admission against cluster idle scaled by
`overcommit-factor` (default 1.2; < 1 → 1.2): permit if inqueue + job.minResources ≤
total×factor − used, on the dimensions the job requests."""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo
from services.core.scheduling.plugins import shares as sh
from services.core.scheduling.plugins.proportion import allocated_of
from services.core.scheduling.resources import is_device_resource
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT

#: the words of a refusal by the cluster's idle room (not its size): evicting pods makes room
IDLE_ROOM = "exceeds the idle room"


class OvercommitPlugin:
    name = "overcommit"

    def __init__(self, conf: PluginConf) -> None:
        factor = float(conf.arguments.get("overcommit-factor", 1.2))
        self.factor = factor if factor >= 1 else 1.2
        self.idle: sh.Vec = {}
        self.qs = sh.QueueShares(())
        self.inqueue: sh.Vec = {}
        self.total: sh.Vec = {}

    def on_session_open(self, ssn: Session) -> None:
        self.qs = qs = sh.shares_of(ssn)
        total = sh.add(sh.vec(ssn.total), qs.total)
        used: sh.Vec = {}
        # a node's used carries the counted families' count names (`config.counted_vendors`),
        # which the tasks' shares below count already: taken from there alone, once
        counted = bool(qs.counted)
        for n in ssn.node_list:  # summed in place: a new dict per task was 4% of a session
            for k, v in n.used.to_map().items():
                if k != "pods" and not (counted and is_device_resource(k)):
                    used[k] = used.get(k, 0.0) + float(v)
            for t in n.tasks.values():
                if t.status in ALLOCATED_STATUSES:
                    for k, v in qs.task(t).items():
                        if is_device_resource(k):
                            used[k] = used.get(k, 0.0) + v
        self.total = total
        self.idle = sh.sub({k: v * self.factor for k, v in total.items()}, used)
        for job in ssn.jobs.values():
            minres = qs.min_resources(job)
            if minres is None:
                continue
            if job.phase == "Inqueue":
                self.inqueue = sh.add(self.inqueue, minres)
            elif job.phase == "Running" and job.ready_task_num() < job.min_available:
                gap = sh.sub(minres, allocated_of(qs, job))
                self.inqueue = sh.add(self.inqueue, {k: max(0.0, v) for k, v in gap.items()})

    def job_enqueueable(self, job: JobInfo) -> int:
        minres = self.qs.min_resources(job)
        if minres is None:
            return PERMIT
        dims = [k for k, v in minres.items() if v > 0]
        if sh.le(sh.add(self.inqueue, minres), self.idle, dims=dims):
            return PERMIT
        return REJECT

    def enqueue_reason(self, job: JobInfo) -> tuple[str, str] | None:
        """`job_enqueueable`'s refusal in words: what the PodGroup needs against the cluster's
        idle room scaled by `overcommit-factor`."""
        minres = self.qs.min_resources(job)
        if minres is None:
            return None
        want = sh.add(self.inqueue, minres)
        dim = sh.first_over(want, self.idle, [k for k, v in minres.items() if v > 0], rules=self.qs.rules)
        if dim is None:
            return None
        a, name = sh.amount, sh.dim_name(dim)
        total = self.total.get(dim, 0.0)
        if minres[dim] > total * self.factor + sh.EPS:
            return (f"cluster: {name} minResources {a(dim, minres[dim])}, the cluster has "
                    f"{a(dim, total)} ({a(dim, total * self.factor)} with overcommit's "
                    f"overcommit-factor {self.factor:g})", f"add "
                    f"{a(dim, sh.whole_units(dim, minres[dim] / self.factor - total))} {name} to the cluster, or ask "
                    "for less")  # fmt: skip
        idle = self.idle.get(dim, 0.0)
        # past the gate the gang must still be placed: freeing only what the scaled room lacks
        # ("free 1" of a gang of 2 on a full node) admits it to wait again, for nodes
        free_now = idle - total * (self.factor - 1)  # total − used, unscaled
        short = max(want[dim] - idle, minres[dim] - free_now)
        return (f"cluster: {name} minResources {a(dim, minres[dim])} + inqueue "
                f"{a(dim, self.inqueue.get(dim, 0.0))} {IDLE_ROOM} "
                f"{a(dim, max(idle, 0.0))} (overcommit: total × "
                f"overcommit-factor {self.factor:g} − used)",
                f"free {a(dim, sh.whole_units(dim, short))} {name} in the cluster, or raise "
                "overcommit's overcommit-factor")  # fmt: skip

    def job_enqueued(self, job: JobInfo) -> None:
        minres = self.qs.min_resources(job)
        if minres:
            self.inqueue = sh.add(self.inqueue, minres)
