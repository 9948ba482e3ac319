"""Queue, PodGroup and Volcano Job lifecycles as pure functions (volcano.md §1.1–1.3).

- Queues: Open/Closing/Closed (`pkg/controllers/queue/state`): closing a queue with PodGroups
  gives Closing, without gives Closed; Closing → Closed once it holds no PodGroup. `root`
  (reclaimable false) and `default` are created when absent.
- PodGroup phase (`session.go getPodGroupPhase`): scheduled = Running/Bound/Succeeded/Failed
  tasks; scheduled ≥ minMember ⇒ Completed when all scheduled ones finished, else Running;
  otherwise Inqueue stays Inqueue and anything else is Pending.
- Job lifecycle policies (`job_controller_util.go applyPolicies`): task-level policies first,
  then job-level; a policy matches the event (or `*`) or the exit code; default SyncJob.
  RestartJob/RestartTask/RestartPod bump the retry count and fail the job at maxRetry;
  AbortJob → Aborted, TerminateJob → Terminated, CompleteJob → Completed.
- Job phase on SyncJob (`state/running.go`): all pods finished ⇒ Completed if succeeded ≥
  minAvailable (and ≥ minSuccess when set) else Failed; minSuccess reached ⇒ Completed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import snapshot as st

SCHEDULED = st.SCHEDULED
FINISHED = frozenset({st.SUCCEEDED, st.FAILED})
TERMINAL_JOB_PHASES = frozenset({"Completed", "Failed", "Aborted", "Terminated"})


#: Volcano's webhook never lets these go (`validate_queue.go`); why, for the refusal's message
UNDELETABLE_QUEUES = {"default": "pods and jobs that name no queue are put in it",
                      "root": "it is the top of the queue tree, every queue's ancestor"}  # fmt: skip


def default_queues(existing: Iterable[str]) -> list[QueueSpec]:
    """Volcano's scheduler cache creates `root` (not reclaimable) and `default` when absent."""
    have = set(existing)
    out = []
    if "root" not in have:
        out.append(QueueSpec(name="root", weight=1, reclaimable=False, parent=""))
    if "default" not in have:
        out.append(QueueSpec(name="default", weight=1, reclaimable=True, parent="root"))
    return out


def close_queue(state: str, podgroups: int) -> str:
    if state == "Closed":
        return "Closed"
    return "Closing" if podgroups else "Closed"


def sync_queue(state: str, podgroups: int) -> str:
    return "Closed" if state == "Closing" and podgroups == 0 else state


def pod_group_phase(min_member: int, statuses: Sequence[str], current: str) -> str:
    scheduled = [s for s in statuses if s in SCHEDULED]
    if scheduled and len(scheduled) >= min_member:
        if all(s in FINISHED for s in scheduled) and len(scheduled) == len(statuses):
            return "Completed"
        return "Running"
    return (
        "Inqueue"
        if current == "Inqueue"
        else ("Running" if current == "Running" and scheduled else "Pending")
    )


#: why a Job shown Restarting is Running again (`restarted_gang_runs`)
RESTART_OVER = "restarted gang runs again"


def restarted_gang_runs(shown: str, statuses: Sequence[str], min_available: int) -> bool:
    """A Job shown `Restarting` whose restarted pods run again (at least minAvailable): its
    PodGroup never left Running while the pods were replaced, so no PodGroup change ends the
    restart — this does (volcano.md §1.3, Restarting → Running once the gang is back)."""
    return shown == "Restarting" and sum(s == st.RUNNING for s in statuses) >= max(min_available, 1)


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    action: str  # SyncJob | RestartJob | RestartTask | RestartPod | AbortJob | TerminateJob | CompleteJob
    phase: str = ""  # job phase to move to ("" = recompute with job_phase)


def policy_action(job: JobSpec, task: TaskSpec | None, event: str, exit_code: int | None) -> str:
    """Resolve the lifecycle action for `event` (task policies first, then job's)."""
    for policies in ((task.policies if task else ()), job.policies):
        for ev, action in policies:
            if ev.startswith("exitCode:"):
                if exit_code is not None and int(ev.split(":", 1)[1]) == exit_code:
                    return action
            elif ev in (event, "*"):
                return action
    return "SyncJob"


RESTARTS = frozenset({"RestartJob", "RestartTask", "RestartPod"})


def restart_phase(job: JobSpec, retry_count: int) -> str:
    """Where a restart takes a job that restarted `retry_count` times: Restarting, or Failed
    once maxRetry restarts are spent (`state/restarting.go`: retryCount ≥ maxRetry → Failed).
    A policy and a `RestartJob` Command follow the same rule."""
    return "Failed" if retry_count >= job.max_retry else "Restarting"


def on_pod_failed(
    job: JobSpec, task: TaskSpec | None, exit_code: int, retry_count: int, event: str = "PodFailed"
) -> PolicyDecision:
    """`event`: PodFailed, or PodEvicted for a pod deleted while it held its node (Volcano's
    job controller sends PodEvicted from its pod-delete handler; exitCode policies do not
    apply to it)."""
    action = policy_action(job, task, event, exit_code if event == "PodFailed" else None)
    if action in RESTARTS:
        return PolicyDecision(action, restart_phase(job, retry_count))
    if action == "AbortJob":
        return PolicyDecision(action, "Aborted")
    if action == "TerminateJob":
        return PolicyDecision(action, "Terminated")
    if action == "CompleteJob":
        return PolicyDecision(action, "Completed")
    return PolicyDecision("SyncJob")


def job_phase(job: JobSpec, statuses: Sequence[str]) -> str:
    """SyncJob on a live job: terminal when every pod finished or minSuccess is reached."""
    succeeded = sum(1 for s in statuses if s == st.SUCCEEDED)
    failed = sum(1 for s in statuses if s == st.FAILED)
    if job.min_success is not None and succeeded >= job.min_success:
        return "Completed"
    if statuses and succeeded + failed == len(statuses):
        if job.min_success is not None and succeeded < job.min_success:
            return "Failed"
        return "Completed" if succeeded >= max(job.min_available, 1) else "Failed"
    running = sum(1 for s in statuses if s in (st.RUNNING, st.BOUND))
    return "Running" if running + succeeded + failed >= job.min_available and running else "Pending"
