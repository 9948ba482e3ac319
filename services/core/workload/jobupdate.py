"""What a live job's object may become: the changes Volcano accepts after admission, judged
against the spec the log admitted.

Volcano's job webhook lets an update change only `spec.minAvailable`, `spec.tasks[*].replicas`
and `spec.priorityClassName` (volcano.md §1.3, validating webhook); anything else is refused
with the field and that rule. A PodGroup made by kubectl has no such webhook: its minMember,
minTaskMember, minResources and priorityClassName change freely, and pods naming it after it was
admitted are more tasks of the same job (a deleted one leaves it). Its queue does not move, and
a member pod's spec is immutable as any pod's (Kubernetes allows its labels and annotations to
change, which the binder does: those are not a change of the task).

Pure: two specs in, the spec to record (or the refusals) out. Defaults are recomputed from the
edited object, as on creation: Tessera does not write the webhook's defaults back to the object,
so an edit of `replicas` alone also moves a defaulted `minAvailable`.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from contracts.workloads import JobSpec, TaskSpec

#: the object a job was admitted from (its uid): a status write or relist of the same object
#: is not a new submission, a Job re-created under the name is
OBJECT_UID = "tessera.io/object-uid"

#: Volcano's job webhook, in its own words (`validateJobUpdate`)
#: a Job's maxRetry when it sets none, or 0 (Volcano's `DefaultMaxRetry`)
DEFAULT_MAX_RETRY = 3
JOB_RULE = ("Forbidden: job updates may not change fields other than `minAvailable`, "
            "`tasks[*].replicas` and `priorityClassName` under spec")  # fmt: skip
POD_RULE = "Forbidden: pod updates may not change fields other than labels and annotations"
RECREATED = "a live job of this name exists with a different spec (delete it first)"

#: JobSpec fields an update may carry (the allowed edits, what they imply, and metadata)
_JOB_FREE = ("min_available", "priority", "priority_class", "min_resources", "annotations",
             "arrive_at", "phase", "tasks")  # fmt: skip
#: where a JobSpec / TaskSpec field comes from in the object, for the refusal's path
_JOB_PATHS = {"queue": "spec.queue", "max_retry": "spec.maxRetry", "policies": "spec.policies",
              "min_success": "spec.minSuccess", "kind": "kind"}  # fmt: skip
_TASK_PATHS = {"name": "name", "min_available": "minAvailable", "policies": "policies"}
#: what a pod takes from its PriorityClass (the API server's Priority admission)
_CLASS_FIELDS = ("priority", "priority_class", "preemption_policy")
_POD_FREE = ("annotations", "labels", "min_available")  # minAvailable is the PodGroup's minTaskMember


@dataclass(frozen=True, slots=True)
class JobChange:
    """`spec` to record with `what` changed in words; `refusals` when the edit is refused; both
    empty when the object says what the log already holds."""

    spec: JobSpec | None = None
    what: str = ""
    refusals: tuple[str, ...] = ()


def judge_update(old: JobSpec, new: JobSpec) -> JobChange:
    """The live job `old` as the edited object `new` describes it, if Volcano allows the edit."""
    if old == new:
        return JobChange()
    if old.kind != new.kind or old.kind not in ("Job", "PodGroup") or (
        old.annotations.get(OBJECT_UID, "") != new.annotations.get(OBJECT_UID, "")
    ):  # a plain pod is immutable; another object under the name is a new submission
        return JobChange(refusals=(f"metadata.name: {RECREATED}",))
    if old.kind == "Job":
        spec, refusals = _job(old, new)
    else:
        spec, refusals = _podgroup(old, new)
    if refusals:
        return JobChange(refusals=refusals)
    if spec == old:
        return JobChange()
    return JobChange(spec=spec, what=describe(old, spec))


def _differing(a: msgspec.Struct, b: msgspec.Struct, skip: tuple[str, ...]) -> list[str]:
    return [f for f in a.__struct_fields__ if f not in skip and getattr(a, f) != getattr(b, f)]


def _job(old: JobSpec, new: JobSpec) -> tuple[JobSpec, tuple[str, ...]]:
    if old.max_retry == 0 and new.max_retry == DEFAULT_MAX_RETRY:
        # admitted before an explicit `maxRetry: 0` took Volcano's default: the same object,
        # judged again after an upgrade, is not an edit of a field no edit may change (its job
        # takes the default from now on)
        old = msgspec.structs.replace(old, max_retry=DEFAULT_MAX_RETRY)
    refusals = [f"{_JOB_PATHS.get(f, f'spec.{f}')}: {JOB_RULE}" for f in _differing(old, new, _JOB_FREE)]
    if [t.name for t in old.tasks] != [t.name for t in new.tasks]:
        refusals.append(f"spec.tasks: {JOB_RULE} (tasks cannot be added, removed or renamed)")
        return new, tuple(refusals)
    for i, (ot, nt) in enumerate(zip(old.tasks, new.tasks, strict=True)):
        # a task minAvailable left to its default (= replicas) follows the replicas
        defaulted = ot.min_available in (None, ot.replicas) and nt.min_available in (None, nt.replicas)
        # init_devices: derived from the template's init containers (admitted before it was kept,
        # a live job judged again after an upgrade is the same object, not a forbidden edit)
        skip = ("replicas", "min_available", "init_devices") if defaulted else ("replicas", "init_devices")
        if _follows_job_class(ot, old) and _follows_job_class(nt, new):
            skip = (*skip, *_CLASS_FIELDS)
        for f in _differing(ot, nt, skip):
            refusals.append(f"spec.tasks[{i}].{_TASK_PATHS.get(f, 'template')}: {JOB_RULE}")
    return new, tuple(dict.fromkeys(refusals))


def _follows_job_class(task: TaskSpec, job: JobSpec) -> bool:
    """Whether the task's class is the Job's, written into its pods (Volcano `createJobPod`)
    because the template names none: the Job's `priorityClassName` is an edit the webhook allows,
    and the task's class follows it. An empty one is a job admitted before its tasks took the
    Job's class, judged again after an upgrade: not an edit of its template, so its tasks are
    given the class its pods carry (a `JobUpdated` saying so)."""
    return task.priority_class in ("", job.priority_class)


def _podgroup(old: JobSpec, new: JobSpec) -> tuple[JobSpec, tuple[str, ...]]:
    refusals = [f"spec.queue: Forbidden: a PodGroup cannot move to another queue "
                f"(from {old.queue!r})"] if old.queue != new.queue else []  # fmt: skip
    before = {_pod(t): t for t in old.tasks}
    tasks: list[TaskSpec] = []
    for t in new.tasks:
        had = before.get(_pod(t))
        if had is None:
            tasks.append(t)  # a pod that named the group after it was admitted: one more task
            continue
        if _differing(had, t, _POD_FREE):
            refusals.append(f"pod {_pod(t)}: spec: {POD_RULE}")
        tasks.append(msgspec.structs.replace(had, min_available=t.min_available))
    spec = msgspec.structs.replace(new, tasks=tuple(tasks), phase=old.phase)
    return spec, tuple(refusals)


def _pod(task: TaskSpec) -> str:
    return task.pod_names[0] if task.pod_names else task.name


def describe(old: JobSpec, new: JobSpec) -> str:
    """What changed, in words, for the event's reason and `tessera events`."""
    parts: list[str] = []
    if old.kind == "Job":
        for ot, nt in zip(old.tasks, new.tasks, strict=False):
            if ot.replicas != nt.replicas:
                parts.append(f"tasks[{nt.name}].replicas {ot.replicas} → {nt.replicas}")
            if ot.priority_class != nt.priority_class and old.priority_class == new.priority_class:
                # admitted before its tasks took the Job's class: its pods carry it (createJobPod)
                parts.append(f"tasks[{nt.name}] take the Job's priorityClassName {nt.priority_class}")
    else:
        was = {_pod(t) for t in old.tasks}
        now = {_pod(t) for t in new.tasks}
        if now - was:
            parts.append("pods added: " + ", ".join(sorted(now - was)))
        if was - now:
            parts.append("pods removed: " + ", ".join(sorted(was - now)))
    if old.min_available != new.min_available:
        parts.append(f"minAvailable {old.min_available} → {new.min_available}")
    if old.priority_class != new.priority_class:
        parts.append(f"priorityClassName {old.priority_class or '(none)'} → {new.priority_class or '(none)'}")
    return "; ".join(parts) or "metadata changed"
