"""The labels Volcano's job controller (Tessera's: services/kube/volcano.py) puts on every pod
it makes for a Job, beside its template's: rules that select pods by label (a
PodDisruptionBudget) see a Job's pods with them, as the API server holds them."""

from __future__ import annotations

from collections.abc import Mapping

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"


def job_task_labels(template: Mapping[str, str], job: str, namespace: str, queue: str, task: str) -> dict[str, str]:
    """The labels every pod of one task of a Job carries (the scheduler's view: its selectors
    see these; the per-pod `task-index` would make each pod a group of its own)."""
    return {**template, JOB_NAME: job, JOB_NAMESPACE: namespace, QUEUE_NAME: queue, TASK_SPEC: task}


def job_pod_labels(template: Mapping[str, str], job: str, namespace: str, queue: str, task: str,
                   index: int) -> dict[str, str]:  # fmt: skip
    return {**job_task_labels(template, job, namespace, queue, task), TASK_INDEX: str(index)}
