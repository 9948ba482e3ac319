"""Volcano's objects as the API server holds them (volcano.md §1): where they live, what the
job controller creates for a Job (its PodGroup `<job>-<uid>` and its pods
`<job>-<task>-<index>` with Volcano's labels, annotations and owner references), and the status
each kind shows, computed from the log. Pure: objects and projections in, objects out.

Status is compared without its timestamps (`status_differs`), so a restart that recomputes the
same status writes nothing; only a real change is patched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.joblabels import (
    JOB_NAME,
    JOB_NAMESPACE,
    QUEUE_NAME,
    TASK_INDEX,
    TASK_SPEC,
    job_pod_labels,
)
from services.core.scheduling import snapshot as st
from services.core.scheduling.lifecycle import READY, TERMINAL_JOB_PHASES, volcano_job_phase
from services.core.workload.admission import ARRIVE_AT, GROUP_NAME
from services.core.workload.jobplugins import redacted
from services.core.workload.jobupdate import OBJECT_UID
from services.core.workload.jobvolumes import claims_to_make, with_job_volumes
from services.core.workload.quantity import from_units
from services.kube import jobplugins

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
SCHEDULING = "scheduling.volcano.sh/v1beta1"
BATCH = "batch.volcano.sh/v1alpha1"
BUS = "bus.volcano.sh/v1alpha1"
TOPOLOGY = "topology.volcano.sh/v1alpha1"
HYPERNODES = f"/apis/{TOPOLOGY}/hypernodes"
FLOW = "flow.volcano.sh/v1alpha1"

JOB_VERSION = "volcano.sh/job-version"
RETRY_COUNT = "volcano.sh/job-retry-count"
#: the commit a pod was bound for (the binder puts it on the binding): a pod of an earlier
#: incarnation under the same name (before a restart) is told apart from the current one
PLACEMENT = "tessera.io/placement"
#: the last log sequence the job controller had read when it made the pod: a stop the log asked
#: for at or before it (an eviction handled late by another service) is not about this pod
MADE_AFTER = "tessera.io/made-after"

SCHEDULED_REASON = "tasks in gang are ready to be scheduled"

#: Volcano's scheduler name: a Tessera that takes it stands in for Volcano (its scheduler and
#: controllers: no Volcano serves this cluster's Queues, PodGroups and Commands but Tessera);
#: one with only its own names runs beside a Volcano that stays (README "Sharing a cluster")
VOLCANO_SCHEDULER = "volcano"


def replaces_volcano(scheduler_names: Iterable[str]) -> bool:
    """Whether Tessera, with these scheduler names, is Volcano's replacement on the cluster:
    then what Volcano's controllers serve (every PodGroup not a Job's, the Queues' status, the
    Queue Commands) is Tessera's; beside a Volcano that stays, only what Tessera's pods are in."""
    return VOLCANO_SCHEDULER in scheduler_names


def queues_path(name: str = "", sub: str = "") -> str:
    return (f"{QUEUES}/{name}" + (f"/{sub}" if sub else "")) if name else QUEUES


def _namespaced(group: str, plural: str, namespace: str, name: str, sub: str) -> str:
    base = f"/apis/{group}/namespaces/{namespace}/{plural}" if namespace else f"/apis/{group}/{plural}"
    if not name:
        return base
    return f"{base}/{name}" + (f"/{sub}" if sub else "")


def podgroups_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    return _namespaced(SCHEDULING, "podgroups", namespace, name, sub)


def job_ended(job: dict[str, Any]) -> bool:
    """The Job's status says it ended — not a refusal's Failed (its user may fix the spec and
    have it judged again); a suspended job's Aborted is left by a resume command, which is the
    log's to carry, not a new submission. Admission read such a Job the log had forgotten (a
    finished job beyond `--keep-finished`, or compacted away) as a new one, and ran it a
    second time: at every restart, or at any change of the object."""
    state = (job.get("status") or {}).get("state") or {}
    return state.get("phase") in TERMINAL_JOB_PHASES and state.get("reason") != "Rejected"


def group_ended(group: dict[str, Any]) -> bool:
    """The PodGroup's status says it ended (`Completed`: every pod it ran finished, or its job
    ended in the log). Volcano never enqueues such a group again (only Pending ones are), so the
    object's own status is the durable record that its job ran: admission forgets a finished
    job once `--keep-finished` others ended after it, and at its restart took such a group for
    a new one — written back Inqueue over its Completed, counted Inqueue by its queue."""
    return (group.get("status") or {}).get("phase") == "Completed"


def jobs_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    return _namespaced(BATCH, "jobs", namespace, name, sub)


def commands_path(namespace: str = "", name: str = "") -> str:
    return _namespaced(BUS, "commands", namespace, name, "")


def jobflows_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    return _namespaced(FLOW, "jobflows", namespace, name, sub)


def jobtemplates_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    return _namespaced(FLOW, "jobtemplates", namespace, name, sub)


def hypernodes_path(name: str = "") -> str:
    return f"{HYPERNODES}/{name}" if name else HYPERNODES


API_VERSIONS = {"Queue": SCHEDULING, "PodGroup": SCHEDULING, "Job": BATCH, "Command": BUS,
                "HyperNode": TOPOLOGY, "JobFlow": FLOW, "JobTemplate": FLOW}  # fmt: skip


def status_path(obj: Mapping[str, Any]) -> str:
    """Where the object's status is written. Queue and Job have a `status` subresource (a
    write to the object itself drops its status); Volcano's PodGroup CRD has none, so its
    status is a field of the object (`…/status` is 404 on a real API server)."""
    m = meta(obj)
    ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
    kind = obj.get("kind")
    if kind == "Queue":
        return queues_path(name, "status")
    if kind == "PodGroup":
        return podgroups_path(ns, name)
    return jobs_path(ns, name, "status")


def typed(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The object with its apiVersion and kind (a list's items carry neither)."""
    return {**obj, "apiVersion": API_VERSIONS[kind], "kind": kind}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def uid(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def api_time(stamp: object) -> float | None:
    """Seconds of an API server timestamp (RFC 3339, `2026-12-06T08:00:00Z`); None if it is none."""
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None
    except ValueError:
        return None


def with_arrival(annotations: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any]:
    """`annotations` with the object's creation time as the job's arrival (`tessera.io/arrive-at`,
    seconds), unless it names one: Volcano's sla plugin counts a job's waiting time from its
    creationTimestamp, and without it every job's deadline had passed at once."""
    out = dict(annotations)
    if ARRIVE_AT not in out and (made := api_time(meta(obj).get("creationTimestamp"))) is not None:
        out[ARRIVE_AT] = f"{made:.0f}"
    return out


def owner_job(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the Volcano Job controlling this object, if one does."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/"):
            return str(ref.get("name") or ""), str(ref.get("uid") or "")
    return None


def manifest(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as `tessera apply` reads it from a file: no status (it is what Tessera
    writes), no server fields, a Job's or PodGroup's uid kept as an annotation. A Queue is
    cluster-scoped and known by its name alone: the same spec under a new uid (a queue
    created again, `root` and `default` made by Tessera) is the same queue, not a change."""
    doc = {k: copy.deepcopy(v) for k, v in obj.items() if k in ("apiVersion", "kind", "spec")}
    m = meta(obj)
    kept = {k: copy.deepcopy(m[k]) for k in ("name", "namespace", "labels", "annotations") if m.get(k)}
    if m.get("uid") and obj.get("kind") != "Queue":
        kept["annotations"] = {**(kept.get("annotations") or {}), OBJECT_UID: str(m["uid"])}
    if obj.get("kind") in ("Job", "PodGroup"):
        kept["annotations"] = with_arrival(kept.get("annotations") or {}, obj)
    if obj.get("kind") == "Job" and isinstance(doc.get("spec"), dict) and "plugins" in doc["spec"]:
        doc["spec"]["plugins"] = redacted(doc["spec"]["plugins"])
    doc["metadata"] = kept
    return doc


def queue_object(spec: QueueSpec) -> dict[str, Any]:
    """A queue of the log as the Queue object that admits to exactly that spec again (every
    field written, quantities that parse back to the same units, its annotations); the state
    is the status' business, written by the job controller."""
    def amounts(values: Mapping[str, int]) -> dict[str, str]:
        return {res: from_units(res, v) for res, v in sorted(values.items())}

    body: dict[str, Any] = {"weight": spec.weight, "reclaimable": spec.reclaimable, "priority": spec.priority}
    for name, values in (("capability", spec.capability), ("deserved", spec.deserved)):
        if values:
            body[name] = amounts(values)
    if spec.guarantee:
        body["guarantee"] = {"resource": amounts(spec.guarantee)}
    if spec.parent:
        body["parent"] = spec.parent
    if spec.dequeue_strategy != "traverse":
        body["dequeueStrategy"] = spec.dequeue_strategy
    if (g := spec.node_groups) is not None:
        body["affinity"] = {
            field_name: {when: list(names) for when, names in (
                ("requiredDuringSchedulingIgnoredDuringExecution", required),
                ("preferredDuringSchedulingIgnoredDuringExecution", preferred)) if names}
            for field_name, required, preferred in (("nodeGroupAffinity", g.required, g.preferred),
                                                    ("nodeGroupAntiAffinity", g.anti_required, g.anti_preferred))
            if required or preferred}  # fmt: skip
    m: dict[str, Any] = {"name": spec.name}
    if spec.annotations:
        m["annotations"] = dict(spec.annotations)
    return {"apiVersion": SCHEDULING, "kind": "Queue", "metadata": m, "spec": body}


def _owner(job: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": BATCH, "kind": "Job", "name": meta(job).get("name"), "uid": uid(job),
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def podgroup_name(job: Mapping[str, Any]) -> str:
    """Volcano's `generateRelatedPodGroupName`: `<job>-<uid>`."""
    return f"{meta(job).get('name')}-{uid(job)}"


def _quantities(units: Mapping[str, int]) -> dict[str, str]:
    out = {}
    for name, value in sorted(units.items()):
        if name in ("cpu", "memory"):
            out[name] = from_units(name, value)
        else:
            out[name] = str(value // 1000) if value % 1000 == 0 else f"{value}m"
    return out


def podgroup_for(job: Mapping[str, Any], spec: JobSpec) -> dict[str, Any]:
    """The PodGroup the job controller creates: minMember, minTaskMember, queue, priority class
    and minResources of the admitted spec; labels and annotations copied from the Job."""
    m = meta(job)
    body: dict[str, Any] = {
        "minMember": spec.min_available,
        "minTaskMember": {t.name: t.min_available if t.min_available is not None else t.replicas
                          for t in spec.tasks},
        "queue": spec.queue,
    }  # fmt: skip
    if spec.priority_class:
        body["priorityClassName"] = spec.priority_class
    if spec.min_resources:
        body["minResources"] = _quantities(spec.min_resources)
    if spec.network_topology is not None:  # Volcano copies the Job's onto its PodGroup
        nt = spec.network_topology
        body["networkTopology"] = {"mode": nt.mode, **({"highestTierAllowed": nt.highest_tier}
                                   if nt.highest_tier is not None else {}),
                                   **({"highestTierName": nt.highest_tier_name} if nt.highest_tier_name else {})}  # fmt: skip
    annotations = {k: v for k, v in (m.get("annotations") or {}).items()
                   if not k.startswith("kubectl.kubernetes.io/")}  # fmt: skip
    return {"apiVersion": SCHEDULING, "kind": "PodGroup",
            "metadata": {"name": podgroup_name(job), "namespace": m.get("namespace") or "default",
                         "labels": dict(m.get("labels") or {}), "annotations": annotations,
                         "ownerReferences": [_owner(job)]},
            "spec": body}  # fmt: skip


def pod_for(job: Mapping[str, Any], spec: JobSpec, task: str, index: int, retries: int,
            made_after: int = 0) -> dict[str, Any]:
    """Pod `<job>-<task>-<index>` from the task's template (Volcano `createJobPod`)."""
    m = meta(job)
    name, ns = str(m.get("name")), str(m.get("namespace") or "default")
    raw = next((t for t in (job.get("spec") or {}).get("tasks") or []
                if str(t.get("name") or "") == task), {})  # fmt: skip
    if not raw:  # tasks without a name were admitted as default<i>
        tasks = (job.get("spec") or {}).get("tasks") or []
        i = int(task.removeprefix("default")) if task.startswith("default") and task[7:].isdigit() else -1
        raw = tasks[i] if 0 <= i < len(tasks) else {}
    template = with_job_volumes(raw.get("template") or {}, (job.get("spec") or {}).get("volumes"),
                                str(meta(job).get("name") or ""), uid(job))  # fmt: skip
    tmeta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    job_spec = job.get("spec") or {}
    pod_spec["schedulerName"] = pod_spec.get("schedulerName") or job_spec.get("schedulerName") or "volcano"
    if spec.priority_class and not pod_spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec.priority_class
    counted = next((t for t in spec.tasks if t.name == task), None)
    if counted is not None:
        _write_counts(pod_spec, counted)
    ours = {JOB_NAME: name, JOB_NAMESPACE: ns, QUEUE_NAME: spec.queue, TASK_SPEC: task,
            TASK_INDEX: str(index), JOB_VERSION: str(retries), RETRY_COUNT: str(retries)}  # fmt: skip
    labels = job_pod_labels(tmeta.get("labels") or {}, name, ns, spec.queue, task, index)
    annotations = {**(tmeta.get("annotations") or {}), **ours, GROUP_NAME: podgroup_name(job),
                   MADE_AFTER: str(made_after)}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{name}-{task}-{index}", "namespace": ns, "labels": labels,
                        "annotations": annotations, "ownerReferences": [_owner(job)]},
           "spec": pod_spec}  # fmt: skip
    jobplugins.apply_to_pod(pod, job, task, index)
    return pod


def plugin_objects(job: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, body) of what the Job's controller puts beside its pods, owned by the Job: its
    plugins' objects, and the claims its `spec.volumes` asks to be made (jobvolumes.py)."""
    ns = str(meta(job).get("namespace") or "default")
    claims = [("PersistentVolumeClaim", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                         "metadata": {"name": name, "namespace": ns, "ownerReferences": [_owner(job)]},
                                         "spec": spec})
              for name, spec in claims_to_make(job)]  # fmt: skip
    return [*claims, *jobplugins.objects(job, _owner(job))]


def _write_counts(pod_spec: dict[str, Any], task: TaskSpec) -> None:
    """The count resource of each card the task books, in the container that asks the card
    without it (`-memory` alone) or asks another count (a 910C's 1, which books a module of 2):
    the kubelet calls the device plugin only for a resource the container asks, and for the
    count it asks, so the pod would start with no card, or its Allocate fail. HAMi's webhook
    writes the same into the pod; admission refuses such pods when nobody will (`uncounted`)."""
    apps = pod_spec.get("containers") or []
    for d in task.devices:  # init containers' asks name their count (admission's rule)
        if not d.resource or not 0 <= d.container < len(apps):
            continue
        res = apps[d.container].setdefault("resources", {})
        asked = [part for part in ("limits", "requests") if d.resource in (res.get(part) or {})]
        if not asked:
            res["limits"] = {**(res.get("limits") or {}), d.resource: str(d.count)}
        for part in asked:  # 910C: a count of 1 books a module of 2, which the kubelet must ask
            if str(res[part][d.resource]) != str(d.count):
                res[part] = {**res[part], d.resource: str(d.count)}


# --- status ------------------------------------------------------------------------------------

_TIMES = ("lastTransitionTime", "lastProbeTime", "lastUpdateTime", "transitionID", "runningDuration")


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMES}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def status_differs(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether writing `desired` would change what the object shows (timestamps aside); only
    the fields Tessera writes are compared."""
    have = _untimed(dict(current or {}))
    want = _untimed(dict(desired))
    return any(have.get(k) != v for k, v in want.items())


#: a Job's and a PodGroup's pod counts (`vcctl job list`'s columns)
COUNT_FIELDS = frozenset({"pending", "running", "succeeded", "failed", "terminating", "unknown", "taskStatusCount"})

#: the Job phases Volcano's job controller reaches through `killJob`, which bumps
#: `status.version` and writes `status.runningDuration` (a restart's Restarting too, counted by
#: the retry it also is)
KILLED_PHASES = frozenset({"Aborting", "Aborted", "Terminating", "Terminated", "Completing", "Completed", "Failed"})


def job_version(shown: str, retries: int) -> int:
    """`status.version`: one per kill of the job's pods — each restart, and the kill that ends
    it. (Volcano's finished state kills again at every resync of an ended job; that count is
    the API server's history, not the job's, and is not kept.) Pods made after the last
    restart carry `retries` as their `volcano.sh/job-version`, as Volcano's carry the version
    they were made under."""
    return retries + (shown in KILLED_PHASES)


def go_duration(seconds: float) -> str:
    """A `metav1.Duration` as it is serialized (Go's `time.Duration.String`), to the second:
    `45s`, `2m0s`, `1h2m3s`."""
    s = max(0, int(seconds))
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    if h:
        return f"{h}h{m}m{sec}s"
    return f"{m}m{sec}s" if m else f"{sec}s"


def counts_only(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether writing `desired` would change only the pod counts the object shows."""
    return not status_differs(current, {k: v for k, v in desired.items() if k not in COUNT_FIELDS})


def removals(current: Mapping[str, Any] | None, desired: dict[str, Any]) -> dict[str, Any]:
    """`desired` as a merge patch over `current`: inside each map it writes (a Queue's
    `allocated`), a key the object has and `desired` lacks is sent as `null`, which deletes it
    — a merge patch only ever adds keys otherwise, and a drained queue would show its last
    allocation for ever (issue 28). Top-level fields it does not write stay as they are."""
    out = dict(desired)
    for key, want in desired.items():
        have = (current or {}).get(key)
        if isinstance(want, dict) and isinstance(have, dict):
            out[key] = {**{k: None for k in have if k not in want}, **removals(have, want)}
    return out


def stamp(desired: dict[str, Any], current: Mapping[str, Any] | None, now: str, created: object = "") -> dict[str, Any]:
    """Timestamps on the conditions that changed; unchanged ones keep theirs. A Job's status
    (`state`) gets Volcano's history too: one condition (`status`: the phase, and when) appended
    at each phase change, and once the job is killed (ended or ending) `runningDuration`, the
    time from its creation (`created`) to the kill."""
    old = {c.get("type"): c for c in (current or {}).get("conditions") or []}
    for c in desired.get("conditions") or []:
        prev = old.get(c.get("type"))
        same = prev is not None and _untimed(prev) == _untimed(c)
        c["lastTransitionTime"] = prev.get("lastTransitionTime") if same and prev else now
    if isinstance(desired.get("state"), dict):
        prev_state = (current or {}).get("state") or {}
        phase = desired["state"].get("phase")
        same = prev_state.get("phase") == phase
        desired["state"]["lastTransitionTime"] = prev_state.get("lastTransitionTime") if same else now
        conditions = list((current or {}).get("conditions") or [])
        if not same or not conditions:  # an object written before conditions were: its phase now
            conditions.append({"status": phase, "lastTransitionTime": desired["state"]["lastTransitionTime"]})
        desired["conditions"] = conditions
        if phase in KILLED_PHASES:
            if same and (current or {}).get("runningDuration"):
                desired["runningDuration"] = (current or {})["runningDuration"]
            elif (made := api_time(created)) is not None and (at := api_time(now)) is not None:
                desired["runningDuration"] = go_duration(at - made)
    return desired


def _counts(tasks: Iterable[st.TaskSnap]) -> dict[str, int]:
    statuses = [t.status for t in tasks]
    return {
        "running": sum(s in (st.RUNNING,) for s in statuses),
        "succeeded": sum(s == st.SUCCEEDED for s in statuses),
        "failed": sum(s == st.FAILED for s in statuses),
    }


def podgroup_phase(log_phase: str, pg_phase: str) -> str:
    """The PodGroup phase from the log: the projection's (Pending/Inqueue/Running/Unknown/
    Completed) while the job lives — Running while it is being ended (its pods are still
    being killed) — and Completed once it finished."""
    if pg_phase in st.ENDING_PHASES:
        return "Running"
    if pg_phase:
        return pg_phase
    return "Completed" if log_phase in TERMINAL_JOB_PHASES else "Pending"


#: the conditions Volcano's gang plugin writes on a PodGroup, one of each at most
#: the condition a refused PodGroup carries (`status.refusal_status`), stale once it is admitted
REFUSAL_CONDITION = "Admitted"


def podgroup_status(pg_phase: str, tasks: Iterable[st.TaskSnap], unschedulable: str, min_member: int,
                    current: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:  # fmt: skip
    """phase, running/succeeded/failed and the gang's conditions as Volcano's gang plugin writes
    them at each session's close (`OnSessionClose`): a ready job — minMember of its tasks
    allocated, bound, running or succeeded (`JobInfo.IsReady`) — gets `Scheduled`; a job not
    ready gets `Unschedulable` (NotEnoughResources, the scheduler's message, else the gang's
    count of what its tasks are). Each replaces the condition of its type only
    (`UpdatePodGroupCondition`): the PodGroup keeps one of each type, the other as it was last
    written (`current`: the object's, with their times), and the newer tells the truth. A pod
    above minMember that does not fit leaves a ready group `Scheduled` (the pod's own
    `PodScheduled=False` says why); Tessera wrote `Unschedulable` over it and kept it after the
    pod was gone, beside `phase: Running` — and `Scheduled` beside `Unknown` for a cut gang.
    A condition of any other type stays as it is (one per type: another writer's), but for a
    refusal's `Admitted=False` (`status.refusal_status`): this writer is its one remover, as
    it writes the status of admitted jobs only, so it says something no longer true. (Admission
    took it off as well: a write of this one from an object read before that put it back.)"""
    tasks = list(tasks)
    out: dict[str, Any] = {"phase": pg_phase, **_counts(tasks)}
    ready = sum(t.status in READY for t in tasks)
    new: dict[str, Any] | None = None
    if ready >= min_member:
        new = {"type": "Scheduled", "status": "True", "reason": SCHEDULED_REASON, "message": ""}
    elif unschedulable or ready or any(t.status == st.RUNNING for t in tasks):
        # (not ready, nothing placed and no verdict yet: the scheduler has not judged it)
        new = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
               "message": unschedulable or _gang_message(tasks, ready, min_member)}  # fmt: skip
    had = list(current)
    conditions = [dict(c) for c in had if c.get("type") != REFUSAL_CONDITION]
    if new is not None:
        at = next((i for i, c in enumerate(conditions) if c.get("type") == new["type"]), None)
        if at is None:
            conditions.append(new)
        else:
            conditions[at] = new
    if conditions or had:
        out["conditions"] = conditions
    return out


def _gang_message(tasks: list[st.TaskSnap], ready: int, min_member: int) -> str:
    """Volcano's words for a job that is not ready (`N/M tasks in gang unschedulable: pod group
    is not ready, <count> <status>…, <min> minAvailable`)."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.status] = counts.get(t.status, 0) + 1
    histogram = sorted([f"{n} {status}" for status, n in counts.items()] + [f"{min_member} minAvailable"])
    return f"{min_member - ready}/{len(tasks)} tasks in gang unschedulable: pod group is not ready, " + ", ".join(histogram)


def job_status(spec: JobSpec, phase: str, tasks: Iterable[st.TaskSnap], retries: int,
               restarting: bool, ran: bool = True, reason: str = "") -> dict[str, Any]:  # fmt: skip
    """state.phase, retryCount, version, minAvailable and the pod counts of `vcctl job list`. The log's
    Running is the PodGroup's (its gang placed); Volcano's job controller moves a Job from
    Pending to Running only once minAvailable ≤ running + succeeded + failed (volcano.md
    §1.3): until then (`ran` False: never so far) the Job shows Pending."""
    tasks = list(tasks)
    shown = "Restarting" if restarting else volcano_job_phase(phase, reason)
    counts = _counts(tasks)
    if shown == "Running" and not ran and sum(counts.values()) < spec.min_available:
        shown = "Pending"
    return {
        "state": {"phase": shown},
        "minAvailable": spec.min_available,
        "retryCount": retries,
        "version": job_version(shown, retries),
        "pending": sum(_POD_PHASE.get(t.status) == "Pending" for t in tasks),
        **counts,
        "terminating": sum(t.status == st.RELEASING for t in tasks),
        "unknown": sum(t.status not in _POD_PHASE and t.status != st.RELEASING for t in tasks),
        "taskStatusCount": task_status_count(tasks),
    }


#: a task's status → the pod phase Volcano's `taskStatusCount` counts it under (a pod being
#: stopped is counted `terminating` instead, as Volcano's controller counts one being deleted)
_POD_PHASE = {st.PENDING: "Pending", st.ALLOCATED: "Pending", st.PIPELINED: "Pending", st.BINDING: "Pending",
              st.BOUND: "Pending", st.RUNNING: "Running", st.SUCCEEDED: "Succeeded", st.FAILED: "Failed"}  # fmt: skip


def task_status_count(tasks: Iterable[st.TaskSnap]) -> dict[str, Any]:
    """Per task, its pods by phase (`status.taskStatusCount`), as Volcano's job controller
    writes it and `vcctl job view`, JobFlow conditions and dashboards read it; only the
    phases some pod is in."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for t in tasks:
        phase = _POD_PHASE.get(t.status)
        if phase is not None:
            count = out.setdefault(t.role, {"phase": {}})["phase"]
            count[phase] = count.get(phase, 0) + 1
    return out


def queue_status(state: str, allocated: Mapping[str, int], phases: Iterable[str]) -> dict[str, Any]:
    """state, allocated (quantities) and how many PodGroups are in each phase."""
    counts = {"pending": 0, "inqueue": 0, "running": 0, "unknown": 0, "completed": 0}
    for ph in phases:
        key = ph.lower()
        if key in counts:
            counts[key] += 1
    return {"state": state, "allocated": _quantities(allocated), **counts}
