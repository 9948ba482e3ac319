"""`sla` (Volcano `plugins/sla/sla.go`): a job that has waited longer than its SLA waiting time
is forced through enqueue and pipelining (Permit); before that the plugin abstains.

The waiting time comes from the PodGroup annotation `sla-waiting-time` (or
`volcano.sh/sla-waiting-time`), else the plugin argument `sla-waiting-time`; both are Go
durations ("3m", "1h30m"). JobOrder puts jobs with a waiting time first, earlier deadlines
(creation + waiting time) first. Creation time is the job's arrival on the virtual clock.
"""

from __future__ import annotations

from services.core.godurations import go_duration
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import JobInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import ABSTAIN, PERMIT

KEYS = ("sla-waiting-time", "volcano.sh/sla-waiting-time")


class SlaPlugin:
    name = "sla"

    def __init__(self, conf: PluginConf) -> None:
        raw = conf.arguments.get("sla-waiting-time")
        self.default = go_duration(str(raw)) if raw is not None else None
        self.now = 0.0

    def on_session_open(self, ssn: Session) -> None:
        self.now = ssn.now

    def waiting_time(self, job: JobInfo) -> float | None:
        for key in KEYS:
            if key in job.spec.annotations:
                return go_duration(job.spec.annotations[key])
        return self.default

    def _deadline(self, job: JobInfo) -> float | None:
        wait = self.waiting_time(job)
        return None if wait is None else job.spec.arrive_at + wait

    def job_order(self, lhs: JobInfo, r: JobInfo) -> int:
        ld, rd = self._deadline(lhs), self._deadline(r)
        if ld is None and rd is None:
            return 0
        if ld is None or rd is None:
            return 1 if ld is None else -1
        if ld == rd:
            return 0
        return -1 if ld < rd else 1

    def _vote(self, job: JobInfo) -> int:
        deadline = self._deadline(job)
        return PERMIT if deadline is not None and self.now >= deadline else ABSTAIN

    def revisit_at(self, ssn: Session) -> float | None:
        """The next deadline still ahead: until then the plugin abstains for every job as it
        did, so an unchanged cluster needs no session before it (scheduler/service.py)."""
        ahead = [d for job in ssn.jobs.values() if (d := self._deadline(job)) is not None and d > self.now]
        return min(ahead, default=None)

    def job_enqueueable(self, job: JobInfo) -> int:
        return self._vote(job)

    def job_pipelined(self, job: JobInfo) -> int:
        return self._vote(job)
