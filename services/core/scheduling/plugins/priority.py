"""`priority` (Volcano `plugins/priority/priority.go`): higher task/job priority first; a victim
of another job must have a lower job priority, of the same job a lower task priority; a job
starves while ready + waiting < #tasks. It registers no Reclaimable (reclaim ignores priority)."""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import JobInfo, TaskInfo
from services.core.scheduling.plugins.gang import ready_num
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT


class PriorityPlugin:
    name = "priority"

    def __init__(self, conf: PluginConf) -> None:
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn

    def task_order(self, lhs: TaskInfo, r: TaskInfo) -> int:
        if lhs.priority == r.priority:
            return 0
        return -1 if lhs.priority > r.priority else 1

    def job_order(self, lhs: JobInfo, r: JobInfo) -> int:
        if lhs.priority == r.priority:
            return 0
        return -1 if lhs.priority > r.priority else 1

    def preemptable(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        assert self.ssn is not None
        pjob = self.ssn.jobs[preemptor.job]
        victims = []
        for t in preemptees:
            if t.job != preemptor.job:
                if self.ssn.jobs[t.job].priority < pjob.priority:
                    victims.append(t)
            elif t.priority < preemptor.priority:
                victims.append(t)
        return victims, PERMIT

    def job_starving(self, job: JobInfo) -> bool:
        return ready_num(job) + job.waiting_task_num() < len(job.tasks)
