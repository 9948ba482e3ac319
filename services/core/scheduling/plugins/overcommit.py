"""`overcommit` (Volcano `plugins/overcommit`): enqueue admission against cluster idle scaled by
`overcommit-factor` (default 1.2; < 1 → 1.2): permit if inqueue + job.minResources ≤
total×factor − used, on the dimensions the job requests."""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import JobInfo
from services.core.scheduling.plugins import shares as sh
from services.core.scheduling.plugins.proportion import sum_allocated
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT


class OvercommitPlugin:
    name = "overcommit"

    def __init__(self, conf: PluginConf) -> None:
        factor = float(conf.arguments.get("overcommit-factor", 1.2))
        self.factor = factor if factor >= 1 else 1.2
        self.idle: sh.Vec = {}
        self.inqueue: sh.Vec = {}

    def on_session_open(self, ssn: Session) -> None:
        total = sh.add(sh.vec(ssn.total), sh.device_totals(ssn.node_list))
        used: sh.Vec = {}
        for n in ssn.node_list:
            used = sh.add(used, sh.vec(n.used))
            used = sh.add(used, _card_used(n))
        self.idle = sh.sub({k: v * self.factor for k, v in total.items()}, used)
        for job in ssn.jobs.values():
            if job.spec.min_resources is None:
                continue
            minres = sh.vec(job.spec.min_resources)
            if job.phase == "Inqueue":
                self.inqueue = sh.add(self.inqueue, minres)
            elif job.phase == "Running" and job.ready_task_num() < job.min_available:
                gap = sh.sub(minres, sh.vec(sum_allocated(job)))
                self.inqueue = sh.add(self.inqueue, {k: max(0.0, v) for k, v in gap.items()})

    def job_enqueueable(self, job: JobInfo) -> int:
        if job.spec.min_resources is None:
            return PERMIT
        minres = sh.vec(job.spec.min_resources)
        dims = [k for k, v in minres.items() if v > 0]
        if sh.le(sh.add(self.inqueue, minres), self.idle, dims=dims):
            return PERMIT
        return REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.spec.min_resources:
            self.inqueue = sh.add(self.inqueue, sh.vec(job.spec.min_resources))


def _card_used(node: object) -> sh.Vec:
    out: sh.Vec = {}
    for c in getattr(node, "cards", ()):
        if c.usage.slices_used:
            name = sh.card_resource(c.spec.type)
            out[name] = out.get(name, 0.0) + 1000.0
    return out
