"""What a live job's object may become: the changes Volcano accepts after admission, judged
against the spec the log admitted.

Volcano's job webhook lets an update change only `spec.minAvailable`, `spec.tasks[*].replicas`
(and a task's `minAvailable` with them) and `spec.priorityClassName` (volcano.md §1.3,
validating webhook); anything else is refused with the field and that rule. A PodGroup made by kubectl has no such webhook: its minMember,
minTaskMember, minResources, priorityClassName and queue change freely, and pods naming it
after it was admitted are more tasks of the same job (a deleted one leaves it). A queue edit
moves the job, placed or not, as Volcano's scheduler cache moves it (`JobInfo.SetPodGroup`
re-reads `spec.queue` at every PodGroup update; no webhook judges an update): its pods count in
the new queue from then on. A member pod's spec is immutable as any pod's (Kubernetes allows its
labels and annotations to change, which the binder does: those are not a change of the task).

Pure: two specs in, the spec to record (or the refusals) out. Volcano's mutating webhook runs on
create only and writes its defaults into the stored Job (`minAvailable`: the tasks' sum; a task's
`minAvailable`: its replicas), so a manifest that leaves them unset and is applied again with
other replicas keeps the values the job was created with (`Unset` says which the edited object
leaves unset): scaled up, the gang still needs what it needed; scaled below them, the edit is
refused in the update webhook's words, and the user sets `minAvailable` to scale down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from contracts.workloads import JobSpec, TaskSpec
from services.core.scheduling.resources import requested

#: the object a job was admitted from (its uid): a status write or relist of the same object
#: is not a new submission, a Job re-created under the name is
OBJECT_UID = "tessera.io/object-uid"
#: the task annotation the pod source keeps a pod's Kubernetes uid in (services/kube/pods.py;
#: `tessera get` reads it too, services/cli/kubeobjects.py): the pod a plain pod's job is
POD_UID = "tessera.io/pod-uid"

#: Volcano's job webhook, in its own words (`validateJobUpdate`)
#: a Job's maxRetry when it sets none, or 0 (Volcano's `DefaultMaxRetry`)
DEFAULT_MAX_RETRY = 3
JOB_RULE = ("Forbidden: job updates may not change fields other than `minAvailable`, "
            "`tasks[*].replicas` and `priorityClassName` under spec")  # fmt: skip
POD_RULE = "Forbidden: pod updates may not change fields other than labels and annotations"
#: the API server's `ValidatePodUpdate` words for an edit of a pod's spec
POD_SPEC_RULE = ("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                 "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                 "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                 "set to 1 if it was previously negative)")  # fmt: skip
#: the CLI's noun for each kind of job, in the delete a finished one needs to run again
DELETE_NOUN = {"Job": "vcjob", "Pod": "pod", "PodGroup": "podgroup"}
RECREATED = "a live job of this name exists with a different spec (delete it first)"
#: `validateJobUpdate`'s words for an edit that leaves fewer pods than the gang needs
TASK_MIN_OVER = "'minAvailable' must be <= 'replicas' in task: {task}"
JOB_MIN_OVER = "job 'minAvailable' must not be greater than total replicas"

#: JobSpec fields an update may carry (the allowed edits, what they imply, and metadata)
_JOB_FREE = ("min_available", "priority", "priority_class", "min_resources", "annotations",
             "arrive_at", "phase", "tasks")  # fmt: skip
#: where a JobSpec / TaskSpec field comes from in the object, for the refusal's path
_JOB_PATHS = {"queue": "spec.queue", "max_retry": "spec.maxRetry", "policies": "spec.policies",
              "min_success": "spec.minSuccess", "kind": "kind"}  # fmt: skip
_TASK_PATHS = {"name": "name", "policies": "policies", "depends_on": "dependsOn", "depends_any": "dependsOn"}
#: a task's `dependsOn`, which the log's specs carry since they are acted on (`dependson.py`)
_DEPENDS = ("depends_on", "depends_any")
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


@dataclass(frozen=True, slots=True)
class Unset:
    """The `minAvailable` values a Job's object leaves to the mutating webhook (absent, or the
    job's 0): on an update they are the ones the stored object holds, written at its creation,
    not defaults recomputed from the edited replicas."""

    job_min: bool = False
    task_mins: frozenset[str] = frozenset()  # task names
    #: a PodGroup's queue the live group keeps: its object names none (the PodGroup webhook
    #: wrote the namespace's queue at create), or an edit names one it cannot move to
    queue: bool = False


def min_resources(min_available: int, tasks: Iterable[TaskSpec]) -> dict[str, int]:
    """Volcano's job controller: a Job's minResources are the requests of its first
    minAvailable pods, tasks ordered by priority (calcPGMinResources)."""
    out: dict[str, int] = {}
    left = min_available
    for task in sorted(tasks, key=lambda t: -t.priority):
        n = min(left, task.replicas)
        left -= n
        for res, value in requested(task):
            out[res] = out.get(res, 0) + value * n
    return out


def judge_update(old: JobSpec, new: JobSpec, unset: Unset = Unset()) -> JobChange:
    """The live job `old` as the edited object `new` describes it, if Volcano allows the edit.
    `unset`: the minAvailable values the edited object leaves unset (`new` holds their defaults
    recomputed from it): the live job's are kept."""
    if old == new:
        return JobChange()
    if old.kind != new.kind or old.kind not in ("Job", "PodGroup") or (
        old.annotations.get(OBJECT_UID, "") != new.annotations.get(OBJECT_UID, "")
    ):  # a plain pod is immutable; another object under the name is a new submission
        return JobChange(refusals=(f"metadata.name: {RECREATED}",))
    if old.kind == "Job":
        spec, refusals = _job(old, _kept_defaults(old, new, unset))
    else:
        spec, refusals = _podgroup(old, msgspec.structs.replace(new, queue=old.queue) if unset.queue else new)
    if refusals:
        return JobChange(refusals=refusals)
    if spec == old:
        return JobChange()
    return JobChange(spec=spec, what=describe(old, spec))


def _differing(a: msgspec.Struct, b: msgspec.Struct, skip: tuple[str, ...]) -> list[str]:
    return [f for f in a.__struct_fields__ if f not in skip and getattr(a, f) != getattr(b, f)]


def _kept_defaults(old: JobSpec, new: JobSpec, unset: Unset) -> JobSpec:
    """`new` with the minAvailable values its object leaves unset taken from `old` (what the
    mutating webhook wrote into the stored Job when it was created), its minResources with them."""
    if not unset.job_min and not unset.task_mins:
        return new
    had = {t.name: t for t in old.tasks}
    tasks = tuple(
        msgspec.structs.replace(t, min_available=had[t.name].min_available)
        if t.name in unset.task_mins and t.name in had else t
        for t in new.tasks
    )  # fmt: skip
    min_available = old.min_available if unset.job_min else new.min_available
    if tasks == new.tasks and min_available == new.min_available:
        return new
    return msgspec.structs.replace(new, tasks=tasks, min_available=min_available,
                                   min_resources=min_resources(min_available, tasks))  # fmt: skip


def _scaled_below_min(new: JobSpec) -> list[str]:
    """`validateJobUpdate`: each task keeps at least its minAvailable replicas, the job at least
    its minAvailable pods (a kept minAvailable above the new replicas would leave a gang that
    can never be complete)."""
    out = [f"spec.tasks[{i}].minAvailable: " + TASK_MIN_OVER.format(task=t.name)
           for i, t in enumerate(new.tasks)
           if t.min_available is not None and t.min_available > t.replicas]  # fmt: skip
    if new.min_available > sum(t.replicas for t in new.tasks):
        out.append(f"spec.minAvailable: {JOB_MIN_OVER}")
    return out


def _job(old: JobSpec, new: JobSpec) -> tuple[JobSpec, tuple[str, ...]]:
    if old.max_retry == 0 and new.max_retry == DEFAULT_MAX_RETRY:
        # admitted before an explicit `maxRetry: 0` took Volcano's default: the same object,
        # judged again after an upgrade, is not an edit of a field no edit may change (its job
        # takes the default from now on)
        old = msgspec.structs.replace(old, max_retry=DEFAULT_MAX_RETRY)
    refusals = _scaled_below_min(new)
    refusals += [f"{_JOB_PATHS.get(f, f'spec.{f}')}: {JOB_RULE}" for f in _differing(old, new, _JOB_FREE)]
    if [t.name for t in old.tasks] != [t.name for t in new.tasks]:
        refusals.append(f"spec.tasks: {JOB_RULE} (tasks cannot be added, removed or renamed)")
        return new, tuple(refusals)
    for i, (ot, nt) in enumerate(zip(old.tasks, new.tasks, strict=True)):
        # a task's minAvailable is an edit the webhook allows as its replicas (`validateJobUpdate`
        # sets both back before comparing); init_devices and preemptable: derived from the
        # template (its init containers; its `volcano.sh/preemptable`, read as Go's ParseBool
        # since), whose own fields are compared: a live job judged again after an upgrade is the
        # same object, not a forbidden edit
        skip: tuple[str, ...] = ("replicas", "min_available", "init_devices", "preemptable")
        if _follows_job_class(ot, old) and _follows_job_class(nt, new):
            skip = (*skip, *_CLASS_FIELDS)
        if not ot.depends_on:
            # admitted before specs carried dependsOn, judged again after an upgrade: the same
            # object, whose spec now says what its controller always held its pods for
            skip = (*skip, *_DEPENDS)
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
    refusals: list[str] = []
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
            if ot.min_available != nt.min_available and (ot.min_available, nt.min_available) != (ot.replicas, nt.replicas):
                parts.append(f"tasks[{nt.name}].minAvailable {ot.min_available} → {nt.min_available}")
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
    if old.queue != new.queue:
        parts.append(f"queue {old.queue} → {new.queue}")
    if old.min_available != new.min_available:
        parts.append(f"minAvailable {old.min_available} → {new.min_available}")
    if old.priority_class != new.priority_class:
        parts.append(f"priorityClassName {old.priority_class or '(none)'} → {new.priority_class or '(none)'}")
    elif old.priority != new.priority:
        parts.append(f"priority {old.priority} → {new.priority} (PriorityClass {new.priority_class or '(default)'})")
    return "; ".join(parts) or "metadata changed"


def same_object(old: JobSpec, new: JobSpec) -> bool:
    """Whether `new` is read from the object the log admitted as `old`: the same object uid (a
    Volcano Job's, a PodGroup's) and the same pods' uids (a plain pod's task), or none at all
    (`tessera apply` names no uid). A Job deleted and made again on a cluster while admission
    was away has a new uid: a new object, submitted anew."""
    return old.annotations.get(OBJECT_UID, "") == new.annotations.get(OBJECT_UID, "") and (
        _pod_uids(old) == _pod_uids(new)
    )


def _pod_uids(spec: JobSpec) -> set[str]:
    return {t.annotations.get(POD_UID, "") for t in spec.tasks} - {""}


def finished_edit(old: JobSpec, new: JobSpec, unset: Unset, phase: str) -> tuple[str, ...]:
    """Why the object `new` is refused for a job that ended in `phase`; () when it is the object
    the log holds (`unchanged`, and nothing runs). The object still exists, as on a cluster (a
    Volcano Job in a final state, a Succeeded or Failed Pod stays until deleted), so applying
    it again is an update, never a new run: an edit the webhook or the API server refuses
    is refused in their words; one they allow (a Job's replicas, a pod's labels) changes
    nothing here either — Volcano's Completed, Terminated and Failed states take no action, and
    a finished pod never starts again — so it is refused saying how to run the job again
    rather than said `configured` for work that never happens."""
    if old == new:
        return ()
    how = (f"metadata.name: {_finished(old, phase)}: a finished {old.kind} does not run again and keeps no "
           f"edit; {_again(old, phase)}")
    if old.kind != new.kind:  # (Tessera holds one job per name, whatever its kind)
        return (how,)
    if old.kind == "Pod":
        return (how,) if _metadata_only(old) == _metadata_only(new) else (POD_SPEC_RULE, how)
    change = judge_update(old, new, unset)
    if change.refusals:
        return (*change.refusals, how)
    return () if change.spec is None else (how,)


def finished_note(old: JobSpec, phase: str) -> str:
    """The warning beside `unchanged` for a finished job applied again: what a user re-applying
    a directory of manifests expected (a second run) does not happen, and how to get it."""
    return f"{_finished(old, phase)}: applying it again does not run it; {_again(old, phase)}"


def _finished(job: JobSpec, phase: str) -> str:
    return f"{job.kind} {job.namespace}/{job.name} is {pod_phase(phase) if job.kind == 'Pod' else phase}"


def _again(job: JobSpec, phase: str) -> str:
    """How to run a finished job again: resume a suspended one, else delete it and apply."""
    if phase == "Aborted" and job.kind != "Pod":
        return f"`tessera job resume {job.name} -n {job.namespace}` runs it again"
    noun = DELETE_NOUN.get(job.kind, "vcjob")
    return f"to run it again, `tessera delete {noun} {job.name} -n {job.namespace}`, then apply it"


def pod_phase(phase: str) -> str:
    """A plain pod's phase for a job phase: Succeeded when it completed, else Failed."""
    return "Succeeded" if phase == "Completed" else "Failed"


def _metadata_only(spec: JobSpec) -> JobSpec:
    """A pod's spec without what its metadata says (the labels and annotations an update may
    change, and what Tessera reads from them): two that differ only there differ in metadata."""
    tasks = tuple(msgspec.structs.replace(t, annotations={}, labels={}, duration=None, exit_code=0,
                                          preemptable=True) for t in spec.tasks)  # fmt: skip
    return msgspec.structs.replace(spec, annotations={}, arrive_at=0.0, tasks=tasks)
