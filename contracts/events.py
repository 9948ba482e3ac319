"""The event vocabulary: every fact the log can hold, grouped by the aggregate it belongs to.

Aggregates map to subjects (see `contracts.subjects`): queue, job, node and card. Adding an event
= adding a class here and to `ALL_EVENTS`; the schema-drift test then asks for a regenerated
`contracts/schema/events.json`.
"""

from __future__ import annotations

from contracts.base import Event, Record
from contracts.devices import CardSpec, CardUsage, SliceSpec
from contracts.workloads import (
    DeviceRequest,
    HostPort,
    HyperNodeMember,
    JobSpec,
    LabelRequirement,
    PodAffinity,
    QueueSpec,
)

# --- queue aggregate ---------------------------------------------------------------------------


class QueueCreated(Event, frozen=True, tag="QueueCreated"):
    spec: QueueSpec


class QueueStateChanged(Event, frozen=True, tag="QueueStateChanged"):
    queue: str
    state: str  # Open | Closing | Closed
    reason: str = ""


class QueueUpdated(Event, frozen=True, tag="QueueUpdated"):
    """A Queue applied again with another spec (`kubectl apply`, `tessera queue update`): the
    whole new spec replaces the old one; the queue's state stays what the log last set."""

    spec: QueueSpec


class QueueDeleted(Event, frozen=True, tag="QueueDeleted"):
    """Volcano's webhook allows it only for a queue without jobs or child queues, never for
    `default` or `root`; the name may be created again afterwards."""

    queue: str
    reason: str = ""


class PriorityClassCreated(Event, frozen=True, tag="PriorityClassCreated"):
    """A `scheduling.k8s.io/v1` PriorityClass, kept so later submissions can name it."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


# --- job aggregate -----------------------------------------------------------------------------


class JobSubmitted(Event, frozen=True, tag="JobSubmitted"):
    spec: JobSpec
    manifest: str = ""  # the object as the user wrote it (YAML/JSON), for explanations
    #: values admission changed while accepting it (HAMi's clamps), as `<path>: <what>`
    warnings: tuple[str, ...] = ()


class JobUpdated(Event, frozen=True, tag="JobUpdated"):
    """A live job's object changed the way Volcano lets it change after admission (its job
    webhook: `minAvailable`, `tasks[*].replicas`, `priorityClassName`; a kubectl PodGroup: its
    minMember and the pods that name it). Only admission appends it, with the whole new spec:
    added pods start Pending, removed pods that still run are stopped ("scaled down") and
    leave the job once finished, the rest of the job's state is kept."""

    namespace: str
    name: str
    spec: JobSpec
    reason: str = ""  # what changed, in words (`tasks[worker].replicas 2 → 3`)


class JobRejected(Event, frozen=True, tag="JobRejected"):
    namespace: str
    name: str
    reasons: tuple[str, ...]
    #: pods that exist although this PodGroup was refused: they wait (unbound) for the group,
    #: as on a cluster where Tessera, with no admission webhook, meets pods once they exist
    #: (Volcano's pod webhook would have refused them at creation)
    pods: tuple[str, ...] = ()


class JobPhaseChanged(Event, frozen=True, tag="JobPhaseChanged"):
    namespace: str
    name: str
    phase: str  # Pending | Inqueue | Running | Completed | Failed | Aborted ...
    reason: str = ""


class SliceAssignment(Record, frozen=True):
    """One slice of one task on one card, as the scheduler proposes and the allocator books it."""

    card: str  # uuid
    node: str
    slice: SliceSpec
    expected_seq: int = 0  # card subject's last sequence the decision was based on


class ScorePart(Record, frozen=True):
    """One node-order plugin's part of a node's score."""

    plugin: str
    score: float


class NodeScore(Record, frozen=True):
    """A node the task could also have gone to, with its score (a runner-up)."""

    node: str
    score: float


class TaskPlacement(Record, frozen=True):
    task: str  # "<task-name>-<replica>"
    node: str
    slices: tuple[SliceAssignment, ...] = ()
    score: float = 0.0
    #: why this node: each node-order plugin's part of `score` (sums to it)
    parts: tuple[ScorePart, ...] = ()
    #: why not the others: the next best feasible nodes, best first (at most 3)
    runners_up: tuple[NodeScore, ...] = ()
    feasible: int = 0  # how many feasible nodes the choice was made among
    cards_why: str = ""  # why these cards: the card policy and each chosen card's score
    # an existing placement without HAMi's allocated annotations: the allocator fits these
    # requests on the node's free cards when it books the pod (DESIGN §8)
    fit: tuple[DeviceRequest, ...] = ()


class PlacementProposed(Event, frozen=True, tag="PlacementProposed"):
    namespace: str
    name: str
    based_on: int  # stream sequence of the snapshot
    placements: tuple[TaskPlacement, ...]
    session: int = 0
    # the pods already run there (placed before Tessera, or by another scheduler): book them,
    # never bind them
    existing: bool = False
    #: the session also admitted the job (its PodGroup Pending → Inqueue): the fold moves it
    #: here, where a `JobPhaseChanged` Inqueue of its own came first before (one message per
    #: job less for every reader; `SchedulerConfigured.admits_in_proposal`)
    admits: bool = False


class PlacementCommitted(Event, frozen=True, tag="PlacementCommitted"):
    namespace: str
    name: str
    placements: tuple[TaskPlacement, ...]
    proposal_seq: int = 0
    existing: bool = False  # booked pods that already run: nothing to bind
    #: the fold derives the PodGroup's phase at this commit (Running once its scheduled pods
    #: reach minMember, `snapshot.committed_phase`) and the queue service writes no
    #: `JobPhaseChanged` for it; False in logs written before, where that event follows
    sets_phase: bool = False


class BindingFailed(Event, frozen=True, tag="BindingFailed"):
    """The API server refused the binding of a committed task (pod gone, node gone, recreated),
    or the pod itself (the job controller's create refused: PodSecurity, a quota, a webhook):
    its slices are released and the task waits again. `retry_at` (wall-clock seconds, 0: at
    once) holds the job back from placement until then, or until the job changes: a Job whose
    pods the API server refuses books no cards while its controller backs off, as under
    Volcano, where a pod never made is never allocated."""

    namespace: str
    name: str
    task: str
    node: str
    reason: str
    retry_at: float = 0.0


#: how a `PlacementRejected.reason` begins when the allocator refused on a card ledger the
#: proposal had not seen (a slice's `expected_seq` behind the card's last sequence): a race the
#: next session's view settles, not a judgment it would repeat — no refusal is remembered
STALE_VIEW = "stale view"


class PlacementRejected(Event, frozen=True, tag="PlacementRejected"):
    namespace: str
    name: str
    reason: str
    proposal_seq: int = 0


class ReasonGroup(Record, frozen=True):
    """Nodes that failed for the same reason, in words (kube-scheduler's "N nodes …")."""

    reason: str
    plugin: str = ""
    nodes: int = 0
    examples: tuple[str, ...] = ()  # a few of those nodes, by name


class JobUnschedulable(Event, frozen=True, tag="JobUnschedulable"):
    namespace: str
    name: str
    reason: str
    #: node → why it failed; a sample when more nodes failed than `MAX_NODE_REASONS` (one event
    #: per node would outgrow a NATS message on a large cluster): then `reason_counts` says how
    #: many nodes gave each reason
    node_reasons: dict[str, str] = {}
    reason_counts: dict[str, int] = {}
    #: the first rule that failed, in words: resource, asked, free or allowed, plugin, switch
    why: str = ""
    plugin: str = ""  # the plugin whose rule `why` is
    #: per node, grouped and counted (largest first, at most 8 groups)
    groups: tuple[ReasonGroup, ...] = ()
    nodes: int = 0  # nodes in the session
    unblock: str = ""  # the smallest change that would let it run
    based_on: int = 0  # stream sequence of the session's snapshot
    session: int = 0


class EvictionRequested(Event, frozen=True, tag="EvictionRequested"):
    namespace: str
    name: str
    task: str
    reason: str
    #: "<ns>/<job>" the eviction makes room for (preempt, reclaim), so the waiting job's story
    #: can say what it waits for; empty for other evictions and in logs written before it
    for_job: str = ""


class TaskStarted(Event, frozen=True, tag="TaskStarted"):
    namespace: str
    name: str
    task: str
    node: str
    at: float = 0.0


class TaskFinished(Event, frozen=True, tag="TaskFinished"):
    namespace: str
    name: str
    task: str
    node: str
    exit_code: int = 0
    reason: str = ""
    at: float = 0.0


class JobDeleted(Event, frozen=True, tag="JobDeleted"):
    namespace: str
    name: str


# --- scheduler aggregate -----------------------------------------------------------------------


class SchedulerConfigured(Event, frozen=True, tag="SchedulerConfigured"):
    """The configuration a scheduler decides with, as its operator wrote it: appended when a
    scheduler starts with a configuration the log does not end with, and referenced (by its
    sequence) from every decision it appends, so `tessera replay --verify` re-runs each session
    with the configuration it ran with — never with the replaying binary's defaults."""

    scheduler: str  # which scheduler (one subject each): `scheduler` for the service
    conf: str  # volcano-scheduler.conf text (the built-in default written out when none given)
    device_config: str = ""  # HAMi device-config.yaml text; "" = the built-in catalogue
    #: how the shell turns a session's decisions into events: `service` (outstanding
    #: proposals assumed, pipelined jobs not proposed) or `simulate` (commits in the session,
    #: pipelined reservations proposed when they change)
    mode: str = "service"
    #: sessions of this record admit a job they also propose through the proposal's `admits`
    #: (no `JobPhaseChanged` Inqueue of its own); False in records written before, whose
    #: sessions re-run as they ran
    admits_in_proposal: bool = False
    #: sessions of this record append a waiting job's enqueue refusal again only when its own
    #: words, its rule or the kinds of reason its trial names change — not when the trial's
    #: groups of nodes do (they move with every other job's placement and end: 95 % of a
    #: churn's log, one event per waiting job at each move); False in records written before,
    #: whose sessions re-run as they ran
    verdicts_by_words: bool = False
    #: the generation of the scheduling rules its sessions decide by
    #: (`services.core.scheduling.config.RULES`): a rule that changes what a session decides
    #: from the same log (where a pod fits, which words a waiting job is given) takes effect
    #: from a generation on, so a log recorded before it re-runs as it ran. 0 in records written
    #: before generations were counted
    rules: int = 0


# --- the log itself ------------------------------------------------------------------------------


class LogCompacted(Event, frozen=True, tag="LogCompacted"):
    """A compaction is about to purge finished jobs' subjects (`services/runtime/compaction.py`),
    appended before the purge, and again once its purges are done: a snapshot older than
    `horizon` may hold one of those jobs live and its end was in the purged tail, so a restart
    cannot use it (`Snapshots.recover`); and a fold of the log that overlapped a purge may hold
    a job whose start it read and whose end was purged before it got there, so no fold is
    trusted unless no compaction was `running` and no record came while it folded."""

    #: the highest sequence of a job message any compaction has purged or is purging: cumulative
    #: (the previous record's, raised), so the last record of the subject is all a reader needs
    horizon: int
    jobs: int = 0  # finished jobs this compaction forgets
    #: compactions purging as of this record (one's start adds one, its end takes it away):
    #: 0 — every purge up to `horizon` has happened (records before this field said 0 too)
    running: int = 0


# --- node aggregate ----------------------------------------------------------------------------


class RunningTask(Record, frozen=True):
    """A pod already running on a node when the node is first registered (placed before
    Tessera, or by another scheduler): booked with the node's cards, before anything else is
    placed there. Slices from HAMi's `-devices-allocated` annotations, else `fit` requests."""

    namespace: str
    job: str
    task: str
    slices: tuple[SliceAssignment, ...] = ()
    fit: tuple[DeviceRequest, ...] = ()


class NodeRegistered(Event, frozen=True, tag="NodeRegistered"):
    node: str
    cpu_milli: int
    memory_mib: int
    pods: int = 110
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    taints: tuple[str, ...] = ()
    cards: tuple[CardSpec, ...] = ()
    running: tuple[RunningTask, ...] = ()  # only on a first registration (see RunningTask)
    #: the extended resources the node's kubelet serves (`status.allocatable` names with a
    #: domain and a positive count, sorted). A pod asking one it does not serve is admitted by
    #: the kubelet with that resource dropped and no device plugin called: it runs without the
    #: card. None: not known (an inventory's simulated node), every card's name counts as served.
    extended: tuple[str, ...] | None = None
    #: the rest of `status.allocatable` a pod's request is fitted against, in the core's units
    #: as admission reads a pod's (ephemeral-storage MiB; hugepages-<size> and other extended
    #: resources milli-units): everything but cpu, memory, pods and the cards' device names.
    #: Without it a pod asking `ephemeral-storage` fitted no node.
    resources: dict[str, int] = {}
    #: the Node object's `metadata.uid` ('' when not known: an inventory's node, an older
    #: agent). A node deleted and made again under its name is another object: `get nodes`
    #: reads its AGE from the registration where the uid changed, as kubectl reads the new
    #: object's creationTimestamp (it showed the deleted one's age).
    uid: str = ""


class NodeLost(Event, frozen=True, tag="NodeLost"):
    node: str
    reason: str = ""


class OtherPods(Record, frozen=True):
    """Pods of other schedulers on one node alike in what inter-pod affinity, topology spread
    and NodePorts read of them (namespace, labels, their own affinity terms, host ports), and
    how many there are: a Tessera pod's affinity may ask for them, their anti-affinity keeps
    Tessera's away, and a host port one of them holds is not free for Tessera's pods (a
    DaemonSet's node-exporter on 9100: the kubelet refuses a second pod binding it)."""

    namespace: str
    labels: dict[str, str] = {}
    pod_affinity: PodAffinity | None = None
    count: int = 1
    #: the host ports each of these pods publishes (`ports[].hostPort`, app and init
    #: containers, as admission reads a Tessera pod's); kube-scheduler's NodeInfo.UsedPorts
    host_ports: tuple[HostPort, ...] = ()


class NodeUsage(Event, frozen=True, tag="NodeUsage"):
    """What the pods Tessera does not schedule hold on a node: every non-terminal pod bound to
    it under another scheduler's name (default-scheduler, DaemonSets, static/mirror pods),
    summed as kube-scheduler's NodeInfo sums requests (containers, the largest init container,
    overhead). The whole figure, appended when it changes, on the node's `use` subject (the
    node subject's last message stays its registration, which recovery reads). Sessions place
    Tessera's pods only in what is left (issue 28)."""

    node: str
    cpu_milli: int = 0
    memory_mib: int = 0
    pods: int = 0
    scalars: dict[str, int] = {}  # other extended resources (milli-units)
    others: tuple[OtherPods, ...] = ()  # the same pods by labels and terms (sorted, grouped)


class NodesListed(Event, frozen=True, tag="NodesListed"):
    """A node agent has registered every node of its first full listing of the cluster (with
    what other schedulers' pods hold there, which goes before each node): from here the log's
    inventory is the cluster's, as kube-scheduler's is once its informers have synced. Before
    it, a session would judge pods against the nodes registered so far and tell the rest "no
    node fits" seconds before placing them; the scheduler waits for it (`--await-inventory`)."""

    agent: str
    nodes: int  # how many nodes the listing registered (or found registered already)


# --- card aggregate (the per-card slice ledger) ------------------------------------------------


class CardRegistered(Event, frozen=True, tag="CardRegistered"):
    card: CardSpec
    usage: CardUsage = CardUsage()


class SliceReserved(Event, frozen=True, tag="SliceReserved"):
    card: str
    node: str
    owner: str  # "<namespace>/<job>/<task>"
    slice: SliceSpec
    usage: CardUsage


class SliceReleased(Event, frozen=True, tag="SliceReleased"):
    card: str
    node: str
    owner: str
    usage: CardUsage
    reason: str = ""


class CardHealthChanged(Event, frozen=True, tag="CardHealthChanged"):
    card: str
    node: str
    healthy: bool
    usage: CardUsage


class CardRetired(Event, frozen=True, tag="CardRetired"):
    card: str
    node: str
    usage: CardUsage


# --- storage (the API server's PersistentVolumeClaims, PersistentVolumes, StorageClasses) --------


class ClaimChanged(Event, frozen=True, tag="ClaimChanged"):
    """A PersistentVolumeClaim as the API server holds it now (the whole of what scheduling
    reads of it): kube-scheduler's VolumeBinding decides on these, so sessions do too."""

    namespace: str
    name: str
    storage_class: str = ""  # spec.storageClassName ("" = none: bound statically or Immediate)
    volume: str = ""  # spec.volumeName: the PV it is bound to
    phase: str = "Pending"  # status.phase: Pending | Bound | Lost
    selected_node: str = ""  # volume.kubernetes.io/selected-node (WaitForFirstConsumer)
    deleting: bool = False  # metadata.deletionTimestamp is set
    #: spec.accessModes: ReadWriteOncePod lets one pod of the whole cluster use it at a time
    access_modes: tuple[str, ...] = ()


class VolumeChanged(Event, frozen=True, tag="VolumeChanged"):
    """A PersistentVolume: where it can be used (`spec.nodeAffinity.required.nodeSelectorTerms`,
    ORed terms as in TaskSpec.affinity; local volumes name one node)."""

    name: str
    node_affinity: tuple[tuple[LabelRequirement, ...], ...] = ()
    storage_class: str = ""
    phase: str = ""  # status.phase: Available | Bound | Released | Failed
    #: its zone and region labels (`topology.kubernetes.io/zone|region` and the beta
    #: `failure-domain.beta.kubernetes.io/` ones), as kube-scheduler's VolumeZone reads them:
    #: in-tree and many static volumes say where they are only so, without a nodeAffinity
    topology: dict[str, str] = {}


class StorageClassChanged(Event, frozen=True, tag="StorageClassChanged"):
    name: str
    binding_mode: str = "Immediate"  # volumeBindingMode: Immediate | WaitForFirstConsumer
    provisioner: str = ""
    #: allowedTopologies: where it provisions (matchLabelExpressions as `In` terms, ORed)
    allowed_topologies: tuple[tuple[LabelRequirement, ...], ...] = ()


class StorageDeleted(Event, frozen=True, tag="StorageDeleted"):
    """One of the three storage kinds is gone from the API server."""

    kind: str  # pvc | pv | sc
    name: str
    namespace: str = ""  # a claim's


# --- namespace quota (the API server's ResourceQuotas) --------------------------------------------


class QuotaChanged(Event, frozen=True, tag="QuotaChanged"):
    """A namespace's ResourceQuota as enqueue reads it (Volcano's `resourcequota` plugin): its
    `spec.hard` and `status.used` under the names as written (`requests.huawei.com/Ascend910B3`,
    `limits.nvidia.com/gpumem`, `cpu`), in the core's units of the name without its
    `requests.`/`limits.` prefix (cpu milli-cores, memory MiB, pods a count, anything else
    milli-units: services/core/workload/quantity.py). `used` is the API server's (empty from
    `tessera apply` and simulate, as kubectl apply never writes status)."""

    namespace: str
    name: str
    hard: dict[str, int] = {}
    used: dict[str, int] = {}
    scoped: bool = False  # spec.scopes / scopeSelector: not applied to jobs (as Volcano)


class QuotaDeleted(Event, frozen=True, tag="QuotaDeleted"):
    namespace: str
    name: str


# --- network topology (Volcano's HyperNodes, topology.volcano.sh/v1alpha1) ----------------------


class HyperNodeChanged(Event, frozen=True, tag="HyperNodeChanged"):
    """A HyperNode as it is now (admitted from `tessera apply` or the API server): one network
    domain of `tier` (lower tiers are closer), its members nodes or other HyperNodes."""

    name: str
    tier: int
    tier_name: str = ""
    members: tuple[HyperNodeMember, ...] = ()


class HyperNodeDeleted(Event, frozen=True, tag="HyperNodeDeleted"):
    name: str


# --- Namespaces: their labels, which a pod affinity term's namespaceSelector reads ------------


class NamespaceChanged(Event, frozen=True, tag="NamespaceChanged"):
    """A Namespace's labels (and its queue annotation) as they are now (admitted from `tessera
    apply` or the API server), `kubernetes.io/metadata.name` among the labels as the API server
    always sets it. A namespace the log has no event of is taken to have that label only."""

    name: str
    labels: dict[str, str] = {}
    #: its `scheduling.volcano.sh/queue-name` annotation: the queue of a PodGroup made there
    #: without one (Volcano's PodGroup mutating webhook), a plain pod's implied group included
    queue: str = ""


class NamespaceDeleted(Event, frozen=True, tag="NamespaceDeleted"):
    name: str


# --- PodDisruptionBudgets (policy/v1): the victims preemption and reclaim may take -------------


class DisruptionBudgetChanged(Event, frozen=True, tag="DisruptionBudgetChanged"):
    """A PodDisruptionBudget as the `pdb` plugin reads it: the pods of its namespace its
    selector matches (None: no selector, no pod; (): every pod of the namespace, as policy/v1
    reads an empty one), how many of them may go now (`status.disruptionsAllowed`, the
    disruption controller's count) and the pods an eviction already took from that allowance
    (`status.disruptedPods`)."""

    namespace: str
    name: str
    selector: tuple[LabelRequirement, ...] | None = None
    allowed: int = 0
    disrupted: tuple[str, ...] = ()


class DisruptionBudgetDeleted(Event, frozen=True, tag="DisruptionBudgetDeleted"):
    namespace: str
    name: str


ALL_EVENTS: tuple[type[Event], ...] = (
    QueueCreated,
    QueueStateChanged,
    QueueUpdated,
    QueueDeleted,
    PriorityClassCreated,
    JobSubmitted,
    JobRejected,
    JobPhaseChanged,
    JobUpdated,
    PlacementProposed,
    PlacementCommitted,
    PlacementRejected,
    BindingFailed,
    JobUnschedulable,
    EvictionRequested,
    TaskStarted,
    TaskFinished,
    JobDeleted,
    NodeRegistered,
    NodeUsage,
    NodeLost,
    NodesListed,
    CardRegistered,
    SliceReserved,
    SliceReleased,
    CardHealthChanged,
    CardRetired,
    SchedulerConfigured,
    LogCompacted,
    ClaimChanged,
    VolumeChanged,
    StorageClassChanged,
    StorageDeleted,
    QuotaChanged,
    QuotaDeleted,
    HyperNodeChanged,
    HyperNodeDeleted,
    DisruptionBudgetChanged,
    DisruptionBudgetDeleted,
    NamespaceChanged,
    NamespaceDeleted,
)
