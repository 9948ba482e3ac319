"""Volcano's Job lifecycle rules where Tessera had them differently (helper-21's review against
Volcano's job controller): maxRetry counts runs, explicit zeros are the webhook's defaults, a
task's own minAvailable decides a finished job, and a task all of whose pods succeeded raises
`TaskCompleted` for the policies."""

from __future__ import annotations

import pytest

from contracts.workloads import JobSpec, TaskSpec
from services.core.scheduling import lifecycle
from services.core.scheduling import snapshot as st
from services.core.workload.admission import DEFAULT_MAX_RETRY, admit


def vcjob(spec: dict) -> dict:
    tasks = [{"name": name, "replicas": n, **extra,
              "template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                                                    "resources": {"requests": {"cpu": "1"}}}]}}}
             for name, n, extra in spec.pop("tasks")]  # fmt: skip
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"}, "spec": {**spec, "tasks": tasks}}  # fmt: skip


@pytest.mark.parametrize(("max_retry", "runs"), [(1, 1), (2, 2), (3, 3)])
def test_max_retry_is_the_number_of_runs(max_retry: int, runs: int) -> None:
    """`state/running.go` counts the restart, `state/restarting.go` fails the job once the count
    reaches maxRetry: the run whose failure is the maxRetry-th is the last."""
    job = JobSpec(namespace="ns", name="j", kind="Job", max_retry=max_retry, tasks=(TaskSpec(name="w"),),
                  policies=(("PodFailed", "RestartJob"),))  # fmt: skip
    ran, retries = 1, 0
    while lifecycle.on_pod_failed(job, job.tasks[0], 1, retries).phase == "Restarting":
        ran, retries = ran + 1, retries + 1
    assert ran == runs


def test_zero_max_retry_and_min_available_are_the_webhooks_defaults() -> None:
    """Volcano's mutating webhook takes 0 for unset: maxRetry 3, minAvailable the tasks' sum."""
    (job,) = admit([vcjob({"maxRetry": 0, "minAvailable": 0,
                           "tasks": [("ps", 2, {"minAvailable": 1}), ("w", 3, {})]})]).jobs  # fmt: skip
    assert (job.max_retry, job.min_available) == (DEFAULT_MAX_RETRY, 4)
    (kept,) = admit([vcjob({"maxRetry": 5, "minAvailable": 2, "tasks": [("w", 3, {})]})]).jobs
    assert (kept.max_retry, kept.min_available) == (5, 2)


def two_tasks(min_available: int) -> JobSpec:
    return JobSpec(namespace="ns", name="j", kind="Job", min_available=min_available,
                   tasks=(TaskSpec(name="ps", replicas=2, min_available=2),
                          TaskSpec(name="w", replicas=4, min_available=2)))  # fmt: skip


def test_a_task_short_of_its_min_available_fails_the_finished_job() -> None:
    roles = ["ps", "ps", "w", "w", "w", "w"]
    statuses = [st.FAILED, st.FAILED] + [st.SUCCEEDED] * 4
    assert lifecycle.job_phase(two_tasks(4), statuses, roles) == "Failed"
    # a job asking less than its tasks' sum is judged on its own count (Volcano checks tasks only then)
    assert lifecycle.job_phase(two_tasks(3), statuses, roles) == "Completed"
    assert lifecycle.job_phase(two_tasks(4), [st.SUCCEEDED] * 6, roles) == "Completed"


def test_task_completed_is_every_pod_of_the_task_succeeded_and_matches_star() -> None:
    job = JobSpec(namespace="ns", name="j", kind="Job", min_available=3, policies=(("*", "TerminateJob"),),
                  tasks=(TaskSpec(name="m", replicas=1, policies=(("TaskCompleted", "CompleteJob"),)),
                         TaskSpec(name="w", replicas=2)))  # fmt: skip
    m, w = job.tasks
    snaps = [st.TaskSnap("j-m-0", "m", 0, m, st.SUCCEEDED), st.TaskSnap("j-w-0", "w", 0, w, st.SUCCEEDED),
             st.TaskSnap("j-w-1", "w", 1, w, st.RUNNING)]  # fmt: skip
    assert lifecycle.task_completed(job, m, snaps)
    assert not lifecycle.task_completed(job, w, snaps)
    assert lifecycle.on_pod_failed(job, m, 0, 0, "TaskCompleted").action == "CompleteJob"  # the task's first
    assert lifecycle.on_pod_failed(job, w, 0, 0, "TaskCompleted").action == "TerminateJob"  # then the job's `*`


def test_a_policy_on_an_event_tessera_never_raises_is_accepted_with_a_warning() -> None:
    """Accepted as Volcano's webhook accepts it, but its user is told it will never run — and
    that a `timeout` is not waited for — instead of a policy that silently does nothing."""
    body = vcjob({"tasks": [("w", 2, {})], "policies": [
        {"event": "PodPending", "action": "RestartJob", "timeout": "5m"},
        {"event": "TaskCompleted", "action": "CompleteJob"},
        {"event": "PodFailed", "action": "RestartJob", "timeout": "1m"}]})  # fmt: skip
    got = admit([body])
    assert len(got.jobs) == 1
    said = {(w.path, w.rule.split(":")[0]) for w in got.warnings}
    assert ("spec.policies[0].event", "Tessera does not raise PodPending") in said, said
    assert ("spec.policies[2].timeout", "not acted on") in said, said
    assert not any(w.path.startswith("spec.policies[1]") for w in got.warnings), got.warnings


@pytest.mark.parametrize(("policies", "rule"), [
    ([{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}],
     "if there's * here, no other policy should be here"),
    ([{"events": ["*", "PodEvicted"], "action": "AbortJob"}], "if there's * here, no other policy should be here"),
    ([{"event": "PodFailed", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
     "duplicate event PodFailed across different policy"),
    ([{"exitCode": 3, "action": "RestartJob"}, {"exitCode": 3, "action": "AbortJob"}], "duplicate exitCode 3"),
])  # fmt: skip
def test_policies_are_checked_across_the_list_as_volcanos_webhook_does(policies: list, rule: str) -> None:
    """`*` beside another event made the first-listed win — and `*` answers TaskCompleted, so
    such a job aborted when any task completed; Volcano's webhook refuses these lists."""
    got = admit([vcjob({"tasks": [("w", 2, {})], "policies": policies})])
    assert not got.jobs
    assert any(rule in r.rule for r in got.rejections), got.rejections
    task_level = vcjob({"tasks": [("w", 2, {"policies": policies})]})
    assert not admit([task_level]).jobs


def test_a_live_job_admitted_with_max_retry_0_is_no_forbidden_edit_after_the_upgrade() -> None:
    """The log holds maxRetry 0 from before it took the default; the same object judged again
    (every live Job is, when the edge restarts) is taken with the default, not refused as an
    edit of a field no edit may change — which also refused every later edit of the job."""
    from msgspec.structs import replace

    from services.core.workload.jobupdate import judge_update

    (new,) = admit([vcjob({"maxRetry": 0, "tasks": [("w", 2, {})]})]).jobs
    old = replace(new, max_retry=0)  # as the log recorded it before
    change = judge_update(old, new)
    assert not change.refusals, change.refusals
    assert change.spec is not None and change.spec.max_retry == DEFAULT_MAX_RETRY
    (scaled,) = admit([vcjob({"maxRetry": 0, "tasks": [("w", 3, {})]})]).jobs
    assert not judge_update(old, scaled).refusals  # a later edit is judged as any other


def snaps(job: JobSpec, statuses: list[str]) -> dict[str, st.TaskSnap]:
    pods = [(pod, role, index, spec) for pod, role, index, spec in st.task_names(job)]
    return {pod: st.TaskSnap(pod, role, index, spec, status)
            for (pod, role, index, spec), status in zip(pods, statuses, strict=True)}  # fmt: skip


def test_restart_targets_by_action() -> None:
    """The queue service and the simulator stop the same pods for a restart policy."""
    job = two_tasks(4)
    tasks = snaps(job, [st.RUNNING] * 6)
    ps, w = job.tasks
    assert lifecycle.restart_targets("RestartPod", "j-w-1", w, tasks) == ["j-w-1"]
    assert lifecycle.restart_targets("RestartTask", "j-ps-0", ps, tasks) == ["j-ps-0", "j-ps-1"]
    assert lifecycle.restart_targets("RestartJob", "j-ps-0", ps, tasks) == list(tasks)
    # a pod whose task the spec no longer names is still its own restart's target
    assert lifecycle.restart_targets("RestartTask", "j-w-3", None, tasks) == ["j-w-3"]


def test_sync_job_running_again_and_ending() -> None:
    job = two_tasks(4)
    back = lifecycle.sync_job(job, "Running", "Restarting", snaps(job, [st.RUNNING] * 6).values())
    assert (back.running, back.reason, back.terminal) == (True, lifecycle.RESTART_OVER, "")
    # still stopping the round's pods: not back yet
    assert not lifecycle.sync_job(job, "Running", "Restarting", snaps(job, [st.RUNNING] * 6).values(), True).running
    placed = lifecycle.sync_job(job, "Inqueue", "Inqueue", snaps(job, [st.BOUND] * 4 + [st.PENDING] * 2).values())
    assert (placed.running, placed.reason) == (True, "")
    done = lifecycle.sync_job(job, "Running", "Running", snaps(job, [st.SUCCEEDED] * 6).values())
    assert (done.running, done.terminal, done.end) == (False, "Completed", "all pods finished")
