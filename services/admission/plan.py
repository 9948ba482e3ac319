"""What one `apply` means, decided without I/O: per-object outcomes and the events to append.

The rules are the same `admit` that `tessera simulate` runs, seeded with what the log already
holds (existing queues with their current state, live jobs) so "queue does not exist / is not
Open / is not a leaf" are judged against the running system. Re-applying an identical object is
`unchanged` (nothing written), like `kubectl apply`; a different object under a live name is
refused rather than silently replacing a job that may be running — except the changes Volcano
allows: a Queue's spec (weight, capability, …) is `configured`, a `QueueUpdated` (root
excepted: Volcano's root-queue protection), and a live Job's `minAvailable`,
`tasks[*].replicas` and `priorityClassName` (a PodGroup's minMember, queue and member pods) are
`configured`, a `JobUpdated` (`core.workload.jobupdate`); any other change names the field. A
PriorityClass created after live PodGroups named it gives them its value (`class_created`).
A finished job (Completed, Failed, Terminated, Aborted) is still an object of that name, as a
Volcano Job or a Succeeded Pod stays until deleted: the same object again is `unchanged` and
nothing runs (`jobupdate.finished_edit`); to run it again the user deletes it and applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from contracts import hami
from contracts.api import ACCEPTED, CONFIGURED, KIND_RESOURCES, REJECTED, UNCHANGED, ObjectResult
from contracts.base import Event
from contracts.events import (
    HyperNodeChanged,
    HyperNodeDeleted,
    JobDeleted,
    JobPhaseChanged,
    JobRejected,
    JobSubmitted,
    JobUpdated,
    NamespaceChanged,
    NamespaceDeleted,
    NodeRegistered,
    PlacementProposed,
    PriorityClassCreated,
    QueueCreated,
    QueueDeleted,
    QueueStateChanged,
    QueueUpdated,
    QuotaChanged,
    QuotaDeleted,
    TaskPlacement,
)
from contracts.workloads import JobSpec, QueueSpec
from services.admission.guard import DEFAULT_LIMITS, Limits, ManifestTooComplex, check_manifest
from services.core.retention import FinishedOrder
from services.core.scheduling.snapshot import task_names
from services.core.workload import ManifestError, admit, load_documents
from services.core.workload.admission import PriorityClass, RunningPod
from services.core.workload.cardroom import largest_cards, largest_of
from services.core.workload.devicerequests import DeviceRequestParser
from services.core.workload.jobupdate import (
    OBJECT_UID,
    Unset,
    finished_edit,
    finished_note,
    judge_update,
    same_object,
)
from services.core.workload.limits import DEFAULT_WORKLOAD_LIMITS, WorkloadLimits
from services.core.workload.rejection import Rejection

#: The encoder the log's registry uses (msgspec JSON of the tagged event), to size events.
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class KnownQueue:
    spec: QueueSpec  # as created or last updated
    state: str
    seq: int  # last sequence of the queue's subject


@dataclass(frozen=True, slots=True)
class KnownJob:
    spec: JobSpec
    live: bool  # not terminal, not deleted
    seq: int  # last sequence of the job's subject
    deleted: bool = False  # its JobDeleted is in the log (a restart's sweep does not ask again)
    phase: str = ""  # the terminal phase it ended in ("" while live)


@dataclass
class Known:
    """The admission service's projection: just enough of the log to judge new objects."""

    queues: dict[str, KnownQueue] = field(default_factory=dict)
    jobs: dict[tuple[str, str], KnownJob] = field(default_factory=dict)
    #: refused PodGroups whose pods wait, as last recorded (event, its subject's sequence)
    refused: dict[tuple[str, str], tuple[JobRejected, int]] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    deleted_queues: dict[str, int] = field(default_factory=dict)  # name → last subject sequence
    #: finished jobs (and deleted refused PodGroups), oldest first: beyond `keep` they are
    #: forgotten — a name admission no longer knows is judged by its subject's last sequence
    finished: FinishedOrder[tuple[str, str]] = field(default_factory=FinishedOrder)
    #: the object uid of each job forgotten that way, newest last (at most `ENDED_UIDS`): a
    #: Volcano Job met again before its status says it ended (the job controller writes it
    #: after the log ends it, later under load) is that ended job, not a new one to run again
    ended_uids: dict[tuple[str, str], str] = field(default_factory=dict)
    #: each node's largest card per vendor, as last registered (`cardroom`): a request no card
    #: can hold is refused here
    node_largest: dict[str, dict[str, tuple[int, str]]] = field(default_factory=dict)
    #: namespaces' ResourceQuotas: (namespace, name) → (its last QuotaChanged, or None once
    #: deleted; its subject's last sequence)
    quotas: dict[tuple[str, str], tuple[QuotaChanged | None, int]] = field(default_factory=dict)
    #: each HyperNode's last event (changed or deleted) and its subject's sequence
    hypernodes: dict[str, tuple[HyperNodeChanged | HyperNodeDeleted, int]] = field(default_factory=dict)
    #: each Namespace's last event (its labels, or deleted) and its subject's sequence
    namespaces: dict[str, tuple[NamespaceChanged | NamespaceDeleted, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Write:
    """One event to append; `expected_seq` guards against a concurrent writer of the same name."""

    result: int  # index into Plan.results this write belongs to
    kind: str  # "Queue" | "PriorityClass" | "Job" | "ResourceQuota"
    key: tuple[str, str]
    event: Event
    expected_seq: int | None  # None: follows an earlier write of the same plan on its subject


@dataclass(frozen=True, slots=True)
class Plan:
    results: tuple[ObjectResult, ...] = ()
    writes: tuple[Write, ...] = ()
    error: str = ""


#: kinds without a namespace: a manifest's `metadata.namespace` (or the default) is not theirs
CLUSTER_SCOPED = frozenset({"Queue", "PriorityClass", "HyperNode", "Namespace", "PersistentVolume", "StorageClass"})


def created_only(plan: Plan) -> Plan:
    """`create`'s plan: an object that exists already is refused, as the API server answers a
    POST of a name it holds (409 AlreadyExists), and nothing of it is written — `apply`'s
    plan would change it (`configured`) or leave it (`unchanged`). `tessera queue create` of
    an existing queue replaced its whole spec, capability and reclaimable included."""
    results = list(plan.results)
    refused: set[int] = set()
    for i, r in enumerate(results):
        if r.outcome in (CONFIGURED, UNCHANGED):
            results[i] = already_exists(r)
            refused.add(i)
    return replace(plan, results=tuple(results), writes=tuple(w for w in plan.writes if w.result not in refused))


def already_exists(r: ObjectResult) -> ObjectResult:
    """The API server's 409 AlreadyExists for a create of a name it holds, in kubectl's words."""
    resource = KIND_RESOURCES.get(r.kind, f"{r.kind.lower()}s")
    return msgspec.structs.replace(r, outcome=REJECTED, warnings=(), reasons=(
        f'metadata.name: AlreadyExists: {resource} "{r.name}" already exists (apply or update '
        "changes it)",))  # fmt: skip


class Unsupported(Exception):
    pass


def plan_apply(
    text: str,
    known: Known,
    parser: DeviceRequestParser | None,
    device_names: frozenset[str],
    limits: Limits = DEFAULT_LIMITS,
    workload_limits: WorkloadLimits = DEFAULT_WORKLOAD_LIMITS,
) -> Plan:
    """Never raises for bad input: unreadable text → `Plan.error`, bad objects → rejections.

    `workload_limits.max_event_bytes` is what one appended event may weigh (the connection's
    max_payload less its headers): an object whose event is heavier is rejected with both sizes
    instead of failing at the append with "maximum payload exceeded"."""
    try:
        check_manifest(text, limits)
        docs = load_documents(text)
    except (ManifestTooComplex, ManifestError) as exc:
        return Plan(error=f"manifest not accepted: {exc}")
    except RecursionError:
        return Plan(error=f"manifest not accepted: nesting deeper than {limits.max_depth} levels")
    if not docs:
        return Plan(error="manifest not accepted: no objects in it")
    return plan_documents(docs, known, parser, device_names, workload_limits)


def plan_documents(
    docs: list[dict[str, Any]],
    known: Known,
    parser: DeviceRequestParser | None,
    device_names: frozenset[str],
    workload_limits: WorkloadLimits = DEFAULT_WORKLOAD_LIMITS,
    keep_text: bool = True,
    placed: Mapping[tuple[str, str], Iterable[PlacedPod]] | None = None,
) -> Plan:
    """`plan_apply` for objects already read (a manifest's documents, a watched Pod).
    `keep_text` False: no object text in JobSubmitted — objects read from an API server, where
    `tessera get` prints the server's own; kept, every pod's ~1 KB was read by every service.
    `placed`: the bound pods of Volcano Jobs submitted here (`placed_running`)."""
    declared = _declared(docs, "Queue")
    declared_pcs = _declared(docs, "PriorityClass")
    seed = {
        name: msgspec.structs.replace(q.spec, state=q.state)
        for name, q in known.queues.items()
        if name not in declared
    }
    pcs = {n: pc for n, pc in known.priority_classes.items() if n not in declared_pcs}
    try:
        largest = largest_of(known.node_largest.values())
        workload = admit(docs, parser, device_names, existing_queues=seed, existing_priority_classes=pcs,
                         limits=workload_limits, largest=largest, live_jobs=_Live(known),
                         namespace_queues=_NamespaceQueues(known))  # fmt: skip
    except Exception as exc:  # a rule that trips over a shape we did not foresee
        return Plan(error=f"manifest not accepted: {type(exc).__name__}: {exc}")
    results: list[ObjectResult] = []
    writes: list[Write] = []

    def fits(kind: str, ns: str, name: str, event: Event) -> bool:
        """The event fits in one log message; else the object is refused, naming the limit."""
        size = len(_ENCODER.encode(event))
        if size <= workload_limits.max_event_bytes:
            return True
        results.append(_result(kind, ns, name, REJECTED, (
            f"metadata.name: Too long: its {event.type_name()} event would be {size} bytes; a "
            f"log message holds at most {workload_limits.max_event_bytes} (NATS max_payload less "
            "headers): split it into smaller objects",)))  # fmt: skip
        return False

    def cluster_object(kind: str, name: str, had: object, new: object, event: Event, field: str) -> None:
        """Queues and PriorityClasses: created once; the same again is unchanged; another spec
        under the name is refused (there are no update events)."""
        if had is None:
            if not fits(kind, "", name, event):
                return
            writes.append(Write(len(results), kind, ("", name), event, 0))
            results.append(_result(kind, "", name, ACCEPTED))
        elif had == new:
            results.append(_result(kind, "", name, UNCHANGED))
        else:
            results.append(_result(kind, "", name, REJECTED, (
                f"{field}: {kind} already exists with a different spec (updates are not supported)",)))  # fmt: skip

    warned: dict[tuple[str, str, str], list[str]] = {}
    for w in workload.warnings:
        warned.setdefault((w.kind, w.namespace, w.name), []).append(w.line())

    for pc in workload.priority_classes:
        if pc.name in declared_pcs:
            event = PriorityClassCreated(name=pc.name, value=pc.value, global_default=pc.global_default,
                                         preemption_policy=pc.preemption_policy)  # fmt: skip
            had = known.priority_classes.get(pc.name)
            cluster_object("PriorityClass", pc.name, had, pc, event, "value")
            if had is None and results[-1].outcome == ACCEPTED:
                for key, update in class_created(known, pc):
                    if fits("PodGroup", *key, update):
                        writes.append(Write(len(results), "Job", key, update, known.jobs[key].seq))
                        results.append(_result("PodGroup", *key, CONFIGURED, (), (update.reason,)))
    for q in workload.queues:
        if q.name not in declared:
            continue
        have = known.queues.get(q.name)
        if have is None:
            writes.append(Write(len(results), "Queue", ("", q.name), QueueCreated(spec=q),
                                known.deleted_queues.get(q.name, 0)))  # fmt: skip
            results.append(_result("Queue", "", q.name, ACCEPTED))
        elif have.spec == q:
            results.append(_result("Queue", "", q.name, UNCHANGED))
        elif q.name == "root":
            results.append(_result("Queue", "", q.name, REJECTED, (
                "metadata.name: the root queue cannot be changed (root queue protection)",)))  # fmt: skip
        else:
            writes.append(Write(len(results), "Queue", ("", q.name), QueueUpdated(spec=q), have.seq))
            results.append(_result("Queue", "", q.name, CONFIGURED))
    running: dict[tuple[str, str], list[RunningPod]] = {}
    for rp in workload.running:
        running.setdefault((rp.namespace, rp.job), []).append(rp)
    refused_pods: dict[tuple[str, str], list[str]] = {}
    for r in workload.rejections:
        if r.kind == "Pod":
            refused_pods.setdefault((r.namespace, r.name), []).append(r.line())
    for job in workload.jobs:
        key = (job.namespace, job.name)
        kind = job.kind or "Job"
        have_job = known.jobs.get(key)
        warnings = tuple(warned.get((kind, job.namespace, job.name), ()))
        if have_job is not None and not have_job.live and not have_job.deleted and same_object(have_job.spec, job):
            # the ended object still exists: applied again it is an update, never a second run
            refused = finished_edit(have_job.spec, job, workload.unset.get(key, Unset()), have_job.phase)
            if refused:
                results.append(_result(kind, job.namespace, job.name, REJECTED, refused))
            else:
                results.append(_result(kind, job.namespace, job.name, UNCHANGED, (),
                                       (*warnings, finished_note(have_job.spec, have_job.phase))))  # fmt: skip
            continue
        if have_job is not None and have_job.live:
            change = judge_update(have_job.spec, job, workload.unset.get(key, Unset()))
            if kind == "PodGroup" and (kept := _refused_members(have_job.spec, refused_pods)):
                results.append(_result(kind, job.namespace, job.name, REJECTED, kept))
            elif change.refusals:
                results.append(_result(kind, job.namespace, job.name, REJECTED, change.refusals))
            elif change.spec is None:
                results.append(_result(kind, job.namespace, job.name, UNCHANGED, (), warnings))
            else:
                event = JobUpdated(namespace=job.namespace, name=job.name, spec=change.spec,
                                   reason=change.what)  # fmt: skip
                if fits(kind, job.namespace, job.name, event):
                    writes.append(Write(len(results), "Job", key, event, have_job.seq))
                    results.append(_result(kind, job.namespace, job.name, CONFIGURED, (), warnings))
            continue
        manifest = workload.manifests.get(key, "") if keep_text else ""
        seq = have_job.seq if have_job else known.refused.get(key, (None, 0))[1]
        event = JobSubmitted(spec=job, manifest=manifest, warnings=warnings)
        if manifest and len(_ENCODER.encode(event)) > workload_limits.max_event_bytes:
            event = JobSubmitted(spec=job, warnings=warnings)  # the object text is for `get`: spared
        if not fits(kind, job.namespace, job.name, event):
            continue
        writes.append(Write(len(results), "Job", key, event, seq))
        if kind == "Job" and key not in running and (bound := placed_running(job, (placed or {}).get(key, ()))):
            running[key] = bound  # a Volcano Job whose pods another log placed
        if key in running:  # already runs: book it where it is (the allocator resolves slices)
            writes.append(Write(len(results), "Job", key, existing_placement(job, running[key]), None))
        results.append(_result(kind, job.namespace, job.name, ACCEPTED, (), warnings))
    for quota in workload.quotas:  # spec.hard; a change is `configured`, as kubectl apply says
        key = (quota.namespace, quota.name)
        had, seq = known.quotas.get(key, (None, 0))
        if had == quota:
            results.append(_result("ResourceQuota", quota.namespace, quota.name, UNCHANGED))
            continue
        writes.append(Write(len(results), "ResourceQuota", key, quota, seq))
        results.append(_result("ResourceQuota", quota.namespace, quota.name,
                               ACCEPTED if had is None else CONFIGURED))  # fmt: skip
    # a HyperNode's whole object, a Namespace's labels: each time, and a change replaces it
    cluster_objects = (("HyperNode", workload.hypernodes, known.hypernodes, HyperNodeChanged),
                       ("Namespace", workload.namespaces, known.namespaces, NamespaceChanged))  # fmt: skip
    for kind, objects, seen, changed in cluster_objects:
        for obj in objects:
            last = seen.get(obj.name)
            if last is not None and last[0] == obj:
                results.append(_result(kind, "", obj.name, UNCHANGED))
            elif fits(kind, "", obj.name, obj):
                writes.append(Write(len(results), kind, ("", obj.name), obj, last[1] if last else 0))
                had = last is not None and isinstance(last[0], changed)
                results.append(_result(kind, "", obj.name, CONFIGURED if had else ACCEPTED))
    for obj in workload.storage:  # accepted by simulate only: never silently dropped here
        kind = STORAGE_KIND_OF[type(obj).__name__]
        ns = getattr(obj, "namespace", "")
        results.append(_result(kind, ns, obj.name, REJECTED, (
            f"kind: a {kind} is the cluster's: on a cluster Tessera reads it from the API server; "
            "tessera simulate takes it in a workload",)))  # fmt: skip
    for result in rejected_objects(workload.rejections):
        key = (result.namespace, result.name)
        pods = workload.waiting.get(key, ()) if result.kind == "PodGroup" else ()
        have_job = known.jobs.get(key)
        if pods and not (have_job and have_job.live):
            # The pods exist and wait, unbound, for the group (`get pods` lists them): the log
            # records the refusal with them, once per distinct refusal.
            reasons = tuple(f"{result.kind}: {r}" for r in result.reasons)  # the engine's form
            event = JobRejected(namespace=key[0], name=key[1], reasons=reasons, pods=pods)
            result = msgspec.structs.replace(result, warnings=(
                f"pods {', '.join(pods)} wait (unbound) for this PodGroup",))  # fmt: skip
            last = known.refused.get(key)
            small = len(_ENCODER.encode(event)) <= workload_limits.max_event_bytes
            if (last is None or last[0] != event) and small:
                seq = have_job.seq if have_job else (last[1] if last else 0)
                writes.append(Write(len(results), "Job", key, event, seq))
        results.append(result)
    return Plan(tuple(results), tuple(writes))


def class_created(known: Known, pc: PriorityClass) -> list[tuple[tuple[str, str], JobUpdated]]:
    """The live PodGroups that name the PriorityClass just created, admitted without it (at the
    default priority): each takes its value now, as Volcano's scheduler cache gives a job its
    class's value at the first session after the class appears. Nothing else would touch them:
    an operator updates its PodGroup only when its own spec changes, so the job kept the
    default priority for its whole run."""
    out: list[tuple[tuple[str, str], JobUpdated]] = []
    for key, job in known.jobs.items():
        spec = job.spec
        if job.live and spec.kind == "PodGroup" and spec.priority_class == pc.name and spec.priority != pc.value:
            reason = (f"priority {spec.priority} → {pc.value}: its PriorityClass {pc.name} was created "
                      "(admitted without it, at the default priority)")  # fmt: skip
            new = msgspec.structs.replace(spec, priority=pc.value)
            out.append((key, JobUpdated(namespace=key[0], name=key[1], spec=new, reason=reason)))
    return out


@dataclass(frozen=True, slots=True)
class PlacedPod:
    """A Volcano Job's pod that is bound to a node before the Job is in the log (its log lost:
    `tessera up --fresh`, a migration from Volcano): the job controller made it and another
    log placed it. `ended`: it Succeeded or Failed there, and holds nothing."""

    pod: str
    node: str
    annotations: Mapping[str, str]
    ended: bool = False


def placed_running(job: JobSpec, placed: Iterable[PlacedPod]) -> list[RunningPod]:
    """A Volcano Job's bound pods as its `existing` placement (`existing_placement`): each where
    it is bound — a live one on the cards HAMi's annotations name (else its task's requests,
    fitted on that node), an ended one on no card at all (its end is then reported as for any
    placed pod). Submitted without them, the job was placed as new work on other cards: its
    pods, bound by the lost placement, were never bound for that one, and the job stayed Bound
    holding those cards for good, while the cards its running pods used were free in the ledger
    (rev-sre 1b). Pods of other names (another replica count) are not the job's tasks."""
    tasks = {pod: t for pod, _role, _i, t in task_names(job)}
    out = []
    for p in placed:
        task = tasks.get(p.pod)
        if task is None:
            continue
        annotations, devices = ({}, ()) if p.ended else (p.annotations, task.devices)
        out.append(RunningPod(job.namespace, job.name, p.pod, p.node, annotations, devices, task.init_containers))
    return out


def existing_placement(job: JobSpec, running: list[RunningPod]) -> PlacementProposed:
    """An `existing` proposal for pods that already run: the cards HAMi's `-devices-allocated`
    annotations name (memory and cores; the allocator reads the kind off the card), else the
    pods' device requests for the allocator to fit on the node's free cards."""
    placements = []
    for rp in running:
        slices = hami.annotated_slices(rp.node, rp.annotations, rp.init_containers)
        placements.append(TaskPlacement(task=rp.pod, node=rp.node, slices=slices,
                                        fit=() if slices else rp.devices))  # fmt: skip
    return PlacementProposed(namespace=job.namespace, name=job.name, based_on=0,
                             placements=tuple(placements), existing=True)  # fmt: skip


def _declared(docs: list[dict[str, Any]], kind: str) -> set[str]:
    """Names of the objects of `kind` the documents declare (replacing what the log has)."""
    return {
        str(d["metadata"].get("name") or "")
        for d in docs
        if d.get("kind") == kind and isinstance(d.get("metadata"), dict)
    }


#: the storage kinds by the event that carries them (services/core/workload/storage.py)
STORAGE_KIND_OF = {"ClaimChanged": "PersistentVolumeClaim", "VolumeChanged": "PersistentVolume",
                   "StorageClassChanged": "StorageClass"}  # fmt: skip


def _result(
    kind: str, ns: str, name: str, outcome: str, reasons: tuple[str, ...] = (),
    warnings: tuple[str, ...] = (),
) -> ObjectResult:  # fmt: skip
    return ObjectResult(kind=kind, name=name, namespace=ns, outcome=outcome, reasons=reasons,
                        warnings=warnings)  # fmt: skip


class _Live:
    """The live jobs' names, asked of `Known` as admission asks (a set of them per batch would
    be a walk over every job)."""

    def __init__(self, known: Known) -> None:
        self.known = known

    def __contains__(self, key: object) -> bool:
        job = self.known.jobs.get(key)  # type: ignore[call-overload]
        return job is not None and job.live


class _NamespaceQueues(Mapping[str, str]):
    """namespace → its queue annotation (`NamespaceChanged.queue`), asked of `Known` as
    admission asks (a dict of them per batch would be a walk over every namespace)."""

    def __init__(self, known: Known) -> None:
        self.known = known

    def __getitem__(self, name: str) -> str:
        last = self.known.namespaces.get(name)
        if last is None or not isinstance(last[0], NamespaceChanged) or not last[0].queue:
            raise KeyError(name)
        return last[0].queue

    def __iter__(self) -> Iterator[str]:
        return (n for n in self.known.namespaces if n in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _refused_members(live: JobSpec, refused_pods: Mapping[tuple[str, str], list[str]]) -> tuple[str, ...]:
    """Why a live PodGroup's change is not taken: pods among its tasks that were refused this
    time (a rule added by an upgrade, an annotation edited since). Taken without them, the
    change would be a scale-down — the pods evicted, though they run as admitted; nothing
    changes instead, and the refusal names each pod's rules."""
    return tuple(f"pod {pod} is one of the running PodGroup's pods and was refused "
                 f"({'; '.join(refused_pods[(live.namespace, pod)])}): the PodGroup's change "
                 "is not taken" for task in live.tasks for pod in task.pod_names
                 if (live.namespace, pod) in refused_pods)  # fmt: skip


def rejected_objects(rejections: Iterable[Rejection]) -> list[ObjectResult]:
    """One result per rejected object, carrying every rule it broke, in first-seen order."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in rejections:
        ns = "" if r.kind in CLUSTER_SCOPED else r.namespace  # `queue/default/q` named no object
        grouped.setdefault((r.kind, ns, r.name), []).append(r.line())
    return [_result(k, ns, n, REJECTED, tuple(reasons)) for (k, ns, n), reasons in grouped.items()]


def fold_known(known: Known, seq: int, subject_kind: str, event: Event) -> None:
    """Keep `Known` current from one log event (queue, job, node and quota subjects)."""
    match event:
        case NodeRegistered():
            known.node_largest[event.node] = largest_cards(event.cards)
        case QuotaChanged():
            known.quotas[(event.namespace, event.name)] = (event, seq)
        case QuotaDeleted():
            known.quotas[(event.namespace, event.name)] = (None, seq)
        case PriorityClassCreated():
            known.priority_classes.setdefault(event.name, PriorityClass(
                event.name, event.value, event.global_default, event.preemption_policy))  # fmt: skip
        case QueueCreated():
            if event.spec.name not in known.queues:
                known.queues[event.spec.name] = KnownQueue(event.spec, event.spec.state, seq)
                known.deleted_queues.pop(event.spec.name, None)
        case QueueStateChanged():
            q = known.queues.get(event.queue)
            if q is not None:
                known.queues[event.queue] = replace(q, state=event.state, seq=seq)
        case QueueUpdated():
            q = known.queues.get(event.spec.name)
            if q is not None:
                known.queues[event.spec.name] = replace(q, spec=event.spec, seq=seq)
        case HyperNodeChanged() | HyperNodeDeleted():
            known.hypernodes[event.name] = (event, seq)
        case NamespaceChanged() | NamespaceDeleted():
            known.namespaces[event.name] = (event, seq)
        case QueueDeleted():
            known.queues.pop(event.queue, None)
            known.deleted_queues[event.queue] = seq
        case JobSubmitted():
            known.jobs[(event.spec.namespace, event.spec.name)] = KnownJob(event.spec, True, seq)
            known.ended_uids.pop((event.spec.namespace, event.spec.name), None)
            known.refused.pop((event.spec.namespace, event.spec.name), None)
            known.finished.revived((event.spec.namespace, event.spec.name))
        case JobUpdated():
            j = known.jobs.get((event.namespace, event.name))
            if j is not None:
                known.jobs[(event.namespace, event.name)] = replace(j, spec=event.spec, seq=seq)
        case JobRejected():
            known.refused[(event.namespace, event.name)] = (event, seq)
            _job_seq(known, (event.namespace, event.name), seq, live=None)
            known.finished.revived((event.namespace, event.name))  # its pods wait (again)
        case JobDeleted():
            known.ended_uids.pop((event.namespace, event.name), None)  # (the object is gone)
            _job_seq(known, (event.namespace, event.name), seq, live=False, deleted=True)
            _finished(known, (event.namespace, event.name))
        case JobPhaseChanged() if event.phase in TERMINAL:
            _job_seq(known, (event.namespace, event.name), seq, live=False, phase=event.phase)
            _finished(known, (event.namespace, event.name))
        case _:
            key = _job_key(event)
            if subject_kind == "job" and key is not None:
                _job_seq(known, key, seq, live=None)


TERMINAL = frozenset({"Completed", "Failed", "Aborted", "Terminated"})


def _job_key(event: Event) -> tuple[str, str] | None:
    ns = getattr(event, "namespace", None)
    name = getattr(event, "name", None)
    return (ns, name) if isinstance(ns, str) and isinstance(name, str) else None


#: forgotten jobs whose object uid is still held (≈ 100 bytes each): many times any lag
#: between the log ending a job and its Job object's status saying so
ENDED_UIDS = 10_000


def _finished(known: Known, key: tuple[str, str]) -> None:
    """A job ended (or a refused PodGroup was deleted): remembered among the `keep` newest."""
    if key not in known.jobs and key not in known.refused:
        return
    for old in known.finished.finished(key):
        job = known.jobs.pop(old, None)
        known.refused.pop(old, None)
        if job is not None and not job.deleted and (uid := job.spec.annotations.get(OBJECT_UID)):
            known.ended_uids.pop(old, None)
            known.ended_uids[old] = uid
            if len(known.ended_uids) > ENDED_UIDS:
                del known.ended_uids[next(iter(known.ended_uids))]


def _job_seq(known: Known, key: tuple[str, str], seq: int, live: bool | None, deleted: bool = False,
             phase: str = "") -> None:  # fmt: skip
    j = known.jobs.get(key)
    if j is not None:
        known.jobs[key] = replace(j, seq=seq, live=j.live if live is None else live, deleted=j.deleted or deleted,
                                  phase=phase or ("" if live else j.phase))  # fmt: skip

