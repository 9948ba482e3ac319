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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import snapshot as st

SCHEDULED = st.SCHEDULED
FINISHED = frozenset({st.SUCCEEDED, st.FAILED})
TERMINAL_JOB_PHASES = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
#: the phases a PodGroup shows (Volcano's `PodGroupPhase`)
PODGROUP_PHASES = frozenset({"Pending", "Inqueue", "Running", "Unknown", "Completed"})


#: a Volcano Job's phases in which its PodGroup is gone: each is entered (and held) by the job
#: controller's `killJob`, which deletes the group every time it runs — Running and Pending go to
#: Aborting, Terminating or Completing through it, Restarting kills again until the job is
#: Pending (`syncJob` makes the group again then), and a finished state kills what is left
KILLED_JOB_PHASES = frozenset({*TERMINAL_JOB_PHASES, *st.ENDING_PHASES, "Restarting"})


#: the tasks Volcano's gang counts ready (`ReadyTaskNum`: allocated statuses and Succeeded)
READY = frozenset({st.ALLOCATED, st.BINDING, st.BOUND, st.RUNNING, st.SUCCEEDED})


def gang_broken(min_member: int, statuses: Iterable[str]) -> bool:
    """Some pod runs, yet fewer than minMember are ready: reclaim or preemption cut the gang
    after it was placed, or a pod of it failed. Volcano's gang marks such a job Unschedulable at
    session close and `jobStatus` then shows its PodGroup `Unknown` (running tasks and the
    condition of this session) — what `vcctl queue` and `volcano_queue_pod_group_unknown_count`
    count, and a platform team alerts on."""
    seen = list(statuses)
    return any(s == st.RUNNING for s in seen) and sum(s in READY for s in seen) < min_member


def podgroup_shown(phase: str, kind: str, min_member: int, statuses: Iterable[str]) -> str:
    """`podgroup_phase_of`, with a Running group whose gang is broken (`gang_broken`) Unknown."""
    shown = podgroup_phase_of(phase, kind)
    return "Unknown" if phase == "Running" and gang_broken(min_member, statuses) else shown


def podgroup_phase_of(phase: str, kind: str) -> str:
    """The phase a job's PodGroup shows on a cluster, given the job's phase in the log and its
    kind; "" while it has none. Volcano's job controller deletes a Job's PodGroup whenever it
    kills the job (`killJob`: a restart, an end, its finished state: `KILLED_JOB_PHASES`) and
    makes it again, Pending, once a restart is over; so Volcano's queue controller, which counts
    a queue's PodGroups by this phase, counts none for a Job being ended or restarted. Only a
    Volcano Job's group is the job controller's: a plain pod's or a PodGroup's own group stays,
    Running while its pods are stopped and Completed once they ended; a refused one never was."""
    if kind == "Job" and phase in KILLED_JOB_PHASES:
        return ""
    if phase in TERMINAL_JOB_PHASES:
        return "Completed"
    if phase in st.ENDING_PHASES:
        return "Running"  # its pods are still being stopped
    if phase == "Restarting":
        return "Pending"
    return phase if phase in PODGROUP_PHASES else ""


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


#: how a queue closed (or reopened) because of its parent says so: Volcano's queue controller
#: marks such a child `volcano.sh/closed-by-parent` and reopens only those with the parent
CLOSED_WITH_PARENT = "closed with its parent queue"
OPENED_WITH_PARENT = "opened with its parent queue"


def parent_of(queue: str, parent: str) -> str:
    """A queue's parent in the tree: `root` when it names none (Volcano's controller sets it)."""
    return "" if queue == "root" else (parent or "root")


def queue_tree(states: Mapping[str, str], parents: Mapping[str, str], by_parent: Iterable[str],
               podgroups: Mapping[str, int]) -> list[tuple[str, str, str]]:  # fmt: skip
    """What the queue tree owes, as (queue, new state, why), parents before children (Volcano's
    `syncHierarchicalQueue`, `closeHierarchicalQueue`, `openHierarchicalQueue`): an Open queue
    whose parent is Closing or Closed closes too (Closing while it holds PodGroups), said to be
    closed with its parent; one closed so whose parent is Open again opens. `states` is the
    tree as it will be (a command's own change included); a queue a user closed stays so."""
    now, marked, out = dict(states), set(by_parent), []
    changed = True
    while changed:
        changed = False
        for q in sorted(now):
            parent = parent_of(q, parents.get(q, ""))
            up = now.get(parent, "Open")
            if now[q] == "Open" and up in ("Closing", "Closed"):
                now[q] = close_queue("Open", podgroups.get(q, 0))
                marked.add(q)
                out.append((q, now[q], f"{CLOSED_WITH_PARENT} {parent}"))
                changed = True
            elif now[q] != "Open" and q in marked and up == "Open":
                now[q] = "Open"
                marked.discard(q)
                out.append((q, "Open", f"{OPENED_WITH_PARENT} {parent}"))
                changed = True
    return out


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
class JobSync:
    """What SyncJob makes of a live job's pods: the `Running` it now shows (its PodGroup
    reached Running, or a restarted gang runs again: `reason` RESTART_OVER), and the end it
    reached (`terminal` Completed/Failed, with `end`'s words). One function for the queue
    service and the simulator: each carried its own copy, and the copies drifted."""

    running: bool = False
    reason: str = ""
    terminal: str = ""
    end: str = ""


def sync_job(job: JobSpec, phase: str, shown: str, tasks: Iterable[st.TaskSnap], restarting: bool = False) -> JobSync:
    """`phase`: the projection's phase of the job; `shown`: the phase its last JobPhaseChanged
    said; `restarting`: a restart round still stopping its pods (its gang is not back yet)."""
    snaps = list(tasks)
    statuses = [t.status for t in snaps]
    pg = pod_group_phase(job.min_available, statuses, phase)
    # a PodGroup Completed is every pod finished, which ends the job: that end says it, with its
    # reason (said twice, it was one more message per job end that every service read)
    running, reason = pg != phase and pg == "Running", ""
    if not running and not restarting and restarted_gang_runs(shown, statuses, job.min_available):
        running, reason = True, RESTART_OVER
    terminal = job_phase(job, statuses, [t.role for t in snaps])
    if terminal in ("Completed", "Failed"):
        return JobSync(running, reason, terminal, end_reason(job, statuses))
    return JobSync(running, reason)


def restart_targets(action: str, pod: str, task: TaskSpec | None, tasks: Mapping[str, st.TaskSnap]) -> list[str]:
    """The pods a restart policy's `action` on `pod` (of `task`) stops and runs again:
    RestartPod that pod, RestartTask its task's pods, RestartJob every pod."""
    if action == "RestartPod":
        return [pod]
    if action == "RestartTask":
        return [p for p, t in tasks.items() if p == pod or (task is not None and t.role == task.name)]
    return list(tasks)


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
    when this restart is its maxRetry-th — Volcano counts the restart first (`state/running.go`:
    retryCount+1, Restarting) and then fails the job once the count reaches maxRetry
    (`state/restarting.go`), so `maxRetry: 3` is three runs in all, `maxRetry: 1` one. A policy
    and a `RestartJob` Command follow the same rule."""
    return "Failed" if retry_count + 1 >= job.max_retry else "Restarting"


#: the log's job phases as a Volcano Job shows them: Inqueue is the PodGroup's business,
#: Failing is Tessera's own (maxRetry spent, pods still stopping: Volcano's Job says Failed)
VOLCANO_JOB_PHASES = {"Inqueue": "Pending", "Unknown": "Running", "Failing": "Failed"}


def volcano_job_phase(phase: str, reason: str = "") -> str:
    """What a Volcano Job's status.state.phase says for the log's `phase` (ended or moved for
    `reason`). Completing is Volcano's only for a CompleteJob action; a job whose minSuccess
    was reached (or whose pods all finished) while some still stop is Completed there — its
    running state sets Completed and the completed state kills what is left."""
    if phase == "Completing" and not reason.startswith("CompleteJob"):
        return "Completed"
    return VOLCANO_JOB_PHASES.get(phase, phase or "Pending")


def counts_a_retry(phase: str, reason: str, before: str = "") -> bool:
    """Whether a job's move to `phase` (from `before`) is one more of Volcano's
    `status.retryCount`: a restart, or the restart that failed the job — Volcano counts it
    before its Restarting state finds maxRetry reached, so a job failed by `maxRetry: 3` shows
    3, not the 2 restarts it ran. The `Failed` that ends a `Failing` is the same restart; a
    resume is a restart too (Volcano's ResumeJob: retryCount+1)."""
    if phase == "Restarting":
        return True
    cause = reason.split(" ", 1)[0].rstrip(":")
    return phase in ("Failing", "Failed") and before != "Failing" and (cause in RESTARTS or cause == "ResumeJob")


def on_pod_failed(
    job: JobSpec, task: TaskSpec | None, exit_code: int, retry_count: int, event: str = "PodFailed"
) -> PolicyDecision:
    """`event`: PodFailed, PodEvicted for a pod deleted while it held its node (Volcano's
    job controller sends PodEvicted from its pod-delete handler), or TaskCompleted for the pod
    that completed its task; exitCode policies apply to PodFailed only."""
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


def job_phase(job: JobSpec, statuses: Sequence[str], roles: Sequence[str] = ()) -> str:
    """SyncJob on a live job: terminal when every pod finished or minSuccess is reached.
    `roles`: each pod's task, beside `statuses` — a Volcano Job whose minAvailable covers its
    tasks' own fails when a task ended with fewer Succeeded pods than its minAvailable
    (`state/running.go`), however many pods of the other tasks succeeded."""
    succeeded = sum(1 for s in statuses if s == st.SUCCEEDED)
    failed = sum(1 for s in statuses if s == st.FAILED)
    if job.min_success is not None and succeeded >= job.min_success:
        return "Completed"
    if statuses and succeeded + failed == len(statuses):
        if roles and job.kind == "Job" and task_short(job, statuses, roles):
            return "Failed"
        if job.min_success is not None and succeeded < job.min_success:
            return "Failed"
        return "Completed" if succeeded >= max(job.min_available, 1) else "Failed"
    running = sum(1 for s in statuses if s in (st.RUNNING, st.BOUND))
    return "Running" if running + succeeded + failed >= job.min_available and running else "Pending"


def task_short(job: JobSpec, statuses: Sequence[str], roles: Sequence[str]) -> bool:
    """Whether a task of `job` ended with fewer Succeeded pods than its own minAvailable, when
    the job's minAvailable is at least the sum of its tasks' (Volcano checks the tasks only
    then: a job asking less than its tasks do is judged on its own count)."""
    mins = {t.name: t.min_available for t in job.tasks if t.min_available is not None}
    if not mins or job.min_available < sum(mins.values()):
        return False
    done = dict.fromkeys(mins, 0)
    for status, role in zip(statuses, roles, strict=True):
        if status == st.SUCCEEDED and role in done:
            done[role] += 1
    return any(done[name] < least for name, least in mins.items())


def task_completed(job: JobSpec, task: TaskSpec | None, tasks: Iterable[st.TaskSnap]) -> bool:
    """Whether every pod of `task` (of the Volcano Job `job`, whose `tasks` these are)
    Succeeded: what raises Volcano's `TaskCompleted` (its job cache counts the task's Succeeded
    pods against its replicas)."""
    if task is None or job.kind != "Job" or task.replicas <= 0:
        return False
    return sum(1 for t in tasks if t.role == task.name and t.status == st.SUCCEEDED) >= task.replicas


def end_reason(job: JobSpec, statuses: Sequence[str]) -> str:
    """Why `job_phase` ended the job: every pod finished, or minSuccess reached while some run
    (said "all pods finished" before, beside the evictions of its running pods)."""
    if job.min_success is not None and any(s not in (st.SUCCEEDED, st.FAILED) for s in statuses):
        return f"minSuccess {job.min_success} reached"
    return "all pods finished"
