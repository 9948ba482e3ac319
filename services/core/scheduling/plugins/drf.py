"""`drf` (Volcano `plugins/drf/drf.go`): dominant resource fairness between jobs.

Share = max over resources of allocated/total (`helpers.Share`); JobOrder: lower share first;
Preemptable: a victim if the preemptor's share after adding its request ≤ the victim job's
share after removing the victim (delta 1e-6). hDRF (`enableHierarchy`) is not implemented:
the switch is taken so a moved conf loads, and `config.not_run` names it to the operator (the
scheduler's log at start, `tessera up` and `tessera simulate` on stderr) rather than let it be
believed honoured.
"""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import JobInfo, TaskInfo
from services.core.scheduling.resources import Resource, share
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT

DELTA = 1e-6


class DrfPlugin:
    name = "drf"

    def __init__(self, conf: PluginConf) -> None:
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn

    def share_of(self, allocated: Resource) -> float:
        assert self.ssn is not None
        if not (allocated.cpu or allocated.memory or allocated.scalars):
            return 0.0  # a job with nothing placed (every job of a backlog, at every heap step)
        total = self.ssn.total
        s = max(share(allocated.cpu, total.cpu), share(allocated.memory, total.memory))
        for k, v in total.scalars.items():
            s = max(s, share(allocated.scalars.get(k, 0), v))
        return s

    def job_order(self, lhs: JobInfo, r: JobInfo) -> int:
        ls, rs = self.share_of(lhs.allocated), self.share_of(r.allocated)
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def preemptable(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        assert self.ssn is not None
        pjob = self.ssn.jobs[preemptor.job]
        lshare = self.share_of(pjob.allocated.clone().add(preemptor.resreq))
        victims = []
        allocations: dict[str, Resource] = {}
        for t in preemptees:
            if t.job not in allocations:
                allocations[t.job] = self.ssn.jobs[t.job].allocated.clone()
            rshare = self.share_of(allocations[t.job].clone().sub(t.resreq))
            if lshare < rshare or abs(lshare - rshare) <= DELTA:
                allocations[t.job].sub(t.resreq)
                victims.append(t)
        return victims, PERMIT
