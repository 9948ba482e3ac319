"""`gang` (Volcano `plugins/gang/gang.go`): all-or-nothing.

JobValid: enough valid tasks (per role minTaskMember and minAvailable), else `NotEnoughTasks`.
JobReady: ReadyTaskNum ≥ minAvailable and every role's minTaskMember met. JobPipelined: ready +
pipelined ≥ minAvailable (Permit) else Reject. Starving: ready + pipelined < minAvailable.
JobOrder: not-ready jobs first. Victims: a job loses tasks only while ReadyTaskNum > minAvailable.
"""

from __future__ import annotations

from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo, TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT

_VALID = ALLOCATED_STATUSES | {st.PENDING, st.PIPELINED, st.SUCCEEDED}
_READY = ALLOCATED_STATUSES | {st.SUCCEEDED}


def role_counts(job: JobInfo, statuses: frozenset[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in job.tasks.values():
        if t.status in statuses or (st.PENDING in statuses and t.status == st.PENDING):
            out[t.role] = out.get(t.role, 0) + 1
    return out


def roles_met(job: JobInfo, statuses: frozenset[str]) -> bool:
    """Per-role minTaskMember, checked only when minAvailable ≥ Σ minTaskMember (Volcano)."""
    if not job.min_task_member or job.min_available < sum(job.min_task_member.values()):
        return True
    counts = role_counts(job, statuses)
    return all(counts.get(role, 0) >= n for role, n in job.min_task_member.items())


def ready_num(job: JobInfo) -> int:
    """Volcano `JobInfo.ReadyTaskNum`: Bound + Binding + Running + Allocated + Succeeded. Pending
    BestEffort tasks count only for JobReady (`Ready()`), not for starving/pipelined/victims —
    a BestEffort preemptor's job still starves (volcano #3335)."""
    return sum(1 for t in job.tasks.values() if t.status in _READY)


class GangPlugin:
    name = "gang"

    def __init__(self, conf: PluginConf) -> None:
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn

    def job_valid(self, job: JobInfo) -> str | None:
        if not roles_met(job, frozenset(_VALID)):
            return "NotEnoughPodsOfTask"
        valid = sum(1 for t in job.tasks.values() if t.status in _VALID)
        if valid < job.min_available:
            return (
                f"NotEnoughTasks: not enough valid tasks for gang-scheduling, "
                f"valid: {valid}, min: {job.min_available}"
            )
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return job.ready_task_num() >= job.min_available and roles_met(job, frozenset(_READY))

    def job_pipelined(self, job: JobInfo) -> int:
        if ready_num(job) + job.waiting_task_num() >= job.min_available:
            return PERMIT
        return REJECT

    def job_starving(self, job: JobInfo) -> bool:
        return ready_num(job) + job.waiting_task_num() < job.min_available

    def job_order(self, lhs: JobInfo, r: JobInfo) -> int:
        lr, rr = self.job_ready(lhs), self.job_ready(r)
        if lr == rr:
            return 0
        return 1 if lr else -1

    def _victims(self, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        assert self.ssn is not None
        occupied: dict[str, int] = {}
        victims = []
        for t in preemptees:
            job = self.ssn.jobs[t.job]
            if t.job not in occupied:
                occupied[t.job] = ready_num(job)
            if occupied[t.job] > job.min_available:
                occupied[t.job] -= 1
                victims.append(t)
        return victims, PERMIT

    def preemptable(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        return self._victims(preemptees)

    def reclaimable(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        return self._victims(reclaimees)
