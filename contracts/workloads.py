"""Normalized workload records, as admission produces them from Kubernetes/Volcano manifests.

They are the *result* of parsing (HAMi request rules applied), so the scheduler never re-reads
raw YAML. Raw manifests are kept alongside for explainability.
"""

from __future__ import annotations

from contracts.base import Record


class DeviceRequest(Record, frozen=True):
    """One container's ask for `count` cards of one vendor family, after HAMi normalization."""

    vendor: str
    type: str  # resource family / commonWord ("Ascend910B3", "NVIDIA", ...)
    count: int
    memory: int = 0  # MB per card; 0 with memory_pct = whole-card percentage
    memory_pct: int = 101  # HAMi's "unset" sentinel
    cores: int = 0
    template: str | None = None
    exclusive: bool = False
    allowed_types: tuple[str, ...] = ()  # alias expansion: any of these card types fits
    mode: str = ""  # requested slicing mode: "" (any/template), "hami-core", "mig"
    use_uuids: tuple[str, ...] = ()  # only these card uuids (HAMi use-*uuid annotations)
    nouse_uuids: tuple[str, ...] = ()  # never these card uuids
    use_types: tuple[str, ...] = ()  # card type must contain one of these (case-insensitive)
    nouse_types: tuple[str, ...] = ()  # card type must contain none of these
    numa_bind: bool = False  # all cards of the container on one NUMA node
    resource: str = ""  # the count resource name it was parsed from, for explanations
    container: int = 0  # index in spec.containers: HAMi's pod annotations have a slot per container; negative: an init container's (slot init_containers + container)


class Toleration(Record, frozen=True):
    """A pod toleration (Kubernetes `core/v1` semantics: operator Equal|Exists, empty effect = all)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class HostPort(Record, frozen=True):
    """One container port published on the node (`ports[].hostPort`), as kube-scheduler's
    NodePorts reads it: protocol defaults to TCP and hostIP to 0.0.0.0 (every address)."""

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


class LabelRequirement(Record, frozen=True):
    """One `matchExpressions` entry of a required node-affinity term, or (`field`) one
    `matchFields` entry: `metadata.name` In/NotIn one node name."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    field: bool = False  # a node field (matchFields), not a label


class PreferredNodeTerm(Record, frozen=True):
    """One `preferredDuringSchedulingIgnoredDuringExecution` entry of node affinity: nodes
    matching `requirements` (labels and fields, ANDed; none: no node) score `weight` (1..100)."""

    weight: int
    requirements: tuple[LabelRequirement, ...] = ()


class PodAffinityTerm(Record, frozen=True):
    """One `podAffinity`/`podAntiAffinity` term as kube-scheduler's InterPodAffinity reads it:
    pods matching `selector` in the term's namespaces, co-located when their nodes share the
    value of the `topology_key` label. Admission resolves the namespaces (the pod's own when
    the term names none and has no selector) and merges matchLabelKeys/mismatchLabelKeys into
    `selector`, as the API server does at creation."""

    topology_key: str
    selector: tuple[LabelRequirement, ...] | None = None  # None: no labelSelector, no pod matches
    namespaces: tuple[str, ...] = ()
    namespace_selector: tuple[LabelRequirement, ...] | None = None  # (): every namespace
    weight: int = 0  # preferred terms only: 1..100


class PodAffinity(Record, frozen=True):
    """A pod's inter-pod affinity: required terms (all must hold) and weighted preferred ones."""

    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[PodAffinityTerm, ...] = ()
    preferred_anti: tuple[PodAffinityTerm, ...] = ()


class SpreadConstraint(Record, frozen=True):
    """One `topologySpreadConstraints` entry as kube-scheduler's PodTopologySpread reads it; the
    API server's defaults applied (nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore) and
    matchLabelKeys merged into `selector` at admission. `min_domains` 0: unset."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = "DoNotSchedule"  # | ScheduleAnyway
    selector: tuple[LabelRequirement, ...] | None = None  # None: no labelSelector, no pod counts
    min_domains: int = 0
    node_affinity_policy: str = "Honor"  # | Ignore
    node_taints_policy: str = "Ignore"  # | Honor


class NetworkTopology(Record, frozen=True):
    """A gang's `spec.networkTopology` (Volcano v1.12+, on a Job and on a PodGroup): `hard`
    places the whole gang inside one HyperNode of tier <= `highest_tier` or keeps it waiting;
    `soft` prefers the lowest tier that holds it and places it anyway when none does."""

    mode: str = "hard"  # hard | soft (the CRD's default)
    highest_tier: int | None = None  # highestTierAllowed
    highest_tier_name: str = ""  # highestTierName: the tier whose HyperNodes carry this tierName


class HyperNodeMember(Record, frozen=True):
    """One `spec.members[]` entry of a HyperNode: a node or a HyperNode, chosen by exactly one
    of exactMatch (`exact`), regexMatch (`regex`, searched in the node name as Go's
    `MatchString` does) or labelMatch (`labels`, matchLabels as In requirements)."""

    type: str  # Node | HyperNode
    exact: str = ""
    regex: str = ""
    labels: tuple[LabelRequirement, ...] | None = None


class TaskSpec(Record, frozen=True):
    name: str
    replicas: int = 1
    cpu_milli: int = 0
    memory_mib: int = 0
    devices: tuple[DeviceRequest, ...] = ()
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    duration: float | None = None  # tessera.io/duration: seconds a task runs once started
    min_available: int | None = None  # Volcano task.minAvailable → PodGroup minTaskMember
    priority: int = 0  # pod priority (PriorityClass value, or `volcano.sh/task-priority`)
    priority_class: str = ""
    labels: dict[str, str] = {}
    scalars: dict[str, int] = {}  # extended resources (milli-units), e.g. huawei.com/Ascend910B3
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[tuple[LabelRequirement, ...], ...] = ()  # required node terms, ORed
    preferred_affinity: tuple[PreferredNodeTerm, ...] = ()  # node affinity's preferred terms
    preemptable: bool = True  # volcano.sh/preemptable (default true)
    preemption_policy: str = "PreemptLowerPriority"
    policies: tuple[tuple[str, str], ...] = ()  # task-level lifecycle (event, action)
    exit_code: int = 0  # tessera.io/exit-code: what a simulated run exits with
    pod_names: tuple[str, ...] = ()  # explicit pod names (plain pods); else <job>-<task>-<i>
    containers: int = 1  # app containers (HAMi encodes one device slot per container)
    init_containers: int = 0  # their slots come first in HAMi's encoding
    #: init containers' asks the app containers' slices hold (booked nothing more): each still
    #: names its own slot in the binding's annotation — the kubelet calls the device plugin's
    #: Allocate for it, which takes the first slot with devices — on the card that holds it
    init_devices: tuple[DeviceRequest, ...] = ()
    host_ports: tuple[HostPort, ...] = ()  # app and init containers' hostPorts (NodePorts)
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates[].name: not scheduled while any
    pod_affinity: PodAffinity | None = None  # spec.affinity.podAffinity / podAntiAffinity
    spread: tuple[SpreadConstraint, ...] = ()  # spec.topologySpreadConstraints
    claims: tuple[str, ...] = ()  # spec.volumes[].persistentVolumeClaim.claimName (its namespace)
    runtime_class: str = ""  # spec.runtimeClassName (HAMi's webhook sets one on GPU pods; Tessera cannot)
    #: a Volcano Job task's `dependsOn.name`: its pods start once those tasks are ready
    #: (`services.core.workload.dependson`); `depends_any`: `iteration: any`, any one of them
    depends_on: tuple[str, ...] = ()
    depends_any: bool = False


class JobSpec(Record, frozen=True):
    namespace: str
    name: str
    queue: str = "default"
    kind: str = "Pod"  # Pod | Job | PodGroup
    min_available: int = 1
    priority: int = 0
    priority_class: str = ""
    tasks: tuple[TaskSpec, ...] = ()
    max_retry: int = 3
    policies: tuple[tuple[str, str], ...] = ()  # (event, action) pairs, Volcano lifecycle
    annotations: dict[str, str] = {}
    arrive_at: float = 0.0
    min_resources: dict[str, int] | None = (
        None  # PodGroup minResources (cpu milli, memory MiB, milli)
    )
    phase: str = ""  # initial PodGroup phase from status.phase ("" = Pending)
    min_success: int | None = None
    network_topology: NetworkTopology | None = None  # spec.networkTopology (hypernodes.py)


class NodeGroupAffinity(Record, frozen=True):
    """A Queue's `spec.affinity` (Volcano's `nodegroup` plugin): node groups (the node label
    `volcano.sh/nodegroup-name`) its jobs must or would rather run in, and must or would rather
    not."""

    required: tuple[str, ...] = ()
    preferred: tuple[str, ...] = ()
    anti_required: tuple[str, ...] = ()
    anti_preferred: tuple[str, ...] = ()


class QueueSpec(Record, frozen=True):
    name: str
    weight: int = 1
    capability: dict[str, int] = {}
    deserved: dict[str, int] = {}
    guarantee: dict[str, int] = {}
    reclaimable: bool = True
    parent: str = ""
    state: str = "Open"
    priority: int = 0
    annotations: dict[str, str] = {}
    node_groups: NodeGroupAffinity | None = None  # spec.affinity (None: none)
    dequeue_strategy: str = "traverse"  # spec.dequeueStrategy: traverse | fifo
