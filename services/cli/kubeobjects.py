"""The log's records → the Kubernetes objects `kubectl get -o json|yaml` would print (issue 26,
items 6–8), so `jq '.items[].status.phase'` and other kubectl habits carry over.

Pure: the simulate report's records and a `Catalog` of what the log says about each object's
birth (its spec, its submission's sequence and NATS timestamp) in, dicts out. The shapes are
the ones the API server serves: a Pod's `status.phase` is one of Kubernetes' five phases, and
Tessera's finer phase (Pipelined, Bound, Rejected, Evicted) is its `status.reason`, as kubelet
writes `Evicted`; PodGroups are `scheduling.volcano.sh/v1beta1`, Volcano Jobs
`batch.volcano.sh/v1alpha1`, Queues `scheduling.volcano.sh/v1beta1`.

Names: Volcano's podgroup controller names a plain pod's implied PodGroup `podgroup-<pod uid>`
and the job controller a Job's `<job>-<job uid>` (`generateRelatedPodGroupName`). A pod that came
from the API server carries its uid in the task annotation the pod source writes; one applied
through `tessera apply` never had one, so its uid is derived from the submission's place in the
log (stable for that incarnation, new after a delete and re-apply, as a real uid is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contracts.envelope import TYPE
from contracts.events import (
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUpdated,
    NodeRegistered,
    QueueCreated,
    QueueDeleted,
    QueueUpdated,
    TaskStarted,
)
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling.lifecycle import podgroup_phase_of, volcano_job_phase
from services.core.stamps import RFC3339_SECONDS
from services.core.workload.podgroups import POD_UID, derived_uid
from services.core.workload.printed import DEVICES, manifest_docs, spec_of
from services.core.workload.schedulernames import job_scheduler, pod_scheduler
from services.runtime.eventlog.model import StoredMessage

POD_API, JOB_API, SCHEDULING_API = "v1", "batch.volcano.sh/v1alpha1", "scheduling.volcano.sh/v1beta1"
#: Tessera's own kinds (cards) are no Kubernetes API's; they get a group of their own.
TESSERA_API = "tessera.io/v1alpha1"
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
#: The labels Volcano's job controller puts on the pods it creates.
JOB_NAME_LABEL, TASK_LABEL = "volcano.sh/job-name", "volcano.sh/task-spec"
#: Kubernetes' pod phases; every other phase Tessera knows is a kind of one of them.
KUBE_PHASES = {"Pipelined": "Pending", "Bound": "Pending", "Rejected": "Pending", "Evicted": "Failed",
               "Terminating": "Running"}  # fmt: skip
#: The NATS header a stored message's time is in (direct gets carry it).
TIME_HEADER = "Nats-Time-Stamp"
#: The event types the catalog decodes; every other message is skipped by its header alone.
_BIRTHS = frozenset({"JobSubmitted", "JobUpdated", "JobDeleted", "JobPhaseChanged", "TaskStarted", "QueueCreated",
                     "QueueUpdated", "QueueDeleted", "NodeRegistered"})  # fmt: skip


@dataclass
class Born:
    """An object's current incarnation: when the log first said so, and its latest spec."""

    seq: int
    time: str
    spec: JobSpec | None = None
    tasks: tuple[JobSpec, dict[str, TaskSpec]] | None = None  # `_task_of`'s map, for `spec`
    #: the object as its user wrote it (a Job's policies, plugins, task templates)
    manifest: str = ""
    #: the phases a Volcano Job's status showed, with when: its `status.conditions`
    phases: list[tuple[str, str]] = field(default_factory=list)
    #: the pods started since the job's last restart (it shows Running once minAvailable did)
    started: set[str] = field(default_factory=set)

    def show(self, phase: str, when: str) -> None:
        if not self.phases or self.phases[-1][0] != phase:
            self.phases.append((phase, when))


@dataclass
class Catalog:
    jobs: dict[tuple[str, str], Born] = field(default_factory=dict)
    queues: dict[str, Born] = field(default_factory=dict)
    #: each queue's latest admitted spec: `get queue -o yaml` prints every field of it
    queue_specs: dict[str, QueueSpec] = field(default_factory=dict)
    nodes: dict[str, Born] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    node_uids: dict[str, str] = field(default_factory=dict)  # each node's last known uid


def catalog(messages: Iterable[StoredMessage]) -> Catalog:
    """Births and specs from the log (a message that does not decode is skipped, as readers do)."""
    reg = default_registry()
    out = Catalog()
    for m in messages:
        kind = m.headers.get(TYPE, "")
        if kind not in _BIRTHS:
            continue
        try:
            ev = reg.decode(kind, m.data)
        except (UnknownEventType, UndecodableEvent):
            continue
        when = m.headers.get(TIME_HEADER, "")
        if isinstance(ev, JobSubmitted):
            key = (ev.spec.namespace, ev.spec.name)
            born = out.jobs.get(key)
            if born is None:
                born = out.jobs[key] = Born(m.seq, when, ev.spec)
                born.show("Pending", when)
            else:  # submitted again (resume, a refused group accepted): the same object
                born.spec = ev.spec
            born.manifest = ev.manifest or born.manifest
        elif isinstance(ev, JobPhaseChanged):
            if (born := out.jobs.get((ev.namespace, ev.name))) is not None:
                if ev.phase in ("Restarting", "Pending"):
                    born.started.clear()
                born.show(volcano_job_phase(ev.phase, ev.reason), when)
        elif isinstance(ev, TaskStarted):
            born = out.jobs.get((ev.namespace, ev.name))
            if born is not None and born.spec is not None:
                born.started.add(ev.task)
                if born.phases and born.phases[-1][0] == "Pending" and len(born.started) >= born.spec.min_available:
                    born.show("Running", when)  # Volcano's job controller: minAvailable pods ran
        elif isinstance(ev, JobUpdated):
            if (ev.spec.namespace, ev.spec.name) in out.jobs:
                out.jobs[(ev.spec.namespace, ev.spec.name)].spec = ev.spec
        elif isinstance(ev, JobDeleted):
            out.jobs.pop((ev.namespace, ev.name), None)
        elif isinstance(ev, NodeRegistered):
            # a node deleted and made again under its name is a new object (another uid): born
            # at its first registration; a registration naming no uid is the same object
            if ev.node not in out.nodes or (ev.uid and out.node_uids.get(ev.node, ev.uid) != ev.uid):
                out.nodes[ev.node] = Born(m.seq, when)
            if ev.uid:
                out.node_uids[ev.node] = ev.uid
            out.node_labels[ev.node] = dict(ev.labels)
        elif isinstance(ev, QueueCreated):
            out.queues[ev.spec.name] = Born(m.seq, when)
            out.queue_specs[ev.spec.name] = ev.spec
        elif isinstance(ev, QueueUpdated):
            if ev.spec.name in out.queues:
                out.queue_specs[ev.spec.name] = ev.spec
        elif isinstance(ev, QueueDeleted):  # created again later: a new object, born then
            out.queues.pop(ev.queue, None)
            out.queue_specs.pop(ev.queue, None)
    return out


def rfc3339(stamp: str) -> str:
    """NATS's nanosecond timestamp as Kubernetes writes times: whole seconds, `Z`."""
    if not stamp:
        return ""
    return stamp.split(".")[0].removesuffix("Z") + "Z"


def age(stamp: str, now: datetime) -> str:
    """How old, as kubectl's AGE column says it: exact while it is young, coarser as it ages."""
    if not stamp:
        return "<unknown>"
    then = datetime.strptime(rfc3339(stamp), RFC3339_SECONDS).replace(tzinfo=UTC)
    s = max(0, int((now - then).total_seconds()))
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y"


def _uid(born: Born | None, subject: str) -> str:
    return "" if born is None else derived_uid(subject, born.seq)


def job_uid(cat: Catalog, namespace: str, name: str) -> str:
    return _uid(cat.jobs.get((namespace, name)), f"{namespace}/{name}")


def _task_of(born: Born | None, pod: str) -> TaskSpec | None:
    """The pod's task, from a pod → task map made once per spec (a large job's pods would
    otherwise each walk all of its replicas)."""
    if born is None or born.spec is None:
        return None
    if born.tasks is None or born.tasks[0] is not born.spec:
        from services.core.scheduling.snapshot import task_names

        born.tasks = (born.spec, {p: t for p, _role, _i, t in task_names(born.spec)})
    return born.tasks[1].get(pod)


def pod_uid(cat: Catalog, namespace: str, job: str, pod: str) -> str:
    """The Kubernetes pod's own uid when it came from one, else one derived from the log."""
    born = cat.jobs.get((namespace, job or pod))
    task = _task_of(born, pod)
    if task is not None and task.annotations.get(POD_UID):
        return task.annotations[POD_UID]
    return _uid(born, f"{namespace}/{job or pod}/{pod}")


def podgroup_name(cat: Catalog, job: Mapping[str, Any]) -> str:
    """The name Volcano gives the job's PodGroup (module docstring)."""
    ns, name, kind = job["namespace"], job["name"], job.get("kind", "")
    if kind == "Pod":
        uid = pod_uid(cat, ns, name, name)
        return f"podgroup-{uid}" if uid else name
    if kind == "Job":
        uid = job_uid(cat, ns, name)
        return f"{name}-{uid}" if uid else name
    return name


def pod_labels(cat: Catalog, pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's own labels, and the two Volcano's job controller adds to a Job's pods."""
    born = cat.jobs.get((pod["namespace"], pod["job"] or pod["name"]))
    task = _task_of(born, pod["name"])
    labels = dict(task.labels) if task is not None else {}
    if born is not None and born.spec is not None and born.spec.kind == "Job" and task is not None:
        labels.setdefault(JOB_NAME_LABEL, born.spec.name)
        labels.setdefault(TASK_LABEL, task.name)
    return labels


def _meta(name: str, namespace: str | None, uid: str, born: Born | None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    if born is not None and born.time:
        meta["creationTimestamp"] = rfc3339(born.time)
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def _cards_text(devices: Sequence[Mapping[str, Any]]) -> str:
    from services.cli.get import device_text

    return ",".join(device_text(d) for d in devices)


def _documents(born: Born | None) -> list[dict[str, Any]]:
    return manifest_docs(born.manifest) if born is not None else []


def _named(docs: Iterable[Mapping[str, Any]], kind: str, name: str) -> Mapping[str, Any] | None:
    return next((d for d in docs if d.get("kind") == kind and isinstance(d.get("metadata"), dict)
                 and d["metadata"].get("name") == name), None)  # fmt: skip


def _pod_written(born: Born | None, pod: str, task: TaskSpec | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The pod as the API server holds it, from the object its user applied: (its own
    annotations, its spec with the schedulerName stored for it). A plain pod's or a PodGroup
    member's is its own object; a Volcano Job's pod is its task's template, with the
    schedulerName the job controller writes (the template's, else the Job's). None when the
    log kept no object text (written before it did, or too large to keep)."""
    if born is None or born.spec is None:
        return None
    docs = _documents(born)
    if born.spec.kind == "Job":
        job_doc = _named(docs, "Job", born.spec.name)
        raw_tasks = (job_doc or {}).get("spec", {}).get("tasks") if job_doc else None
        raw = next((t for t in raw_tasks or [] if isinstance(t, dict) and task is not None
                    and t.get("name") == task.name), None)  # fmt: skip
        if raw is None and task is not None and isinstance(raw_tasks, list):  # unnamed: by position
            index = next((i for i, t in enumerate(born.spec.tasks) if t.name == task.name), -1)
            raw = raw_tasks[index] if 0 <= index < len(raw_tasks) and isinstance(raw_tasks[index], dict) else None
        if raw is None:
            return None
        template = raw.get("template") if isinstance(raw.get("template"), dict) else {}
        spec = spec_of(template)
        spec["schedulerName"] = spec.get("schedulerName") or job_scheduler(job_doc.get("spec") if job_doc else None)
        meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
        return dict(meta.get("annotations") or {}), spec
    doc = _named(docs, "Pod", pod)
    if doc is None:
        return None
    spec = spec_of(doc)
    spec["schedulerName"] = pod_scheduler(spec)
    return dict((doc.get("metadata") or {}).get("annotations") or {}), spec


def pod_object(cat: Catalog, pod: Mapping[str, Any], job_rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict:
    """The Pod with its whole spec as admitted (containers, resources, the schedulerName it
    names — `default-scheduler` when it names none, as the API server stores it), the node it
    is bound to, and Tessera's view of its status."""
    ns, name, job = pod["namespace"], pod["name"], pod["job"]
    born = cat.jobs.get((ns, job or name))
    job_row = job_rows.get((ns, job or name), {})
    task = _task_of(born, name)
    written = _pod_written(born, name, task)
    annotations: dict[str, str] = {}
    if written is not None and job_row.get("kind") != "Job":
        annotations = {str(k): str(v) for k, v in written[0].items()}  # its own: queue-name included
        if job_row:
            annotations.setdefault(GROUP_NAME, podgroup_name(cat, job_row))  # the controller's
    elif job_row:
        annotations[GROUP_NAME] = podgroup_name(cat, job_row)
        if job_row.get("queue"):
            annotations[QUEUE_NAME] = job_row["queue"]
    if pod.get("devices"):
        annotations[DEVICES] = _cards_text(pod["devices"])
    owners = []
    if job_row.get("kind") == "Job":
        owners = [{"apiVersion": JOB_API, "kind": "Job", "name": job, "uid": job_uid(cat, ns, job),
                   "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    meta = _meta(name, ns, pod_uid(cat, ns, job, name), born, labels=pod_labels(cat, pod),
                 annotations=annotations, ownerReferences=owners)  # fmt: skip
    phase = pod["phase"]
    status: dict[str, Any] = {"phase": KUBE_PHASES.get(phase, phase)}
    if phase in KUBE_PHASES:
        status["reason"] = phase
    if pod.get("reason"):
        status["message"] = pod["reason"]
    scheduled = pod.get("node") is not None and phase not in ("Pipelined", "Rejected")
    condition: dict[str, Any] = {"type": "PodScheduled", "status": "True" if scheduled else "False"}
    if not scheduled:
        condition["reason"] = "Unschedulable"
        if pod.get("reason"):
            condition["message"] = pod["reason"]
    status["conditions"] = [condition]
    spec: dict[str, Any] = written[1] if written is not None else {}
    spec.pop("nodeName", None)  # where it is bound now, if it is
    if written is None and job_row.get("kind") == "Job":
        spec["schedulerName"] = job_scheduler(None)  # the Job's webhook default; its own not kept
    if pod.get("node"):
        spec["nodeName"] = pod["node"]
    if task is not None and task.priority_class:
        spec["priorityClassName"] = task.priority_class
    return {"apiVersion": POD_API, "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _counts(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0}
    for p in pods:
        phase = KUBE_PHASES.get(p["phase"], p["phase"]).lower()
        if phase in out:
            out[phase] += 1
    return {k: v for k, v in out.items() if v}


#: a pod record's phase → the Job status count Volcano's job controller puts it under
_JOB_COUNTS = {"Pending": "pending", "Pipelined": "pending", "Bound": "pending", "Rejected": "pending",
               "Running": "running", "Succeeded": "succeeded", "Failed": "failed", "Evicted": "failed",
               "Terminating": "terminating"}  # fmt: skip


def _job_spec(born: Born | None, queue: str) -> dict[str, Any]:
    """The Job's spec as the API server holds it: the user's object (templates, policies,
    plugins, …) with what admission and Volcano's webhook settled — queue, schedulerName,
    minAvailable, maxRetry, task names and replicas (an update may have changed them)."""
    spec: dict[str, Any] = {"queue": queue}
    if born is None or born.spec is None:
        return spec
    s = born.spec
    doc = _named(_documents(born), "Job", s.name)
    written = spec_of(doc) if doc is not None else None
    raw_tasks = written.get("tasks") if isinstance(written, dict) else None
    if isinstance(written, dict) and isinstance(raw_tasks, list) and len(raw_tasks) == len(s.tasks):
        spec = {**written, **spec, "schedulerName": job_scheduler(written)}
        for raw, t in zip(spec["tasks"], s.tasks, strict=True):
            if isinstance(raw, dict):
                raw.update(name=t.name, replicas=t.replicas)
                if t.min_available is not None:
                    raw["minAvailable"] = t.min_available
    else:  # the log keeps no manifest of it (admission records none for a Job): its admitted spec
        spec["tasks"] = [{"name": t.name, "replicas": t.replicas,
                          **({"minAvailable": t.min_available} if t.min_available is not None else {}),
                          **({"policies": _policies(t.policies)} if t.policies else {})}
                         for t in s.tasks]  # fmt: skip
        if s.policies:
            spec["policies"] = _policies(s.policies)
        if s.min_success is not None:
            spec["minSuccess"] = s.min_success
    spec.update(minAvailable=s.min_available, maxRetry=s.max_retry)
    if s.priority_class:
        spec["priorityClassName"] = s.priority_class
    return spec


def _policies(pairs: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """Admission's (event, action) pairs as the Job writes them (`exitCode:<n>` is an exit code)."""
    return [{"exitCode": int(e.split(":", 1)[1]), "action": a} if e.startswith("exitCode:") else {"event": e, "action": a}
            for e, a in pairs]  # fmt: skip


def job_object(cat: Catalog, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict:
    """A Volcano Job with the status its job controller writes: state, counts (zeros left out,
    as the API server prints Volcano's `omitempty` fields), taskStatusCount, version,
    retryCount, a condition per phase it showed, and runningDuration once it was killed."""
    from services.kube import volcano

    ns, name = job["namespace"], job["name"]
    born = cat.jobs.get((ns, name))
    spec = _job_spec(born, job.get("queue") or "default")
    # as the cluster shows it: the log's Failing (pods still being stopped) is Failed, say
    shown = volcano_job_phase(job["phase"], job.get("reason") or "")
    state: dict[str, Any] = {"phase": shown}
    if job.get("reason"):
        state["message"] = job["reason"]
    counts: dict[str, int] = {}
    by_task: dict[str, dict[str, dict[str, int]]] = {}
    for p in pods:
        key = _JOB_COUNTS.get(p["phase"], "unknown")
        counts[key] = counts.get(key, 0) + 1
        task = _task_of(born, p["name"])
        if task is not None and key not in ("terminating", "unknown"):
            phase = by_task.setdefault(task.name, {"phase": {}})["phase"]
            phase[key.capitalize()] = phase.get(key.capitalize(), 0) + 1
    status: dict[str, Any] = {"state": state, **counts}
    if born is not None and born.spec is not None:
        status["minAvailable"] = born.spec.min_available
    if by_task:
        status["taskStatusCount"] = by_task
    retries = int(job.get("retries") or 0)
    if retries:
        status["retryCount"] = retries
    if version := volcano.job_version(shown, retries):
        status["version"] = version
    if born is not None and born.phases:
        status["conditions"] = [{"status": ph, **({"lastTransitionTime": rfc3339(t)} if t else {})}
                                for ph, t in born.phases]  # fmt: skip
        killed = next((t for ph, t in born.phases if ph in volcano.KILLED_PHASES), "")
        if shown in volcano.KILLED_PHASES and killed and born.time:
            status["runningDuration"] = volcano.go_duration(_seconds(killed) - _seconds(born.time))
    own = _own_meta(_named(_documents(born), "Job", name))
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": _meta(name, ns, job_uid(cat, ns, name), born, **own),
            "spec": spec, "status": status}  # fmt: skip


def _own_meta(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The labels and annotations the object's user gave it."""
    meta = doc.get("metadata") if doc is not None else None
    if not isinstance(meta, dict):
        return {}
    return {k: dict(meta[k]) for k in ("labels", "annotations") if isinstance(meta.get(k), dict)}


def _seconds(stamp: str) -> float:
    return datetime.strptime(rfc3339(stamp), RFC3339_SECONDS).replace(tzinfo=UTC).timestamp()


def podgroup_object(cat: Catalog, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict:
    """A job's PodGroup: its Volcano name, owned by the Job (or, implied, by its pod)."""
    ns, name, kind = job["namespace"], job["name"], job.get("kind", "")
    born = cat.jobs.get((ns, name))
    owners = []
    if kind == "Job":
        owners = [{"apiVersion": JOB_API, "kind": "Job", "name": name, "uid": job_uid(cat, ns, name),
                   "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    elif kind == "Pod":
        owners = [{"apiVersion": POD_API, "kind": "Pod", "name": name, "uid": pod_uid(cat, ns, name, name),
                   "controller": True}]  # fmt: skip
    written = _named(_documents(born), "PodGroup", name) if kind == "PodGroup" else None
    spec: dict[str, Any] = {**spec_of(written), "queue": job.get("queue") or "default"}
    if born is not None and born.spec is not None:
        spec["minMember"] = born.spec.min_available
        if born.spec.priority_class:
            spec["priorityClassName"] = born.spec.priority_class
    status: dict[str, Any] = {"phase": job["phase"], **_counts(pods)}
    if job.get("reason"):
        status["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                 "message": job["reason"]}]  # fmt: skip
    uid = _uid(born, f"{ns}/{name}/podgroup")
    return {"apiVersion": SCHEDULING_API, "kind": "PodGroup",
            "metadata": _meta(podgroup_name(cat, job), ns, uid, born, **_own_meta(written), ownerReferences=owners),
            "spec": spec, "status": status}  # fmt: skip


def quantities(values: Mapping[str, int]) -> dict[str, str]:
    """Core units → the quantities a manifest writes (`64`, `256Gi`, `4`): exact, so a printed
    object applied again asks the same."""
    from services.core.workload.quantity import from_units

    return {res: from_units(res, int(v)) for res, v in values.items()}


#: a queue's PodGroup counts, the ones Volcano's queue controller writes into its status and
#: `vcctl queue list` prints
QUEUE_COUNTS = ("inqueue", "pending", "running", "unknown", "completed")
def podgroup_phase(job: Mapping[str, Any]) -> str:
    """The phase the job's PodGroup shows on a cluster, "" while it has none
    (`lifecycle.podgroup_phase_of`, which the cluster's queue statuses count by as well);
    `Unknown` where the report found the running gang cut below its minMember
    (`lifecycle.gang_broken`: the record's `podgroup`)."""
    phase = podgroup_phase_of(str(job.get("phase") or ""), str(job.get("kind") or ""))
    return str(job.get("podgroup") or phase) if phase == "Running" else phase


def queue_counts(jobs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per queue, how many PodGroups are in each phase, as Volcano's queue controller counts
    them (`syncQueue`)."""
    out: dict[str, dict[str, int]] = {}
    for job in jobs:
        phase = podgroup_phase(job)
        if phase:
            counts = out.setdefault(str(job.get("queue") or "default"), dict.fromkeys(QUEUE_COUNTS, 0))
            counts[phase.lower()] += 1
    return out


def queue_object(cat: Catalog, queue: Mapping[str, Any], counts: Mapping[str, int] | None = None) -> dict:
    """The Queue as the API server holds it: every field of its admitted spec (what applying
    it again admits to the same queue), and a status of its state, allocation and PodGroup
    counts (`counts`, `queue_counts`'s; zeros when none is given)."""
    from services.kube import volcano

    name = queue["name"]
    spec_of = cat.queue_specs.get(name)
    annotations: dict[str, str] = {}
    if spec_of is not None:
        written = volcano.queue_object(spec_of)
        spec: dict[str, Any] = written["spec"]
        annotations = dict((written["metadata"] or {}).get("annotations") or {})
    else:  # refused, or from a log without its QueueCreated (compacted): what the record has
        spec = {"weight": queue.get("weight", 1)}
        if queue.get("capability"):
            spec["capability"] = quantities(queue["capability"])
        if queue.get("parent") and name != "root":
            spec["parent"] = queue["parent"]
    status: dict[str, Any] = {"state": queue.get("state", "")}
    if queue.get("allocated"):
        status["allocated"] = quantities(queue["allocated"])
    status.update({k: int((counts or {}).get(k, 0)) for k in QUEUE_COUNTS})
    if queue.get("reason"):
        status["reason"] = queue["reason"]
    meta = _meta(name, None, "", cat.queues.get(name), annotations=annotations)
    return {"apiVersion": SCHEDULING_API, "kind": "Queue", "metadata": meta, "spec": spec, "status": status}


def node_object(cat: Catalog, node: NodeRegistered) -> dict:
    allocatable: dict[str, str] = {"cpu": f"{node.cpu_milli / 1000:g}", "memory": quantities({"memory": node.memory_mib})["memory"],
                                   "pods": str(node.pods)}  # fmt: skip
    for card in node.cards:
        key = f"huawei.com/{card.type}" if card.vendor == "huawei" else "nvidia.com/gpu"
        allocatable[key] = str(int(allocatable.get(key, "0")) + 1)
    meta = _meta(node.node, None, "", cat.nodes.get(node.node), labels=dict(node.labels),
                 annotations=dict(node.annotations))  # fmt: skip
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [{"key": t} for t in node.taints]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec,
            "status": {"capacity": dict(allocatable), "allocatable": allocatable}}  # fmt: skip


def card_object(card: Mapping[str, Any]) -> dict:
    """A card ledger: no Kubernetes kind holds one, so it is Tessera's own."""
    return {"apiVersion": TESSERA_API, "kind": "Card",
            "metadata": {"name": card["uuid"], "labels": {"node": card["node"], "type": card["type"]}},
            "spec": {"node": card["node"], "type": card["type"], "index": card.get("index", 0),
                     "memory": card["memory_total"], "cores": card["cores_total"], "slices": card["slices_total"]},
            "status": {"memoryUsed": card["memory_used"], "coresUsed": card["cores_used"],
                       "slicesUsed": card["slices_used"], **_health_status(card),
                       **({"note": card["note"]} if card.get("note") else {}),
                       # the node's cards of its type pods hold whole by count (no deviceshare)
                       **({"nodeCardsHeldByCount": card["held_by_count"]} if "held_by_count" in card else {})}}  # fmt: skip


def _health_status(card: Mapping[str, Any]) -> dict[str, Any]:
    """`health` (Healthy, Unhealthy, Retired) on every card, a field a program can test; when it
    is not Healthy, why (`healthReason`) and the log event since which (`healthSinceEvent`, its sequence number)."""
    if "health" not in card:  # the report's record of a healthy card carries none
        return {"health": "Healthy"}
    out: dict[str, Any] = {"health": card["health"], "healthSinceEvent": card["health_since"]}
    if card.get("health_reason"):
        out["healthReason"] = card["health_reason"]
    return out


def component_object(c: Mapping[str, Any]) -> dict:
    """What `up` supervises, as `kubectl get componentstatuses` shows the control plane."""
    healthy = c.get("state") in ("ready", "running")
    condition = {"type": "Healthy", "status": "True" if healthy else "False", "message": str(c.get("state", ""))}
    if c.get("last_error"):
        condition["error"] = str(c["last_error"])
    return {"apiVersion": "v1", "kind": "ComponentStatus",
            "metadata": {"name": c["name"], "annotations": {"tessera.io/pid": str(c.get("pid", "")),
                                                            "tessera.io/restarts": str(c.get("restarts", 0))}},
            "conditions": [condition]}  # fmt: skip


def as_list(items: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


# --- label selectors (kubectl -l: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma = AND) ---


class SelectorError(ValueError):
    """A selector kubectl would not parse either."""


def parse_selector(text: str) -> list[tuple[str, str, str]]:
    """(key, op, value) terms; op is `=`, `!=`, `exists` or `!exists`."""
    terms = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            raise SelectorError(f"unable to parse requirement: found empty term in {text!r}")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            op = "!="
        elif "=" in raw:
            key, value = raw.replace("==", "=", 1).split("=", 1)
            op = "="
        elif raw.startswith("!"):
            key, value, op = raw[1:], "", "!exists"
        else:
            key, value, op = raw, "", "exists"
        key, value = key.strip(), value.strip()
        if not key or any(c in key for c in " =!") or any(c in value for c in " =!"):
            raise SelectorError(f"unable to parse requirement: {raw!r}")
        terms.append((key, op, value))
    return terms


def matches(terms: Sequence[tuple[str, str, str]], labels: Mapping[str, str]) -> bool:
    for key, op, value in terms:
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:  # kubectl: a missing key is not equal
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!exists" and key in labels:
            return False
    return True


def now() -> datetime:
    return datetime.now(UTC)
