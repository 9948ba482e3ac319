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
