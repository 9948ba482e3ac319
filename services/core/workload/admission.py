"""Admission: manifests → normalized `QueueSpec`/`JobSpec` records, or precise rejections.

Rules applied (each rejection names field path, value and rule):
- Kubernetes strict field validation: an unknown field in a known kind is an error.
- Volcano mutating webhooks' defaults: queue weight 0→1, reclaimable nil→true, parent ""→root;
  job queue "default", maxRetry 3, task names `default<i>`, task minAvailable = replicas,
  job minAvailable = Σ task minAvailable.
- Volcano validating webhooks: ≥1 task, unique task names, task minAvailable ≤ replicas,
  Σ replicas ≥ minAvailable, policy shape (no `*` with other events, not event+exitCode,
  exitCode ≠ 0), queue exists / is Open / is not `root` / is a leaf.
- Volcano's podgroup controller: a Pod without `scheduling.k8s.io/group-name` gets an implied
  PodGroup with minMember 1, its priorityClass and the `scheduling.volcano.sh/queue-name` queue.
- Volcano's PodGroup mutating webhook: a PodGroup created without `spec.queue` or with `default`
  (the implied one of a plain pod included) goes to the queue its namespace's
  `scheduling.volcano.sh/queue-name` annotation names, else `default` (a Volcano Job's own
  webhook writes `default`: no lookup). On a cluster the CRD's default writes `default` into a
  PodGroup made without a queue before any webhook or reader sees it (`group_queue`).
- A PodGroup's `priorityClassName` naming no PriorityClass is admitted at the default priority
  with a warning (Volcano's PodGroup webhook does not check it; its scheduler takes the default
  priority until the class exists); a pod's is refused (the API server's Priority admission).
- HAMi admission: device requests go through the device layer's parser
  (`devicerequests.DeviceRequestParser`), whose errors become rejections.
A Pod with `spec.nodeName` and `status.phase: Running` is a pre-existing placement, not refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.events import HyperNodeChanged, NamespaceChanged, QuotaChanged
from contracts.workloads import (
    DeviceRequest,
    JobSpec,
    LabelRequirement,
    NetworkTopology,
    NodeGroupAffinity,
    PreferredNodeTerm,
    QueueSpec,
    TaskSpec,
    Toleration,
)
from services.core.devices.policies import (
    CARD_POLICY_ANNOTATION,
    NODE_POLICY_ANNOTATION,
    card_policy_problem,
    node_policy_problem,
)
from services.core.devices.requests import unknown_device_names
from services.core.godurations import go_duration
from services.core.joblabels import TASK_INDEX, job_task_labels
from services.core.scheduling.resources import pod_request, sidecar
from services.core.scheduling.snapshot import COOLDOWN_TIME
from services.core.workload import dependson, fields, names
from services.core.workload.cardroom import Largest, beyond_every_card
from services.core.workload.devicerequests import DeviceRequestParser, asked_count, uncounted
from services.core.workload.gatenames import scheduling_gates
from services.core.workload.hostports import host_ports
from services.core.workload.hypernodes import HYPERNODE_KINDS, hypernode_event, network_topology
from services.core.workload.initdevices import covered_inits, with_init_devices
from services.core.workload.jobplugins import check_plugins, dependency_problems
from services.core.workload.jobupdate import DEFAULT_MAX_RETRY, OBJECT_UID, Unset, min_resources
from services.core.workload.jobvolumes import volume_problems, with_job_volumes
from services.core.workload.limits import DEFAULT_WORKLOAD_LIMITS, WorkloadLimits
from services.core.workload.namespaces import NAMESPACE_KINDS, namespace_event
from services.core.workload.pinning import mistyped_pins, unread_index_pins
from services.core.workload.podaffinity import pod_affinity
from services.core.workload.podresources import pod_level
from services.core.workload.printed import (
    implied_group,
    manifest_text,
    without_devices,
    without_group,
)
from services.core.workload.quantity import QuantityError, to_units
from services.core.workload.quota import QUOTA_KINDS, quota_event
from services.core.workload.rejection import Rejected, Rejection, invalid, required, too_long
from services.core.workload.schedulernames import (
    KUBE_DEFAULT,
    VOLCANO_DEFAULT,
    not_served,
)
from services.core.workload.storage import STORAGE_KINDS, pod_claims, storage_event
from services.core.workload.storage import Storage as StorageEvent
from services.core.workload.topologyspread import spread_constraints

ARRIVE_AT = "tessera.io/arrive-at"
DURATION = "tessera.io/duration"
EXIT_CODE = "tessera.io/exit-code"
GROUP_NAME = "scheduling.k8s.io/group-name"
GROUP_NAME_VOLCANO = "scheduling.volcano.sh/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"
TASK_SPEC = "volcano.sh/task-spec"
#: why a Volcano Job's template may not name `volcano.sh/task-index` in matchLabelKeys /
#: mismatchLabelKeys: the API server would merge each pod's own index, but Tessera reads one
#: selector for all of a task's pods (and its selectors see no pod's index)
PER_POD_INDEX = ("differs from pod to pod of the task (the job controller numbers them); Tessera "
                 "reads one selector for all of a task's pods, so it cannot merge this key: select "
                 "by a label of the template instead")
PREEMPTABLE = "volcano.sh/preemptable"
#: a Queue annotation Volcano read before `spec.dequeueStrategy` (an invalid one: the default)
DEQUEUE_STRATEGY = "volcano.sh/dequeue-strategy"
TASK_PRIORITY = "volcano.sh/task-priority"

#: the PriorityClasses every API server has, with their values
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}

POD_GROUP_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_STATES = ("Open", "Closing", "Closed")
#: the events and actions a policy may name (Volcano's webhook `policyEventMap` /
#: `policyActionMap`, those allowed external use): the controller's own events (OutOfSync,
#: CommandIssued, PodRunning) and the bus's other actions (SyncJob, EnqueueJob, the queue
#: commands; RestartPartition is not in the map) are refused
JOB_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted",
              "TaskFailed", "JobUpdated")  # fmt: skip
#: the events Tessera raises for lifecycle policies (the queue service's `pod_failed` and
#: `task_completed`); a policy on another one is accepted, as Volcano's webhook accepts it,
#: with a warning that it never runs
RAISED_EVENTS = frozenset({"*", "PodFailed", "PodEvicted", "TaskCompleted"})
JOB_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob",
               "CompleteJob", "ResumeJob")  # fmt: skip
#: the events and actions Tessera accepted before it judged policies by Volcano's maps: a Job
#: admitted then (and so running) is judged again by each restart of admission and each relist
#: of the cluster, and is kept with a warning (`Admission._newer_rule`), not refused
FORMER_EVENTS = frozenset({"PodRunning", "OutOfSync", "CommandIssued"})
FORMER_ACTIONS = frozenset({"RestartPartition", "SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"})
#: why a rule newer than a live object warns it instead of refusing it
ADMITTED_BEFORE = "the job was admitted before this rule and runs on as admitted; a new job is refused"
#: the webhook's "valid events are %v" / "valid actions are %v" (Go's slice print)
VALID_EVENTS = f"valid events are [{' '.join(JOB_EVENTS)}]"
VALID_ACTIONS = f"valid actions are [{' '.join(JOB_ACTIONS)}]"
KINDS = {
    ("scheduling.volcano.sh/v1beta1", "Queue"): fields.QUEUE,
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): fields.PODGROUP,
    ("batch.volcano.sh/v1alpha1", "Job"): fields.JOB,
    ("v1", "Pod"): fields.POD,
    ("scheduling.k8s.io/v1", "PriorityClass"): fields.PRIORITY_CLASS,
    **STORAGE_KINDS,  # PersistentVolumeClaim, PersistentVolume, StorageClass (storage.py)
    **QUOTA_KINDS,  # ResourceQuota (quota.py)
    **HYPERNODE_KINDS,  # topology.volcano.sh HyperNode (hypernodes.py)
    **NAMESPACE_KINDS,  # Namespace: its labels (namespaces.py)
}


#: a pod naming a PodGroup given nowhere. Volcano's podgroup controller skips a pod that names
#: a group (it makes `podgroup-<owner uid>` only for pods naming none), and its scheduler
#: ignores pods of a group it does not have: they wait for the group's author. Its guide "how to
#: schedule multiple single pods with podgroup" shows the controller making the group from the
#: pods' `scheduling.volcano.sh/group-min-resources`, the change of volcano-sh/volcano#2358, which
#: was closed unmerged; a user following it is told what to write instead
MISSING_GROUP = ("PodGroup not found: Volcano's scheduler ignores pods of a missing group, and its podgroup "
                 "controller makes none for a pod that names one (the multiple-single-pods guide shows "
                 "volcano-sh/volcano#2358, never merged): declare the PodGroup with them, e.g. minMember: 1 "
                 "and as minResources the largest of the pods' scheduling.volcano.sh/group-min-resources")  # fmt: skip

#: the apiVersion Tessera reads each kind in (one each)
SERVED = {kind: api for api, kind in KINDS}
#: kinds Tessera runs only from a cluster's API server, never from `tessera apply` / `simulate`:
#: why, and where they do run. "did you mean Job?" told a user trying Volcano's
#: `example/jobflow/` locally that flows were not supported, which the README says they are
_FLOWS_RUN = ("JobFlows and JobTemplates run only on a cluster: applied there with kubectl, the queue "
              "service runs them as Volcano's jobflow controller does; `tessera apply` and `simulate` "
              "run Jobs, not flows of them")  # fmt: skip
CLUSTER_ONLY_KINDS = {"JobFlow": _FLOWS_RUN, "JobTemplate": _FLOWS_RUN}


def unserved(api: str, kind: str) -> tuple[str, None, str]:
    """(path, value, rule) refusing an apiVersion/kind Tessera does not read, in kubectl's
    words (`no matches for kind "Job" in version "batch.volcano.sh/v1"`) and saying what to
    write: a known kind in another version is named with the version Tessera reads (the one
    Volcano's CRDs serve today: a version from older docs, `v1alpha2` Queues, kube-batch's
    `scheduling.incubator.k8s.io` were "unsupported kind", the version to use unsaid); an
    unknown kind with the kinds it could be."""
    if not kind:
        return "kind", None, "Required value: Object 'Kind' is missing"
    if kind in CLUSTER_ONLY_KINDS:
        return "kind", None, f'no matches for kind "{kind}" in version "{api}": {CLUSTER_ONLY_KINDS[kind]}'
    served = SERVED.get(kind) or next((a for k, a in SERVED.items() if k.lower() == kind.lower()), None)
    if served is None:
        near = difflib.get_close_matches(kind, sorted(SERVED), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else f"; Tessera reads {', '.join(sorted(SERVED))}"
        return "kind", None, f'no matches for kind "{kind}" in version "{api}"{hint}'
    right = next(k for k in SERVED if SERVED[k] == served and k.lower() == kind.lower())
    if right != kind:  # kinds are case-sensitive
        return "kind", None, f'no matches for kind "{kind}" in version "{api}"; did you mean {right}?'
    group = api.rpartition("/")[0]
    if not api:
        why = f"apiVersion is not set; {kind} is {served}"
    elif group == served.rpartition("/")[0]:
        why = f"Volcano's CRDs serve {kind} only as {served}, the version Tessera reads"
    elif group == "scheduling.incubator.k8s.io":
        why = f"that is kube-batch's API, which Volcano replaced: {kind} is {served}"
    elif (group, kind) == ("batch", "Job"):
        why = f"batch/v1 is Kubernetes' own Job, which Tessera does not run; Volcano's Job is {served}"
    else:
        why = f"Tessera reads {kind} as {served}"
    return "apiVersion", None, f'no matches for kind "{kind}" in version "{api}": {why}'


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pre-existing placement: a Pod already Running on `node` (its cards from annotations)."""

    namespace: str
    job: str
    pod: str
    node: str
    annotations: Mapping[str, str]
    devices: tuple[DeviceRequest, ...]
    init_containers: int = 0  # their slots come first in HAMi's annotations


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True)
class Workload:
    """What admission concluded for one set of manifests, in document order."""

    queues: tuple[QueueSpec, ...] = ()
    jobs: tuple[JobSpec, ...] = ()
    running: tuple[RunningPod, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    #: accepted objects whose values were changed (HAMi's clamps): said, not refused
    warnings: tuple[Rejection, ...] = ()
    #: refused PodGroups → their valid pods, which exist and wait (unbound) for the group, as
    #: on a cluster where the webhook refuses the PodGroup but not the pods naming it
    waiting: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    #: each admitted job's object text (`printed.manifest_text`): what `tessera get -o yaml`
    #: prints its whole spec from
    manifests: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: the claims, volumes and storage classes among the documents, as the log holds them
    storage: tuple[StorageEvent, ...] = ()
    #: the namespaces' ResourceQuotas among the documents (their spec.hard), as the log holds them
    quotas: tuple[QuotaChanged, ...] = ()
    #: the HyperNodes among the documents, as the log holds them
    hypernodes: tuple[HyperNodeChanged, ...] = ()
    #: the Namespaces among the documents (their labels), as the log holds them
    namespaces: tuple[NamespaceChanged, ...] = ()
    #: Jobs → the minAvailable values their object leaves to the mutating webhook: an update
    #: keeps the live job's (`jobupdate.judge_update`)
    unset: Mapping[tuple[str, str], Unset] = field(default_factory=dict)


def _no_devices(
    containers: Sequence[Mapping[str, Any]], annotations: Mapping[str, str], path: str,
    field: str = "containers",
) -> tuple[tuple[DeviceRequest, ...], tuple[Any, ...]]:
    return (), ()


#: fields of Volcano's Job tasks and PodGroups that Tessera accepts and does not act on: what a
#: pod placed without them lacks
NOT_ACTED_ON = {
    "topologyPolicy": "Tessera does not align a pod's CPUs and devices to one NUMA node (Volcano's "
                      "numaaware plugin): its pods are placed without it",
    "partitionPolicy": "Tessera does not place a task's pods in partitions: they are placed as one gang",
    "subGroupPolicy": "Tessera does not place a PodGroup's pods in sub-groups: they are placed as one gang",
    "maxRetry": "Tessera does not count a pod's container restarts (Volcano raises TaskFailed when "
                "they reach a task's maxRetry): the job's spec.maxRetry counts its restarts",
}


def group_queue(named: str, namespace_queue: str) -> tuple[str, bool]:
    """The queue of a PodGroup whose `spec.queue` is `named` (a plain pod's implied group: its
    `scheduling.volcano.sh/queue-name`) made in a namespace whose annotation names
    `namespace_queue` (`default` without one), and whether it is the namespace's rather than the
    object's own. Volcano's PodGroup mutating webhook (`createQueuePatch`, at create) replaces
    `default` with the namespace's annotation: on an API server the CRD's structural default
    has already written `default` into a PodGroup made without a queue (the implied group gets
    it so too), so `default` and none are the same there, and both take the namespace's.
    Without the annotation `default` stays the object's own (an edit moving a group to it
    moves it)."""
    if not named or (named == DEFAULT_QUEUE and namespace_queue != DEFAULT_QUEUE):
        return namespace_queue, True
    return named, False


def _not_acted_on(ctx: _Ctx, path: str, spec: Mapping[str, Any]) -> None:
    """A warning for each field set that Tessera accepts but does not act on (a Job admitted
    with it would otherwise run without what it asks, silently)."""
    for key, words in NOT_ACTED_ON.items():
        value = spec.get(key)
        if value in (None, "", "none", [], {}):
            continue
        ctx.warn(f"{path}.{key}", value if isinstance(value, str) else "", words)


_HYPERNODES = ("describe each super-pod as a HyperNode and give the Volcano Job (or its PodGroup) "
               "spec.networkTopology {mode: hard, highestTierAllowed: <the super-pods' tier>}: its pods are "
               "then placed inside one (README \"Network topology (HyperNodes)\")")
#: MindCluster's keys (ascend-for-volcano, Ascend's device plugin and operator) on a Job's or a
#: pod's metadata that place it or mark it for Huawei's components: (labels|annotations, key) →
#: what they do under MindCluster and what to use in Tessera, which reads none of them. A
#: MindCluster user's manifests were taken without a word and their jobs scattered (a 910C
#: operator's review: a Job of 2 × 16 dies with `sp-block: "32"` split over two super-pods).
MINDCLUSTER_KEYS = {
    ("annotations", "sp-block"): (
        "ascend-for-volcano's logical super-pod size: it keeps the job's pods inside one physical "
        f"super-pod (Atlas 900 A3 SuperPoD). Tessera does not read it: {_HYPERNODES}"),
    ("annotations", "huawei.com/schedule_policy"): (
        "ascend-for-volcano's policy for the hardware form (chip4-node8, chip2-node16-sp, …). Tessera "
        "does not read it: a pod's cards come from the resources it asks (huawei.com/<model>), taken by "
        "the cards' topology (HCCS rings, 910C modules); for super-pods, " + _HYPERNODES),
    ("labels", "fault-scheduling"): (
        "ascend-for-volcano's rescheduling of a job whose chip or node fails (grace, force). Tessera "
        "does not read it: no job is moved off a failed chip for it; a Volcano Job's spec.policies "
        "(PodFailed or PodEvicted → RestartJob) act when its pods fail, and a card reported unhealthy "
        "takes no new pods"),
    ("labels", "ring-controller.atlas"): (
        "MindCluster's marker of an Ascend job: ascend-for-volcano picks its chip handler by it, and "
        "Ascend's device plugin and operator build the rank table for what carries it (they still do "
        "beside Tessera). Tessera does not place by it: a pod's cards come from the resources it asks "
        "(huawei.com/<model>); a Volcano Job's rings-config ConfigMap comes from its ringsconfigmap "
        "plugin (spec.plugins)"),
    ("labels", "vnpu-level"): (
        "MindCluster's choice of a vNPU template for huawei.com/npu-core (low: the smallest, high: "
        "the largest that fits). Tessera does not read it: a vNPU's template is the one its "
        "huawei.com/<model>-memory rounds up to, as HAMi chooses it"),
    ("labels", "vnpu-dvpp"): (
        "MindCluster's choice of a vNPU template with or without DVPP (media processing) for "
        "huawei.com/npu-core. Tessera does not read it: a vNPU's template is the one its "
        "huawei.com/<model>-memory rounds up to, as HAMi chooses it"),
}  # fmt: skip


def _mindcluster_keys(ctx: _Ctx, path: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> None:
    """A warning for each of MindCluster's keys (`MINDCLUSTER_KEYS`) in this metadata."""
    for (where, key), words in MINDCLUSTER_KEYS.items():
        values = labels if where == "labels" else annotations
        if key in values:
            ctx.warn(f"{path}.metadata.{where}[{key}]", values[key], words)


class _Ctx:
    """Per-object accumulator: collects rejections so one object reports all its problems."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        self.errors: list[Rejection] = []
        self.warnings: list[Rejection] = []
        #: fields refused as no quantity: the device layer, reading the same limits again, does
        #: not refuse them a second time in other words
        self.unreadable: set[str] = set()

    def reject(self, path: str, value: object, rule: str) -> None:
        shown = "" if value is None else (value if isinstance(value, str) else repr(value))
        path = path.removeprefix(".")  # a plain pod's template path is "" (".spec…")
        self.errors.append(Rejection(self.kind, self.namespace, self.name, path, shown, rule))

    def warn(self, path: str, value: str, rule: str) -> None:
        """The object is accepted, but a value was changed (e.g. cores clamped to 100 %)."""
        self.warnings.append(Rejection(self.kind, self.namespace, self.name,
                                       path.removeprefix("."), value, rule))  # fmt: skip

    def invalid(self, path: str, value: object, detail: str) -> None:
        """A rule the API server checks, in its words: `<path>: Invalid value: "<v>": <detail>`."""
        self.reject(path, None, invalid(value, detail))

    def required(self, path: str, detail: str = "") -> None:
        self.reject(path, None, required(detail))

    def check(self) -> None:
        if self.errors:
            raise Rejected(self.errors)


#: Kinds whose objects live in a namespace (Queue and PriorityClass are cluster-scoped).
NAMESPACED = frozenset({"Pod", "PodGroup", "Job", "PersistentVolumeClaim", "ResourceQuota"})


def _check_names(ctx: _Ctx, kind: str, doc: Mapping[str, Any]) -> None:
    """The API server's object-name rules: a DNS-1123 subdomain name, a DNS-1123 label
    namespace; Volcano's job webhook also wants the job name to be a qualified name (≤ 63)."""
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    if not name:  # Tessera names nothing itself, so `generateName` alone is not enough
        ctx.required("metadata.name", "name or generateName is required")
        return
    if not isinstance(name, str):
        ctx.invalid("metadata.name", name, "must be a string")
        return
    for err in names.dns1123_subdomain(name):
        ctx.invalid("metadata.name", name, err)
    if kind == "Job" and not ctx.errors and (errs := names.qualified_name(name)):
        ctx.invalid("metadata.name", name,
                    f"create job with name {name} validate failed {names.go_list(errs)}")  # fmt: skip
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if kind in NAMESPACED and namespace is not None:
        if not isinstance(namespace, str):
            ctx.invalid("metadata.namespace", namespace, "must be a string")
        else:
            for err in names.dns1123_label(namespace):
                ctx.invalid("metadata.namespace", namespace, err)


def _cluster_object(doc: Mapping[str, Any], ctx: _Ctx, parse: Callable[[Mapping[str, Any]], tuple[Any, list[tuple[str, str]]]]) -> Any:
    """A HyperNode's or Namespace's event from its parser (hypernodes.py, namespaces.py), its
    problems refused with their paths."""
    event, problems = parse(doc)
    for path, rule in problems:
        ctx.reject(path, None, rule)
    ctx.check()
    assert event is not None
    return event


def _check_annotations(ctx: _Ctx, path: str, meta: object, limit: int) -> None:
    """apimachinery `ValidateAnnotationsSize`: keys + values at most 256 KiB in total."""
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > limit:
        ctx.reject(path, None, too_long(limit))


def _meta(doc: Mapping[str, Any]) -> tuple[str, str, dict[str, str], dict[str, str]]:
    meta = doc.get("metadata") or {}
    if not isinstance(meta, dict):
        meta = {}
    # (a list of labels is refused by `fields.wrong_types`; the object is still named by it)
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
    annotations = {str(k): str(v) for k, v in _mapping(meta.get("annotations")).items()}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or ""), labels, annotations


def _mapping(value: object) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(ctx: _Ctx, path: str, raw: object, default: int, minimum: int | None = 0, below: str = "") -> int:
    """`raw` as an integer (`default` when absent); one under `minimum` is refused with `below`,
    the words of the webhook that refuses it, else "must be >= <minimum>"."""
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        try:
            value = int(str(raw))
        except ValueError:
            ctx.reject(path, raw, "must be an integer")
            return default
    else:
        value = raw
    if minimum is not None and value < minimum:
        ctx.reject(path, raw, below or f"must be >= {minimum}")
    return value


#: Go's `strconv.ParseBool` spellings, which Volcano reads `volcano.sh/preemptable` with
PARSE_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
PARSE_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def _preemptable(ctx: _Ctx, path: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Volcano's `GetPodPreemptable`: the annotation, else the label, read by `strconv.ParseBool`;
    a value it cannot parse is not preemptable (said as a warning, where Volcano logs it), none at
    all is. Read as "anything but false", `"0"`, `"F"` or `"no"` let preempt and reclaim evict a
    pod Volcano keeps."""
    for where, values in (("annotations", annotations), ("labels", labels)):
        value = values.get(PREEMPTABLE)
        if value is None:
            continue
        if value in PARSE_TRUE or value in PARSE_FALSE:
            return value in PARSE_TRUE
        ctx.warn(f"{path}.metadata.{where}[{PREEMPTABLE}]", value, "not a boolean to Volcano "
                 "(strconv.ParseBool: true/false, True/False, TRUE/FALSE, t/f, 1/0): the pod is "
                 "not preemptable, as Volcano reads it")  # fmt: skip
        return False
    return True


def _seconds(ctx: _Ctx, path: str, raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        ctx.reject(path, raw, "must be a number of seconds")
        return None
    if value < 0:
        ctx.reject(path, raw, "must be >= 0")
    return value


def _node_groups(ctx: _Ctx, raw: object) -> NodeGroupAffinity | None:
    """A Queue's `spec.affinity` (the CRD's schema: lists of node-group names)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        ctx.reject("spec.affinity", raw, "must be an object")
        return None
    lists: dict[str, tuple[str, ...]] = {}
    whens = ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution")
    for key in sorted(set(raw) - {"nodeGroupAffinity", "nodeGroupAntiAffinity"}):
        ctx.reject(f"spec.affinity.{key}", None, "unknown field")
    for field_name, kind in (("nodeGroupAffinity", ""), ("nodeGroupAntiAffinity", "anti_")):
        part = raw.get(field_name)
        if part is None:
            continue
        if not isinstance(part, Mapping):
            ctx.reject(f"spec.affinity.{field_name}", part, "must be an object")
            continue
        for key in sorted(set(part) - set(whens)):
            ctx.reject(f"spec.affinity.{field_name}.{key}", None, "unknown field")
        for when, attr in (("requiredDuringSchedulingIgnoredDuringExecution", "required"),
                           ("preferredDuringSchedulingIgnoredDuringExecution", "preferred")):  # fmt: skip
            names = part.get(when)
            if names is None:
                continue
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                ctx.reject(f"spec.affinity.{field_name}.{when}", names, "must be a list of node group names")
                continue
            lists[kind + attr] = tuple(names)
    return NodeGroupAffinity(**lists)


def _resources(ctx: _Ctx, path: str, raw: object) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        ctx.reject(path, raw, "must be a map of resource name to quantity")
        return {}
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = to_units(str(name), value)
        except QuantityError as exc:
            ctx.reject(f"{path}.{name}", value, str(exc))
            ctx.unreadable.add(f"{path}.{name}".removeprefix("."))
            continue
        if out[str(name)] < 0:
            ctx.reject(f"{path}.{name}", value, "must be >= 0")
    return out


class Admission:
    """One admission run over a list of documents (PriorityClasses and Queues resolved first)."""

    def __init__(
        self,
        parser: DeviceRequestParser | None,
        device_names: frozenset[str],
        limits: WorkloadLimits = DEFAULT_WORKLOAD_LIMITS,
        largest: Largest | None = None,
    ) -> None:
        self.parser = parser or _no_devices
        self.largest = largest or {}  # the cluster's largest card per vendor (cardroom.py)
        self.limits = limits
        self.device_names = device_names
        self.priority: dict[str, PriorityClass] = {}
        self.default_priority = 0
        self.queues: dict[str, QueueSpec] = {}
        self.rejections: list[Rejection] = []
        self.warnings: list[Rejection] = []
        self.members: dict[tuple[str, str], list[str]] = {}  # PodGroup → its valid pods
        self.waiting: dict[tuple[str, str], tuple[str, ...]] = {}
        self.manifests: dict[tuple[str, str], str] = {}
        self.live_jobs: Container[tuple[str, str]] = ()  # `admit`'s
        #: namespace → the queue its `scheduling.volcano.sh/queue-name` annotation names, as the
        #: log has it (`admit`'s) and as the Namespaces among the documents have it (over those)
        self.namespace_queues: Mapping[str, str] = {}
        self.declared_namespaces: dict[str, str] = {}
        self.unset: dict[tuple[str, str], Unset] = {}

    # --- entry ---------------------------------------------------------------------------

    def run(self, docs: Sequence[Mapping[str, Any]]) -> Workload:
        typed: list[tuple[str, Mapping[str, Any]]] = []
        for i, doc in enumerate(docs):
            kind = str(doc.get("kind") or "")
            api = str(doc.get("apiVersion") or "")
            namespace, name, _, _ = _meta(doc)
            ctx = _Ctx(kind or "Unknown", namespace, name or f"document-{i}")
            schema = KINDS.get((api, kind))
            if schema is None:
                ctx.reject(*unserved(api, kind))
            else:
                _check_names(ctx, kind, doc)
                _check_annotations(ctx, "metadata.annotations", doc.get("metadata"),
                                   self.limits.max_annotation_bytes)  # fmt: skip
                for bad in fields.unknown_fields(doc, schema, ""):
                    ctx.reject(bad, None, fields.unknown_field_rule(kind, schema, bad))
                for path, value, rule in fields.wrong_types(doc, schema, ""):
                    ctx.reject(path, value, rule)
            if ctx.errors:
                self.rejections.extend(ctx.errors)
                continue
            typed.append((kind, doc))
        storage = tuple(e for _, doc in typed if (e := storage_event(doc)) is not None)
        quotas: list[QuotaChanged] = []
        for kind, doc in typed:
            if kind == "ResourceQuota":
                quota, refused = quota_event(doc, with_status=False)
                self.rejections.extend(refused)
                if quota is not None:
                    quotas.append(quota)
        hypernodes = [e for kind, doc in typed if kind == "HyperNode"
                      and (e := self._guard(kind, doc, lambda d, c: _cluster_object(d, c, hypernode_event)))]  # fmt: skip
        namespaces = [e for kind, doc in typed if kind == "Namespace"
                      and (e := self._guard(kind, doc, lambda d, c: _cluster_object(d, c, namespace_event)))]  # fmt: skip
        for ns_event in namespaces:  # a Namespace given with the objects is the one they land in
            self.declared_namespaces[ns_event.name] = ns_event.queue
        for kind, doc in typed:
            if kind == "PriorityClass":
                self._guard(kind, doc, self._priority_class)
        for kind, doc in typed:
            if kind == "Queue":
                self._guard(kind, doc, self._queue)
        self._validate_hierarchy()
        groups: dict[tuple[str, str], Mapping[str, Any]] = {}
        pods_by_group: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        jobs: list[JobSpec] = []
        running: list[RunningPod] = []
        order: list[tuple[str, Mapping[str, Any]]] = []
        declared_groups = {_meta(doc)[:2] for kind, doc in typed if kind == "PodGroup"}
        for kind, doc in typed:
            namespace, name, _, annotations = _meta(doc)
            if kind == "Pod":
                doc = without_devices(doc)  # `get` wrote it: the cards it holds, not the user's
                if ((group := implied_group(doc)) and (namespace, group) not in declared_groups
                        and (namespace, name) in self.live_jobs):  # fmt: skip
                    # printed by `get` as Volcano's podgroup controller writes it: its own group
                    doc = without_group(doc)
                    annotations = _meta(doc)[3]
            if kind == "PodGroup":
                groups[(namespace, name)] = doc
                order.append((kind, doc))
            elif kind == "Pod":
                group = annotations.get(GROUP_NAME) or annotations.get(GROUP_NAME_VOLCANO)
                if group:
                    pods_by_group.setdefault((namespace, group), []).append(doc)
                else:
                    order.append((kind, doc))
            elif kind == "Job":
                order.append((kind, doc))
        for key, pods in pods_by_group.items():
            if key not in groups:
                for pod in pods:
                    ns, name, _, _ = _meta(pod)
                    self.rejections.append(Rejection(
                        "Pod", ns, name, f"metadata.annotations[{GROUP_NAME}]", key[1],
                        MISSING_GROUP))  # fmt: skip
        for kind, doc in order:
            if kind == "Job":
                spec = self._guard(kind, doc, self._job)
                if spec:
                    jobs.append(spec)
            elif kind == "PodGroup":
                ns, name, _, _ = _meta(doc)
                members = pods_by_group.get((ns, name), [])
                result = self._guard(
                    kind, doc, lambda d, c, members=members: self._podgroup(d, c, members)
                )
                if result:
                    jobs.append(result[0])
                    running.extend(result[1])
                elif self.members.get((ns, name)):
                    self.waiting[(ns, name)] = tuple(self.members[(ns, name)])
            else:
                result = self._guard(kind, doc, self._plain_pod)
                if result:
                    jobs.append(result[0])
                    running.extend(result[1])
        return Workload(
            queues=tuple(self.queues.values()),
            jobs=tuple(jobs),
            running=tuple(running),
            priority_classes=tuple(self.priority.values()),
            rejections=tuple(self.rejections),
            warnings=tuple(self.warnings),
            waiting=dict(self.waiting),
            manifests=dict(self.manifests),
            storage=storage,
            quotas=tuple(quotas),
            hypernodes=tuple(hypernodes),
            namespaces=tuple(namespaces),
            unset=dict(self.unset),
        )

    def _network_topology(self, ctx: _Ctx, spec: Mapping[str, Any]) -> NetworkTopology | None:
        """spec.networkTopology; a hard mode without a highest tier constrains nothing (Volcano's
        `IsHardTopologyMode` needs highestTierAllowed), which is said as a warning."""
        problems: list[tuple[str, str]] = []
        topology = network_topology(spec.get("networkTopology"), "spec.networkTopology", problems)
        for path, rule in problems:
            ctx.reject(path, None, rule)
        if (topology is not None and topology.mode == "hard" and topology.highest_tier is None
                and not topology.highest_tier_name):  # fmt: skip
            ctx.warn("spec.networkTopology", "hard", "no highestTierAllowed or highestTierName: "
                     "the gang is placed without a network-topology constraint")  # fmt: skip
        return topology

    def _guard(self, kind: str, doc: Mapping[str, Any], fn: Any) -> Any:
        namespace, name, _, _ = _meta(doc)
        ctx = _Ctx(kind, "" if kind in ("Queue", "PriorityClass", "HyperNode", "Namespace") else namespace, name)
        try:
            result = fn(doc, ctx)
            ctx.check()
        except Rejected as exc:
            self.rejections.extend(exc.rejections)
            return None
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # a shape no check foresaw (`fields.wrong_types` names the ones it knows): this
            # object is refused, saying so, and every other object is judged on its own — it
            # refused the whole request, naming neither the object nor the field
            ctx.errors.append(Rejection(ctx.kind, ctx.namespace, ctx.name, "spec", "",
                                        f"could not be read ({type(exc).__name__}: {exc}): a field "
                                        "has a shape it cannot have (a list where a map belongs, or "
                                        "the reverse)"))  # fmt: skip
            self.rejections.extend(ctx.errors)
            return None
        self.warnings.extend(ctx.warnings)
        return result

    # --- kinds ---------------------------------------------------------------------------

    def _priority_class(self, doc: Mapping[str, Any], ctx: _Ctx) -> None:
        _, name, _, _ = _meta(doc)
        if "value" not in doc:
            ctx.reject("value", None, "required")
        value = _int(ctx, "value", doc.get("value"), 0, minimum=None)
        if value > 1_000_000_000 and not name.startswith("system-"):
            ctx.reject("value", value, "must be <= 1000000000 for user priority classes")
        ctx.check()
        pc = PriorityClass(name, value, bool(doc.get("globalDefault", False)),
                           str(doc.get("preemptionPolicy") or "PreemptLowerPriority"))  # fmt: skip
        self.priority[name] = pc
        if pc.global_default:
            self.default_priority = value

    def _queue(self, doc: Mapping[str, Any], ctx: _Ctx) -> None:
        _, name, _, annotations = _meta(doc)
        spec = doc.get("spec") or {}
        weight = _int(ctx, "spec.weight", spec.get("weight"), 1)
        if weight == 0:
            weight = 1  # mutate_queue.go: 0 → 1
        if weight > 65535:
            ctx.reject("spec.weight", weight, "must be <= 65535")
        capability = _resources(ctx, "spec.capability", spec.get("capability"))
        deserved = _resources(ctx, "spec.deserved", spec.get("deserved"))
        guarantee = _resources(ctx, "spec.guarantee", (spec.get("guarantee") or {}).get("resource"))
        for res, value in guarantee.items():
            if res in deserved and deserved[res] < value:
                ctx.reject(f"spec.deserved.{res}", deserved[res], "deserved must be >= guarantee")
        for res, value in capability.items():
            if res in deserved and deserved[res] > value:
                ctx.reject(f"spec.deserved.{res}", deserved[res], "deserved must be <= capability")
        for path, amounts in (("spec.capability", capability), ("spec.deserved", deserved),
                              ("spec.guarantee.resource", guarantee)):  # fmt: skip
            for res, rule in unknown_device_names(amounts, self.device_names):
                ctx.reject(f"{path}.{res}", None, rule)
        reclaimable = spec.get("reclaimable")
        if reclaimable is not None and not isinstance(reclaimable, bool):
            ctx.reject("spec.reclaimable", reclaimable, "must be a boolean")
        state = str(((doc.get("status") or {}).get("state")) or "Open")
        if state not in QUEUE_STATES:
            ctx.reject("status.state", state, f"must be one of {', '.join(QUEUE_STATES)}")
        strategy = spec.get("dequeueStrategy")
        if strategy is not None and strategy not in ("fifo", "traverse"):
            ctx.reject("spec.dequeueStrategy", strategy, "must be fifo or traverse")
        elif strategy is None and annotations.get(DEQUEUE_STRATEGY) in ("fifo", "traverse"):
            strategy = annotations[DEQUEUE_STRATEGY]  # Volcano's earlier way to say it
        priority = _int(ctx, "spec.priority", spec.get("priority"), 0)
        parent = str(spec.get("parent") or ("" if name == "root" else "root"))
        node_groups = _node_groups(ctx, spec.get("affinity"))
        if name in self.queues:
            ctx.reject("metadata.name", name, "duplicate queue")
        ctx.check()
        self.queues[name] = QueueSpec(
            name=name, weight=weight, capability=capability, deserved=deserved,
            guarantee=guarantee, reclaimable=True if reclaimable is None else reclaimable,
            parent=parent, state=state, priority=priority, annotations=annotations,
            node_groups=node_groups, dequeue_strategy=str(strategy or "traverse"),
        )  # fmt: skip

    def _validate_hierarchy(self) -> None:
        """Volcano queue webhook: child capability ≤ parent's; Σ children deserved/guarantee ≤ parent's."""
        for q in list(self.queues.values()):
            parent = self.queues.get(q.parent)
            if q.parent and q.parent != "root" and parent is None:
                self._drop_queue(q, "spec.parent", q.parent, "parent queue does not exist")
                continue
            if parent is None:
                continue
            for res, value in q.capability.items():
                if res in parent.capability and value > parent.capability[res]:
                    self._drop_queue(q, f"spec.capability.{res}", value,
                                     "child capability must be <= parent capability")  # fmt: skip
        for p in list(self.queues.values()):
            children = [c for c in self.queues.values() if c.parent == p.name]
            for attr in ("deserved", "guarantee"):
                limit: dict[str, int] = getattr(p, attr)
                for res, value in limit.items():
                    total = sum(getattr(c, attr).get(res, 0) for c in children)
                    if total > value:
                        self._drop_queue(p, f"spec.{attr}.{res}", value,
                                         f"sum of children's {attr} exceeds parent's")  # fmt: skip

    def _drop_queue(self, q: QueueSpec, path: str, value: object, rule: str) -> None:
        self.queues.pop(q.name, None)
        self.rejections.append(Rejection("Queue", "", q.name, path, str(value), rule))

    def _check_queue(self, ctx: _Ctx, path: str, queue: str, existing: bool = False) -> None:
        """Volcano's webhooks, in their words: the queue exists and is Open (the Job's, the
        PodGroup's and the Pod's webhook), is not root, and for a Job, is a leaf (the Job's
        only: a PodGroup or a Pod naming a parent queue is created, and waits — Volcano's
        hierarchical capacity plugin runs no pod there —, which is said as a warning). An
        `existing` object (a PodGroup given with a non-Pending status, a job that runs) passed
        that webhook when it was created; a queue closed since then does not refuse it
        (Volcano's webhook asks an Open queue of a create only: an admission restart judging
        every live Job again told each one in a closed queue it was refused)."""
        job = ctx.kind == "Job"
        what = "PodGroup" if ctx.kind == "PodGroup" else "job"  # the PodGroup webhook's words
        if queue == "root":  # (Tessera's for a PodGroup and a Pod too: root is no leaf)
            ctx.reject(path, queue, "can not submit job to root queue")
            return
        spec = self.queues.get(queue)
        if spec is None:
            if queue != "default":
                near = difflib.get_close_matches(queue, sorted(self.queues), n=1, cutoff=0.75)
                found = "unable to find queue" if ctx.kind == "PodGroup" else "unable to find job queue"
                rule = f'queue does not exist ({found}: queues.scheduling.volcano.sh "{queue}" not found)'
                ctx.reject(path, queue, f"{rule}; did you mean {near[0]}?" if near else rule)
            return
        if spec.state != "Open" and not existing:
            ctx.reject(path, queue, f"can only submit {what} to queue with state `Open`, "
                       f"queue `{queue}` status is `{spec.state}`")  # fmt: skip
        children = sum(q.parent == queue for q in self.queues.values())
        if children and job:
            ctx.reject(path, queue, f"can only submit job to leaf queue, queue `{queue}` has "
                       f"{children} child queues")  # fmt: skip
        elif children:
            ctx.warn(path, queue, f"queue `{queue}` has {children} child queues: accepted, as "
                     "Volcano's webhook accepts it, but under a hierarchical capacity plugin no "
                     "pod runs in a queue that is not a leaf (it waits)")  # fmt: skip

    def _group_priority(self, ctx: _Ctx, name: str) -> int:
        """A PodGroup's priority: its class's value; a class that does not exist (yet) is no
        refusal — Volcano's PodGroup webhook does not check it, and its scheduler's cache gives
        the job the default priority until the class is there (`cache.Snapshot`). Operators
        write the class on the PodGroup alone (the training-operator's
        `schedulingPolicy.priorityClass`), and refusing it left the job without a phase, its
        pods never made. The class's value is taken once it is created (`plan.class_created`)."""
        if not name or name in self.priority or name in SYSTEM_CLASSES:
            return self._priority_of(ctx, "spec.priorityClassName", name)
        ctx.warn("spec.priorityClassName", name, f"no PriorityClass with this name: the PodGroup is "
                 f"admitted at the default priority ({self.default_priority}), as Volcano's scheduler "
                 "takes it, and takes the class's value once the class is created")  # fmt: skip
        return self.default_priority

    def _namespace_queue(self, namespace: str) -> str:
        """The queue a PodGroup made without `spec.queue` lands in (Volcano's PodGroup mutating
        webhook, `createPodGroupPatch`): its namespace's `scheduling.volcano.sh/queue-name`
        annotation, else `default`. Platform teams annotate a namespace so that the groups
        operators make there (spark-submit's, KubeRay's without the label, the implied group
        of a plain pod) stay within the team's queue."""
        if namespace in self.declared_namespaces:
            return self.declared_namespaces[namespace] or "default"
        return self.namespace_queues.get(namespace) or "default"

    def _group_queue(self, named: str, namespace: str) -> tuple[str, bool]:
        """`group_queue` in `namespace`, as this admission has its annotation."""
        return group_queue(named, self._namespace_queue(namespace))

    def _from_namespace(self, path: str, namespace: str) -> str:
        """The path a refusal of a queue the object does not name itself points at: its
        namespace's annotation, where the queue came from."""
        if self._namespace_queue(namespace) == "default":
            return path
        return f"{path} (unset: namespace {namespace}'s annotation {QUEUE_NAME})"

    def _priority_of(self, ctx: _Ctx, path: str, name: str) -> int:
        if not name:
            return self.default_priority
        pc = self.priority.get(name)
        if pc is None:
            if name in SYSTEM_CLASSES:
                return SYSTEM_CLASSES[name]
            ctx.reject(path, name, "no PriorityClass with this name")
            return 0
        return pc.value

    # --- pods and tasks ------------------------------------------------------------------

    def _task(
        self, ctx: _Ctx, path: str, template: Mapping[str, Any], *, role: str, replicas: int,
        min_available: int | None, pod_names: tuple[str, ...], defaults: Mapping[str, str],
        counts_needed: bool = True, job_class: str = "", job_queue: str | None = None,
    ) -> TaskSpec:  # fmt: skip
        """One pod template → TaskSpec (requests summed over containers, max'ed with init).
        `counts_needed`: False for a Volcano Job's template, whose pods Tessera's job controller
        makes with the app containers' device count resources written in (`uncounted`; an init
        container's ask may be folded into the app's booking, so it must name its count).
        `job_class`: a Volcano Job's `spec.priorityClassName`. Volcano's `createJobPod` writes it
        into a pod whose template names no class, and the API server's Priority admission then
        gives that pod the class's value and preemptionPolicy: read from the template alone, a
        Job asking `preemptionPolicy: Never` through its class preempted all the same.
        `job_queue`: a Volcano Job's queue. Its pods carry its controller's labels beside the
        template's (joblabels.py), and the API server merges a term's or constraint's
        matchLabelKeys with the labels the pod is made with: read from the template alone, keys
        naming the controller's labels were dropped."""
        meta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        annotations = {
            **defaults,
            **{str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        }
        _check_annotations(ctx, f"{path}.metadata.annotations", meta,
                           self.limits.max_annotation_bytes)  # fmt: skip
        _mindcluster_keys(ctx, path, labels, {str(k): str(v) for k, v in _mapping(meta.get("annotations")).items()})
        containers = spec.get("containers") or []
        if not containers:
            ctx.reject(f"{path}.spec.containers", None, "required: at least one container")
        init_containers = spec.get("initContainers") or []
        if len(containers) + len(init_containers) > self.limits.max_containers:
            ctx.reject(f"{path}.spec.containers", None, f"Too many: "
                       f"{len(containers) + len(init_containers)}: must have at most "
                       f"{self.limits.max_containers} containers and initContainers "
                       "(Tessera's limit for one pod)")  # fmt: skip
            ctx.check()
        for kind_of, listed in (("containers", containers), ("initContainers", init_containers)):
            for i, c in enumerate(listed):
                where = f"{path}.spec.{kind_of}[{i}]"
                if not c.get("name"):
                    ctx.required(f"{where}.name")
                if not c.get("image"):
                    ctx.required(f"{where}.image")  # ValidateContainers: image is required
        app = [self._container_requests(ctx, f"{path}.spec.containers[{i}]", c) for i, c in enumerate(containers)]
        init = [self._container_requests(ctx, f"{path}.spec.initContainers[{i}]", c)
                for i, c in enumerate(init_containers)]  # fmt: skip
        sidecars = [sidecar(c) for c in init_containers]
        # the API server holds the app containers' limits to the pod's (not the init containers')
        own_limits = [(f"{path}.spec.containers[{i}]", (c.get("resources") or {}).get("limits"))
                      for i, c in enumerate(containers)]  # fmt: skip
        pod_requests, pod_limits, problems = pod_level(spec.get("resources"), f"{path}.spec.resources",
                                                       app, init, sidecars, own_limits)  # fmt: skip
        for where, rule in problems:
            ctx.reject(where, None, rule)
        total = pod_request(app, init, _resources(ctx, f"{path}.spec.overhead", spec.get("overhead")),
                            sidecars=sidecars, pod_requests=pod_requests, pod_limits=pod_limits)  # fmt: skip
        if spec.get("resourceClaims"):
            # Dynamic Resource Allocation: the scheduler allocates each claim and reserves it for
            # the pod (kube-scheduler's DynamicResources); the kubelet starts no pod before that.
            ctx.reject(f"{path}.spec.resourceClaims", None, "Tessera does not allocate DRA "
                       "ResourceClaims: bound by it, the pod would never start (its claims "
                       "unallocated); ask cards by their resources (huawei.com/<model>, "
                       "nvidia.com/gpu) or leave this pod to a scheduler with DRA")  # fmt: skip
        ports, port_problems = host_ports(spec, path)
        gates, gate_problems = scheduling_gates(spec, path)
        for where, rule in (*port_problems, *gate_problems):
            ctx.reject(where, None, rule)
        devices, errors = self.parser(list(containers), annotations, f"{path}.spec")
        inits, init_errors = self.parser(list(init_containers), annotations, f"{path}.spec",
                                         field="initContainers")  # fmt: skip
        for err in (*errors, *init_errors):
            if err.path.removeprefix(".") in ctx.unreadable:
                continue  # refused once already, as no quantity
            if err.warning:
                ctx.warn(err.path, err.value, err.rule)
            else:
                ctx.reject(err.path, err.value, err.rule)
        if not spec.get("nodeName"):  # a bound pod's ask is the kubelet's past
            for err in (*(uncounted(containers, devices, f"{path}.spec") if counts_needed else ()),
                        *uncounted(init_containers, inits, f"{path}.spec", "initContainers")):
                if err.value:  # a count asked, but not the one booked (910C: 1 for a module of 2)
                    ctx.reject(err.path, err.value, err.rule)
                else:
                    ctx.required(err.path, err.rule)
        init_devices = covered_inits(devices, inits)
        devices, booked = with_init_devices(devices, inits, len(init_containers), f"{path}.spec")
        for e in booked:
            ctx.reject(e.path, e.value, e.rule)
        for v in beyond_every_card(devices, self.largest, f"{path}.spec"):
            ctx.reject(v.resource, v.value, v.rule)
        for v in (*mistyped_pins(annotations, devices, f"{path}.metadata.annotations"),
                  *unread_index_pins(annotations, f"{path}.metadata.annotations")):  # fmt: skip
            ctx.warn(v.resource, v.value, v.rule)
        for key, problem in ((CARD_POLICY_ANNOTATION, card_policy_problem),
                             (NODE_POLICY_ANNOTATION, node_policy_problem)):  # fmt: skip
            why = problem(annotations[key]) if key in annotations and devices else None
            if why is not None:  # HAMi logs it and schedules with its configured policy
                ctx.warn(f"{path}.metadata.annotations[{key}]", annotations[key],
                         f"{why}: ignored, as HAMi ignores it; the scheduler's configured "
                         "policy is used")  # fmt: skip
        card_policy = annotations.get(CARD_POLICY_ANNOTATION, "")
        if "topology-aware" in card_policy.lower() and devices:
            ctx.warn(f"{path}.metadata.annotations[{CARD_POLICY_ANNOTATION}]", card_policy,
                     "topology-aware is not acted on: cards are taken in spread order, and the "
                     "NVLink pair scores HAMi reads (hami.io/node-nvidia-score) are not")  # fmt: skip
        pc_name = str(spec.get("priorityClassName") or "")
        if not pc_name and job_class:
            pc_name = job_class  # an unknown one is refused once: at the Job's own spec.priorityClassName
            priority = self._priority_of(_Ctx(ctx.kind, ctx.namespace, ctx.name), "", pc_name)
        else:
            priority = self._priority_of(ctx, f"{path}.spec.priorityClassName", pc_name)
        if spec.get("priority") is not None:
            priority = _int(ctx, f"{path}.spec.priority", spec.get("priority"), priority, None)
        if TASK_PRIORITY in annotations:
            priority = _int(ctx, f"{path}.metadata.annotations[{TASK_PRIORITY}]",
                            annotations[TASK_PRIORITY], priority, None)  # fmt: skip
        node_selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        tolerations = tuple(
            Toleration(key=str(t.get("key") or ""), operator=str(t.get("operator") or "Equal"),
                       value=str(t.get("value") or ""), effect=str(t.get("effect") or ""))
            for t in spec.get("tolerations") or []
        )  # fmt: skip
        for i, t in enumerate(tolerations):
            if t.operator not in ("Equal", "Exists"):
                ctx.reject(
                    f"{path}.spec.tolerations[{i}].operator", t.operator, "must be Equal or Exists"
                )
        affinity, preferred = self._affinity(ctx, f"{path}.spec.affinity", spec.get("affinity") or {})
        made_with, per_pod = labels, None
        if job_queue is not None:
            made_with = job_task_labels(labels, ctx.name, ctx.namespace, job_queue, role)
            per_pod = {TASK_INDEX: PER_POD_INDEX}
        pods_affinity, affinity_problems = pod_affinity(
            spec.get("affinity") or {}, f"{path}.spec.affinity", ctx.namespace, made_with, per_pod
        )
        spread, spread_problems = spread_constraints(spec, path, made_with, per_pod)
        for where, rule in (*affinity_problems, *spread_problems):
            ctx.reject(where, None, rule)
        preempt = _preemptable(ctx, path, labels, annotations)
        for where, values in (("labels", labels), ("annotations", annotations)):
            if (cooldown := values.get(COOLDOWN_TIME)) is not None and go_duration(cooldown) is None:
                ctx.warn(f"{path}.metadata.{where}[{COOLDOWN_TIME}]", cooldown, "not a Go duration "
                         '("600s", "10m", "1h30m"): the pod has no cooldown protection (cdp)')  # fmt: skip
        policy = str(spec.get("preemptionPolicy") or "")
        if not policy and pc_name in self.priority:
            policy = self.priority[pc_name].preemption_policy
        cpu = total.pop("cpu", 0)
        mem = total.pop("memory", 0)
        total.pop("pods", None)
        if not counts_needed:  # the job controller writes the booked count into each pod it makes
            for d in devices:
                if d.resource and 0 <= d.container < len(containers):
                    asked = asked_count(containers[d.container], d.resource) or "0"
                    if asked.isdigit() and int(asked) != d.count:  # (what the kubelet and quotas will count)
                        total[d.resource] = total.get(d.resource, 0) + (d.count - int(asked)) * 1000
        scalars = {k: v for k, v in total.items() if v and not self._ignored(k)}
        return TaskSpec(
            name=role, replicas=replicas, cpu_milli=cpu, memory_mib=mem, devices=devices,
            containers=len(containers), init_containers=len(spec.get("initContainers") or []),
            init_devices=init_devices,
            annotations=annotations, node_selector=node_selector,
            duration=_seconds(ctx, f"{path}.metadata.annotations[{DURATION}]", annotations.get(DURATION)),
            min_available=min_available, priority=priority, priority_class=pc_name, labels=labels,
            scalars=scalars, tolerations=tolerations, affinity=affinity, preferred_affinity=preferred,
            preemptable=preempt,
            preemption_policy=policy or "PreemptLowerPriority",
            exit_code=_int(ctx, f"{path}.metadata.annotations[{EXIT_CODE}]",
                           annotations.get(EXIT_CODE), 0, None),
            pod_names=pod_names, host_ports=ports,
            scheduling_gates=gates, pod_affinity=pods_affinity, spread=spread, claims=pod_claims(spec),
            runtime_class=str(spec.get("runtimeClassName") or ""),
        )  # fmt: skip

    def _ignored(self, resource: str) -> bool:
        """Device memory/core names are booked on cards, not as node scalars (Volcano's ignored list)."""
        return resource.endswith(("-memory", "-core", "-memory-percentage", "/gpumem",
                                  "/gpucores", "/gpumem-percentage", "/vgpu-memory",
                                  "/vgpu-cores", "/vgpu-memory-percentage"))  # fmt: skip

    def _container_requests(self, ctx: _Ctx, path: str, c: Mapping[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        limits = _resources(ctx, f"{path}.resources.limits", res.get("limits"))
        requests = _resources(ctx, f"{path}.resources.requests", res.get("requests"))
        raw_limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
        raw_requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
        # kube-apiserver ValidateContainerResourceRequirements, in its words.
        for name, value in requests.items():
            where = f"{path}.resources.requests[{name}]"
            shown = str(raw_requests.get(name))
            if name not in limits:
                if not _overcommit_allowed(name):
                    ctx.required(f"{path}.resources.limits[{name}]",
                                 "Limit must be set for non overcommitable resources")  # fmt: skip
            elif value != limits[name] and not _overcommit_allowed(name):
                ctx.invalid(where, shown, f"must be equal to {name} limit of {raw_limits[name]}")
            elif value > limits[name]:
                ctx.invalid(where, shown,
                            f"must be less than or equal to {name} limit of {raw_limits[name]}")  # fmt: skip
        # Kubernetes defaults a missing request to its limit.
        return {**limits, **requests}

    def _affinity(
        self, ctx: _Ctx, path: str, raw: Mapping[str, Any]
    ) -> tuple[tuple[tuple[LabelRequirement, ...], ...], tuple[PreferredNodeTerm, ...]]:
        """Node affinity: the required terms (ORed) and the weighted preferred ones."""
        node = raw.get("nodeAffinity") or {}
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        base = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = tuple(self._node_term(ctx, f"{base}[{i}]", term)
                      for i, term in enumerate(required.get("nodeSelectorTerms") or []))  # fmt: skip
        if node.get("requiredDuringSchedulingIgnoredDuringExecution") is not None and not terms:
            # ValidateNodeSelector: none would be no constraint at all, not one no node meets
            ctx.required(base, "must have at least one node selector term")
        preferred: list[PreferredNodeTerm] = []
        base = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, entry in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            weight = _int(ctx, f"{base}[{i}].weight", entry.get("weight"), 0, None)
            if not 1 <= weight <= 100:  # kube-apiserver validatePreferredSchedulingTerms
                ctx.invalid(f"{base}[{i}].weight", weight, "must be in the range 1-100")
            reqs = self._node_term(ctx, f"{base}[{i}].preference", entry.get("preference") or {})
            preferred.append(PreferredNodeTerm(weight=weight, requirements=reqs))
        return terms, tuple(preferred)

    def _node_term(self, ctx: _Ctx, p: str, term: Mapping[str, Any]) -> tuple[LabelRequirement, ...]:
        """One node selector term: its label expressions and `metadata.name` fields, ANDed."""
        reqs: list[LabelRequirement] = []
        for j, expr in enumerate(term.get("matchExpressions") or []):
            op = str(expr.get("operator") or "")
            values = tuple(str(v) for v in expr.get("values") or [])
            where = f"{p}.matchExpressions[{j}]"
            # kube-apiserver ValidateNodeSelectorRequirement, in its words
            if op in ("In", "NotIn") and not values:
                ctx.required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'")
            elif op in ("Exists", "DoesNotExist") and values:
                ctx.reject(f"{where}.values", None, "Forbidden: may not be specified when `operator` "
                           "is 'Exists' or 'DoesNotExist'")  # fmt: skip
            elif op in ("Gt", "Lt") and len(values) != 1:
                ctx.required(f"{where}.values", "must be specified single value when `operator` is "
                             "'Lt' or 'Gt'")  # fmt: skip
            elif op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                ctx.invalid(f"{where}.operator", op, "not a valid selector operator")
            key = str(expr.get("key") or "")
            for msg in names.qualified_name(key):
                ctx.invalid(f"{where}.key", key, msg)
            reqs.append(LabelRequirement(key=key, operator=op, values=values))
        for j, expr in enumerate(term.get("matchFields") or []):
            op, key = str(expr.get("operator") or ""), str(expr.get("key") or "")
            values = tuple(str(v) for v in expr.get("values") or [])
            where = f"{p}.matchFields[{j}]"
            # kube-apiserver validateNodeFieldSelectorRequirement, in its words
            if op not in ("In", "NotIn"):
                ctx.invalid(f"{where}.operator", op, "not a valid selector operator")
            elif len(values) != 1:
                ctx.required(f"{where}.values", "must be only one value when `operator` is 'In' or "
                             "'NotIn' for node field selector")  # fmt: skip
            if key != "metadata.name":
                ctx.invalid(f"{where}.key", key, "not a valid field selector key")
            reqs.append(LabelRequirement(key=key, operator=op, values=values, field=True))
        return tuple(reqs)

    def _running(
        self, ctx: _Ctx, doc: Mapping[str, Any], job: str, task: TaskSpec
    ) -> list[RunningPod]:
        spec = doc.get("spec") or {}
        status = doc.get("status") or {}
        node = spec.get("nodeName")
        if not node:
            return []
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            return []  # finished where it ran: it holds nothing
        if not phase:
            # made with spec.nodeName: the API server stores it Pending, kube-scheduler never
            # sees it and the node's kubelet starts it — bound there, as it is on a cluster
            ctx.warn("spec.nodeName", str(node), "set without a status: read as bound to this "
                     "node and starting (the scheduler skips such a pod); Tessera does not judge "
                     "what the node's kubelet would (that the node exists and the pod fits it)")  # fmt: skip
            phase = "Pending"
        # bound and Pending: starting (pulling its image); Unknown: its node stopped reporting,
        # and the pod may still run there, on its cards
        if phase not in ("Running", "Pending", "Unknown"):
            ctx.reject("spec.nodeName", node,
                       "only a bound pod (status.phase Pending, Running or Unknown) may carry "
                       "spec.nodeName (pre-existing placement)")  # fmt: skip
            return []
        namespace, name, _, annotations = _meta(doc)
        return [RunningPod(namespace, job, name, str(node), annotations, task.devices, task.init_containers)]

    def _plain_pod(self, doc: Mapping[str, Any], ctx: _Ctx) -> tuple[JobSpec, list[RunningPod]]:
        namespace, name, labels, annotations = _meta(doc)
        role = labels.get(TASK_SPEC) or annotations.get(TASK_SPEC) or name
        task = self._task(ctx, "", doc, role=role, replicas=1, min_available=None,
                          pod_names=(name,), defaults={})  # fmt: skip
        # its implied group (Volcano's podgroup controller's `podgroup-<uid>`) takes the pod's
        # annotation; made without one, the PodGroup webhook gives it the namespace's queue
        queue, unset = self._group_queue(str(annotations.get(QUEUE_NAME) or ""), namespace)
        path = f"metadata.annotations[{QUEUE_NAME}]"
        self._check_queue(ctx, self._from_namespace(path, namespace) if unset else path, queue)
        running = self._running(ctx, doc, name, task)
        ctx.check()
        self._scheduler_named(ctx, "spec.schedulerName", doc.get("spec"), KUBE_DEFAULT)
        self.manifests[(namespace, name)] = manifest_text([doc])
        min_res = {"cpu": task.cpu_milli, "memory": task.memory_mib, **task.scalars}
        return JobSpec(
            namespace=namespace, name=name, queue=queue, kind="Pod", min_available=1,
            priority=task.priority, priority_class=task.priority_class, tasks=(task,),
            annotations=annotations,
            arrive_at=_seconds(ctx, f"metadata.annotations[{ARRIVE_AT}]", annotations.get(ARRIVE_AT)) or 0.0,
            min_resources={k: v for k, v in min_res.items() if v},
        ), running  # fmt: skip

    def _podgroup(
        self, doc: Mapping[str, Any], ctx: _Ctx, pods: list[Mapping[str, Any]]
    ) -> tuple[JobSpec, list[RunningPod]]:
        namespace, name, pg_labels, annotations = _meta(doc)
        _mindcluster_keys(ctx, "", pg_labels, annotations)
        if len(pods) > self.limits.max_pods:
            ctx.reject("metadata.name", None, f"{len(pods)} pods name this PodGroup; at most "
                       f"{self.limits.max_pods} pods per PodGroup (Tessera's limit)")  # fmt: skip
            ctx.check()
        spec = doc.get("spec") or {}
        min_member = _int(ctx, "spec.minMember", spec.get("minMember"), 0)
        phase = str((doc.get("status") or {}).get("phase") or "")
        live = (namespace, name) in self.live_jobs
        # left to the mutating webhook, which writes it at create: a live group keeps the queue
        # it was admitted in (the namespace's annotation may have changed since)
        queue, kept_queue = self._group_queue(str(spec.get("queue") or ""), namespace)
        queue_ctx = _Ctx(ctx.kind, ctx.namespace, ctx.name)
        if not (kept_queue and live):
            self._check_queue(queue_ctx, self._from_namespace("spec.queue", namespace) if kept_queue else "spec.queue",
                              queue, existing=phase not in ("", "Pending") or live)  # fmt: skip
        ctx.warnings.extend(queue_ctx.warnings)
        if queue_ctx.errors and live:
            # an edit moving a live group to a queue it cannot be in: that part is not taken
            # (the group stays in its queue), the rest of the same edit is (minMember, pods…)
            kept_queue = True
            for e in queue_ctx.errors:
                ctx.warn(e.path, e.value, f"{e.rule}: this change of the queue is not taken (the "
                         "PodGroup stays in the queue it is in); the rest of the edit is")  # fmt: skip
        else:
            ctx.errors.extend(queue_ctx.errors)
        if kept_queue:
            self.unset[(namespace, name)] = Unset(queue=True)
        pc_name = str(spec.get("priorityClassName") or "")
        priority = self._group_priority(ctx, pc_name)
        if phase and phase not in POD_GROUP_PHASES:
            ctx.reject("status.phase", phase, f"must be one of {', '.join(POD_GROUP_PHASES)}")
        min_task = spec.get("minTaskMember") or {}
        if not isinstance(min_task, dict):
            ctx.reject("spec.minTaskMember", min_task, "must be a map of task name to count")
            min_task = {}
        min_resources = None
        if spec.get("minResources") is not None:
            min_resources = _resources(ctx, "spec.minResources", spec.get("minResources"))
        topology = self._network_topology(ctx, spec)
        _not_acted_on(ctx, "spec", spec)
        tasks: list[TaskSpec] = []
        running: list[RunningPod] = []
        foreign: dict[str, list[Mapping[str, Any]]] = {}  # members of a scheduler not Tessera's: said once
        for pod in pods:
            pns, pname, plabels, pann = _meta(pod)
            pctx = _Ctx("Pod", pns, pname)
            role = plabels.get(TASK_SPEC) or pann.get(TASK_SPEC) or ""
            mt = min_task.get(role)
            task = self._task(pctx, "", pod, role=role, replicas=1,
                              min_available=None if mt is None else int(mt),
                              pod_names=(pname,), defaults={})  # fmt: skip
            rp = self._running(pctx, pod, name, task)
            if pctx.errors:
                self.rejections.extend(pctx.errors)
                continue
            if not_served(pod.get("spec"), KUBE_DEFAULT, self.limits.scheduler_names) is not None:
                foreign.setdefault(str((pod.get("spec") or {}).get("schedulerName") or ""), []).append(pod)
            for w in pctx.warnings:  # reported on the PodGroup, the object that is written
                ctx.warn(f"pod {pname}: {w.path}", w.value, w.rule)
            self.members.setdefault((namespace, name), []).append(pname)
            tasks.append(task)
            running.extend(rp)
        for some in foreign.values():
            more = f" and {len(some) - 1} more" if len(some) > 1 else ""
            self._scheduler_named(ctx, f"pod {_meta(some[0])[1]}{more}: spec.schedulerName", some[0].get("spec"),
                                  KUBE_DEFAULT, "these pods" if more else "this pod")  # fmt: skip
        ctx.check()
        members = set(self.members.get((namespace, name), ()))
        self.manifests[(namespace, name)] = manifest_text([doc, *(p for p in pods if _meta(p)[1] in members)])
        return JobSpec(
            namespace=namespace, name=name, queue=queue, kind="PodGroup", min_available=min_member,
            priority=priority, priority_class=pc_name, tasks=tuple(tasks), annotations=annotations,
            arrive_at=_seconds(ctx, f"metadata.annotations[{ARRIVE_AT}]", annotations.get(ARRIVE_AT)) or 0.0,
            min_resources=min_resources, phase=phase, network_topology=topology,
        ), running  # fmt: skip

    def _scheduler_named(self, ctx: _Ctx, path: str, spec: object, default: str, pods: str = "this pod") -> None:
        """A warning for a pod whose schedulerName Tessera does not serve on a cluster
        (`schedulernames.py`): placed here, not there."""
        rule = not_served(spec, default, self.limits.scheduler_names, pods)
        if rule is not None:
            given = spec.get("schedulerName") if isinstance(spec, Mapping) else None
            ctx.warn(path, str(given or default), rule)

    def _job_schedulers(self, ctx: _Ctx, spec: Mapping[str, Any]) -> None:
        """A Job's pods carry their template's schedulerName, else the Job's (`volcano` when
        it names none): each name Tessera does not serve is said once, where it is written."""
        raw_tasks = spec.get("tasks") if isinstance(spec.get("tasks"), list) else []
        own = [(i, t["template"]["spec"]) for i, t in enumerate(raw_tasks)
               if isinstance(t, Mapping) and isinstance(t.get("template"), Mapping)
               and isinstance(t["template"].get("spec"), Mapping) and t["template"]["spec"].get("schedulerName")]  # fmt: skip
        if len(own) < len(raw_tasks) or not raw_tasks:
            self._scheduler_named(ctx, "spec.schedulerName", spec, VOLCANO_DEFAULT, "the Job's pods")
        for i, template_spec in own:
            self._scheduler_named(ctx, f"spec.tasks[{i}].template.spec.schedulerName", template_spec,
                                  KUBE_DEFAULT, f"task {i}'s pods")  # fmt: skip

    def _newer_rule(self, ctx: _Ctx, former: bool, path: str, value: object, rule: str,
                    invalid_value: bool = True) -> bool:  # fmt: skip
        """A rule for creating a job that Tessera did not always have (`former`: the value was
        accepted before it): a live job is judged again at each restart of admission and each
        relist of the cluster, and one admitted before the rule came is kept, warned (as
        `volcano.sh/preemptable` read anew is not an edit of it), where refusing it refused its
        every later edit and told the cluster it was refused. True if it is kept."""
        text = invalid(value, rule) if invalid_value else rule
        if former and (ctx.namespace, ctx.name) in self.live_jobs:
            ctx.warn(path, "" if invalid_value else str(value), f"{text} ({ADMITTED_BEFORE})")
            return True
        ctx.reject(path, None if invalid_value else value, text)
        return False

    def _policies(self, ctx: _Ctx, path: str, raw: object) -> tuple[tuple[str, str], ...]:
        """A job's or a task's policies, checked across the list as Volcano's webhook checks
        them (`validatePolicies`): one event or exit code answered once, and `*` alone — a `*`
        beside others made the first-listed win, and since `*` answers TaskCompleted too, a
        job aborted as soon as any of its tasks completed. An event policy names an event and
        an action the webhook lets a user name; an exit-code policy's action is not checked
        there (its job controller syncs the job on an action it does not know), so it is
        accepted with a warning."""
        out: list[tuple[str, str]] = []
        seen_events: set[str] = set()
        seen_codes: set[int] = set()
        for i, p in enumerate(raw or []):  # type: ignore[union-attr]
            pp = f"{path}[{i}]"
            action = str(p.get("action") or "")
            # `getEventList`: `events` then `event`, each once
            events = list(dict.fromkeys([*(str(e) for e in (p.get("events") or [])),
                                         *([str(p["event"])] if p.get("event") else [])]))  # fmt: skip
            exit_code = p.get("exitCode")
            if events and exit_code is not None:
                ctx.reject(pp, None, "must not specify event and exitCode simultaneously")
            if not events and exit_code is None:
                ctx.reject(pp, None, "either event or exitCode should be specified")
            if events and action not in JOB_ACTIONS:
                self._newer_rule(ctx, action in FORMER_ACTIONS, f"{pp}.action", action,
                                 f"invalid policy action; {VALID_ACTIONS}")  # fmt: skip
            if exit_code is not None:
                code = _int(ctx, f"{pp}.exitCode", exit_code, 0, None)
                if code == 0:
                    ctx.reject(f"{pp}.exitCode", exit_code, "0 is not a valid error code")
                elif code in seen_codes:
                    ctx.reject(f"{pp}.exitCode", exit_code, f"duplicate exitCode {code}")
                seen_codes.add(code)
                if not events and action not in JOB_ACTIONS:
                    ctx.warn(f"{pp}.action", action, f"not an action Volcano's job controller takes "
                             f"({VALID_ACTIONS}): on exit code {code} the job is synced, nothing "
                             "more")  # fmt: skip
                out.append((f"exitCode:{code}", action))
            for e in events:
                if e not in JOB_EVENTS:
                    if not self._newer_rule(ctx, e in FORMER_EVENTS, f"{pp}.event", e,
                                            f"invalid policy event; {VALID_EVENTS}"):  # fmt: skip
                        continue
                if e in seen_events:
                    ctx.reject(f"{pp}.event", e, f"duplicate event {e} across different policy")
                seen_events.add(e)
                if e == "PodPending" and not p.get("timeout"):
                    ctx.warn(f"{pp}.timeout", "", "a PodPending policy without a timeout never runs "
                             "(Volcano's job controller matches PodPending only after one)")  # fmt: skip
                elif e not in RAISED_EVENTS:
                    ctx.warn(f"{pp}.event", e, f"Tessera does not raise {e}: this policy never runs "
                             f"(it answers {', '.join(sorted(RAISED_EVENTS - {'*'}))})")  # fmt: skip
                out.append((e, action))
            if p.get("timeout") and not any(e == "PodPending" for e in events):
                ctx.warn(f"{pp}.timeout", str(p["timeout"]), "not acted on: the action is taken at once")
        if "*" in seen_events and len(seen_events) > 1:
            ctx.reject(path, sorted(seen_events), "if there's * here, no other policy should be here")
        return tuple(out)

    def _job(self, doc: Mapping[str, Any], ctx: _Ctx) -> JobSpec:
        namespace, name, job_labels, annotations = _meta(doc)
        _mindcluster_keys(ctx, "", job_labels, annotations)
        spec = doc.get("spec") or {}
        queue = str(spec.get("queue") or "default")
        self._check_queue(ctx, "spec.queue", queue, existing=(namespace, name) in self.live_jobs)
        raw_tasks = spec.get("tasks") or []
        if not raw_tasks:
            ctx.reject("spec.tasks", None, "No task specified in job spec")
        if len(raw_tasks) > self.limits.max_tasks:
            ctx.reject("spec.tasks", None, f"Too many: {len(raw_tasks)}: must have at most "
                       f"{self.limits.max_tasks} tasks (Tessera's limit for one job)")  # fmt: skip
            ctx.check()
        tasks: list[TaskSpec] = []
        seen: set[str] = set()
        total_replicas = 0
        total_min = 0
        unset_tasks: set[str] = set()
        for i, t in enumerate(raw_tasks):
            path = f"spec.tasks[{i}]"
            tname = str(t.get("name") or f"default{i}")
            if errs := names.dns1123_label(tname):
                ctx.reject(f"{path}.name", tname, names.go_list(errs))  # Volcano's `%v` of them
            if tname in seen:
                ctx.reject(f"{path}.name", tname, "duplicated task name")
            seen.add(tname)
            replicas = _int(ctx, f"{path}.replicas", t.get("replicas"), 1,
                            below=f"'replicas' < 0 in task: {tname}, job: {name}")  # fmt: skip
            if total_replicas + replicas > self.limits.max_pods:
                ctx.reject(f"{path}.replicas", replicas, f"the job's tasks would have "
                           f"{total_replicas + replicas} pods; at most {self.limits.max_pods} "
                           "pods per job (Tessera's limit)")  # fmt: skip
                ctx.check()  # before anything proportional to the replica count
            tmin = _int(ctx, f"{path}.minAvailable", t.get("minAvailable"), replicas,
                        below=f"'minAvailable' < 0 in task: {tname}, job: {name}")  # fmt: skip
            if t.get("minAvailable") is None:  # the mutating webhook's (`mutateSpec`, nil only)
                unset_tasks.add(tname)
            if tmin > replicas:
                ctx.reject(
                    f"{path}.minAvailable", tmin, "'minAvailable' is greater than 'replicas'"
                )
            total_replicas += replicas
            total_min += tmin
            _not_acted_on(ctx, path, t)
            # The longest pod name the job controller creates (`<job>-<task>-<index>`).
            longest = f"{name}-{tname}-{max(replicas - 1, 0)}"
            if errs := names.qualified_name(longest):
                ctx.reject(f"{path}.name", tname, f"create pod with name {longest} validate "
                           f"failed {names.go_list(errs)}")  # fmt: skip
            # the job's annotations reach its pods (Volcano's controller copies them) — but not
            # its arrival, which is the job's: a Job admitted before the arrival was read would
            # otherwise be refused as a template change when judged again after an upgrade
            pod_defaults = {k: v for k, v in annotations.items() if k != ARRIVE_AT}
            meta = (t.get("template") or {}).get("metadata") or {}
            if isinstance(meta, dict) and ARRIVE_AT in (meta.get("annotations") or {}):
                ctx.warn(f"{path}.template.metadata.annotations[{ARRIVE_AT}]", str(meta["annotations"][ARRIVE_AT]),
                         "not read in a task's template: a Job arrives whole (its controller makes "
                         "its pods together), at the Job's own metadata.annotations[tessera.io/arrive-at]")  # fmt: skip
            # Pod names are derived (`snapshot.task_names`), not stored: the event stays O(tasks).
            # the job's own volumes are in every pod the job controller makes (jobvolumes.py)
            template = with_job_volumes(t.get("template") or {}, spec.get("volumes"), name,
                                        annotations.get(OBJECT_UID, ""))  # fmt: skip
            task = self._task(ctx, f"{path}.template", template, role=tname,
                              replicas=replicas, min_available=tmin, pod_names=(),
                              defaults=pod_defaults, counts_needed=False,
                              job_class=str(spec.get("priorityClassName") or ""),
                              job_queue=queue)  # fmt: skip
            depends_on, depends_any = dependson.named(t.get("dependsOn"))
            task = TaskSpec(
                **{
                    **_fields(task),
                    "policies": self._policies(ctx, f"{path}.policies", t.get("policies")),
                    # its pods start once the tasks it names are ready (dependson.py)
                    "depends_on": depends_on,
                    "depends_any": depends_any,
                }
            )
            tasks.append(task)
        # Volcano's mutating webhook takes 0 for unset (`patchDefaultMinAvailable`,
        # `patchDefaultMaxRetry`): kept as 0, `maxRetry: 0` failed a job at its first restart
        # and `minAvailable: 0` placed it with no gang
        given_min = _int(ctx, "spec.minAvailable", spec.get("minAvailable"), 0,
                         below="job 'minAvailable' must be >= 0.")  # fmt: skip
        min_available = given_min or total_min
        self.unset[(namespace, name)] = Unset(job_min=given_min == 0, task_mins=frozenset(unset_tasks))
        if total_replicas < min_available:
            ctx.reject(
                "spec.minAvailable",
                min_available,
                "job 'minAvailable' should not be greater than total replicas in tasks",
            )
        max_retry = _int(ctx, "spec.maxRetry", spec.get("maxRetry"), DEFAULT_MAX_RETRY,
                         below="'maxRetry' cannot be less than zero.") or DEFAULT_MAX_RETRY  # fmt: skip
        ttl = spec.get("ttlSecondsAfterFinished")  # the garbage collector's delay (jobcontroller.py)
        if ttl is not None and _int(ctx, "spec.ttlSecondsAfterFinished", ttl, 0, None) < 0:
            self._newer_rule(ctx, True, "spec.ttlSecondsAfterFinished", ttl,
                             "'ttlSecondsAfterFinished' cannot be less than zero.", invalid_value=False)  # fmt: skip
        min_success = spec.get("minSuccess")
        if (
            min_success is not None
            and _int(ctx, "spec.minSuccess", min_success, 1, 1) > total_replicas
        ):
            ctx.reject(
                "spec.minSuccess",
                min_success,
                "job 'minSuccess' should not be greater than total replicas",
            )
        pc_name = str(spec.get("priorityClassName") or "")
        priority = self._priority_of(ctx, "spec.priorityClassName", pc_name)
        for where, value, rule in (*dependency_problems(spec.get("tasks") or [], [t.name for t in tasks]),
                                   *volume_problems(spec.get("volumes"))):
            ctx.reject(where, value, rule)
        refused, warned = check_plugins(spec.get("plugins"), [t.name for t in tasks], self.limits.plugins_off)
        for problem in refused:
            ctx.reject(problem.path, problem.value, problem.rule)
        for problem in warned:
            ctx.warn(problem.path, problem.value, problem.rule)
        policies = self._policies(ctx, "spec.policies", spec.get("policies"))
        topology = self._network_topology(ctx, spec)
        self._job_schedulers(ctx, spec)
        ctx.check()
        self.manifests[(namespace, name)] = manifest_text([doc])
        min_res = min_resources(min_available, tasks)
        return JobSpec(
            namespace=namespace, name=name, queue=queue, kind="Job", min_available=min_available,
            priority=priority, priority_class=pc_name, tasks=tuple(tasks), max_retry=max_retry,
            policies=policies, annotations=annotations,
            arrive_at=_seconds(ctx, f"metadata.annotations[{ARRIVE_AT}]", annotations.get(ARRIVE_AT)) or 0.0,
            min_resources=min_res,
            min_success=None if min_success is None else int(min_success),
            network_topology=topology,
        )  # fmt: skip


def _overcommit_allowed(resource: str) -> bool:
    """Kubernetes `IsOvercommitAllowed`: native resources (no domain, or `kubernetes.io/`) other
    than hugepages. Extended resources (`huawei.com/Ascend910B3`, `nvidia.com/gpu`) are not:
    their request must equal their limit, and a request needs a limit."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith("hugepages-")


def _fields(task: TaskSpec) -> dict[str, Any]:
    return {f: getattr(task, f) for f in task.__struct_fields__}


def admit(
    docs: Sequence[Mapping[str, Any]],
    parser: DeviceRequestParser | None = None,
    device_names: frozenset[str] = frozenset(),
    existing_queues: Mapping[str, QueueSpec] | None = None,
    existing_priority_classes: Mapping[str, PriorityClass] | None = None,
    limits: WorkloadLimits = DEFAULT_WORKLOAD_LIMITS,
    largest: Largest | None = None,
    live_jobs: Container[tuple[str, str]] = (),
    namespace_queues: Mapping[str, str] | None = None,
) -> Workload:
    """Normalize and validate `docs`; never raises for bad input (rejections are returned).

    `existing_queues` (name → spec with its current state) and `existing_priority_classes` are
    what a running system already has: jobs are checked against them; they are returned in
    `Workload.queues` / `Workload.priority_classes` too. `limits` bounds each object's counts
    and sizes (`limits.py`). `live_jobs` ((namespace, name)) run already: a Job or PodGroup of
    that name is an update, which a queue closed since it was admitted does not refuse.
    `namespace_queues`: namespace → its `scheduling.volcano.sh/queue-name` annotation, the queue
    of a PodGroup (or a plain pod's implied one) made there without a queue.
    """
    admission = Admission(parser, device_names, limits, largest)
    admission.live_jobs = live_jobs
    admission.namespace_queues = namespace_queues or {}
    admission.queues.update(existing_queues or {})
    for pc in (existing_priority_classes or {}).values():
        admission.priority[pc.name] = pc
        if pc.global_default:
            admission.default_priority = pc.value
    return admission.run(docs)
