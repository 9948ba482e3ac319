"""The frozen view a session decides on, and the projection that builds it from the log.

A session never reads the log: `ClusterProjection.apply(seq, event)` folds events (Volcano's
scheduler cache event handlers), `snapshot()` freezes the result (Volcano `cache.Snapshot()`),
and `decide(snapshot, conf)` is a pure function of it. Time enters only as `Snapshot.now`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from contracts.base import Event
from contracts.devices import CardSpec, CardUsage, SliceSpec
from contracts.events import (
    BindingFailed,
    CardHealthChanged,
    CardRegistered,
    DisruptionBudgetChanged,
    DisruptionBudgetDeleted,
    EvictionRequested,
    HyperNodeChanged,
    HyperNodeDeleted,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUpdated,
    NamespaceChanged,
    NamespaceDeleted,
    NodeLost,
    NodeRegistered,
    NodeUsage,
    OtherPods,
    PlacementCommitted,
    PlacementProposed,
    QueueCreated,
    QueueDeleted,
    QueueStateChanged,
    QueueUpdated,
    QuotaChanged,
    QuotaDeleted,
    SliceAssignment,
    SliceReleased,
    SliceReserved,
    TaskFinished,
    TaskStarted,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling.quotastate import NO_QUOTAS, Quotas, QuotaState
from services.core.scheduling.resources import is_device_resource
from services.core.scheduling.storage import NO_STORAGE, Storage, StorageState

# Task (pod) statuses, Volcano `pkg/scheduler/api/types.go`.
PENDING = "Pending"
ALLOCATED = "Allocated"
PIPELINED = "Pipelined"
BINDING = "Binding"
BOUND = "Bound"
RUNNING = "Running"
RELEASING = "Releasing"
SUCCEEDED = "Succeeded"
FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class CardSnap:
    spec: CardSpec
    usage: CardUsage = field(default_factory=CardUsage)
    seq: int = 0  # last ledger sequence read (the allocator's expected sequence)


#: The fold builds NodeSnap, TaskSnap and JobSnap positionally (`dataclasses.replace` cost ~3 µs
#: a call: 4 % of the queue's CPU in issue 29's profile), so their fields keep this order.
@dataclass(frozen=True, slots=True)
class NodeSnap:
    name: str
    cpu_milli: int
    memory_mib: int
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()
    cards: tuple[CardSnap, ...] = ()
    ready: bool = True
    #: held by pods of other schedulers (NodeUsage): cpu milli, memory MiB, pods
    held: tuple[int, int, int] = (0, 0, 0)
    #: those pods by labels and terms (NodeUsage.others), for inter-pod affinity and spread
    others: tuple[OtherPods, ...] = ()
    #: the extended resources its kubelet serves (NodeRegistered.extended; None: not known)
    extended: tuple[str, ...] | None = None
    #: allocatable beyond cpu, memory, pods and cards (NodeRegistered.resources)
    resources: dict[str, int] = field(default_factory=dict)
    #: of those, what other schedulers' pods hold (NodeUsage.scalars, device names left out)
    held_resources: dict[str, int] = field(default_factory=dict)
    #: the device names they hold (NodeUsage.scalars, milli-units): counts of a vendor plugin's
    #: whole cards (`mode: plugin`) they use, which the session keeps from Tessera's pods
    held_devices: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskSnap:
    pod: str  # pod name, unique within the job
    role: str  # task name (Volcano `volcano.sh/task-spec`)
    index: int  # replica index (pod name suffix)
    spec: TaskSpec
    status: str = PENDING
    node: str = ""
    slices: tuple[SliceAssignment, ...] = ()


def _task_as(t: TaskSnap, status: str, node: str, slices: tuple[SliceAssignment, ...]) -> TaskSnap:
    """`t` with another status, node and slices (positionally: see above)."""
    return TaskSnap(t.pod, t.role, t.index, t.spec, status, node, slices)


@dataclass(frozen=True, slots=True)
class JobSnap:
    spec: JobSpec
    created: int  # log sequence of JobSubmitted: creation order for tie-breaks
    phase: str = "Pending"  # PodGroup phase
    tasks: tuple[TaskSnap, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.spec.namespace}/{self.spec.name}"


@dataclass(frozen=True, slots=True)
class QueueSnap:
    spec: QueueSpec
    created: int
    state: str = "Open"


@dataclass(frozen=True, slots=True)
class Refused:
    """Where the allocator refused a job's proposals since anything they depend on changed
    (services/core/scheduling/view.py): a session places the job on other nodes, and on none
    once `everywhere` says why — so a refusal that the next session cannot change is not
    proposed again unchanged (issue 27)."""

    nodes: dict[str, str] = field(default_factory=dict)  # node → the allocator's reason there
    everywhere: str = ""
    #: held back from every node until this time (a `BindingFailed.retry_at`: its pods refused
    #: by the API server), for `held` — lifted sooner by a change of the job only
    until: float = 0.0
    held: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int = 0
    now: float = 0.0
    nodes: tuple[NodeSnap, ...] = ()
    queues: tuple[QueueSnap, ...] = ()
    jobs: tuple[JobSnap, ...] = ()
    refused: dict[str, Refused] = field(default_factory=dict)  # job key → its refusals
    storage: Storage = NO_STORAGE  # claims, volumes, storage classes (volumes.py)
    quotas: Quotas = NO_QUOTAS  # namespaces' ResourceQuotas (plugins/resourcequota.py)
    hypernodes: tuple[HyperNodeChanged, ...] = ()  # by name (hypernodes.py)
    #: when each running pod with a cooldown time started (plugins/cdp.py), by task uid
    started: dict[str, float] = field(default_factory=dict)
    #: the PodDisruptionBudgets, by namespace and name (plugins/pdb.py)
    budgets: tuple[DisruptionBudgetChanged, ...] = ()
    #: the labels of each namespace the log has a Namespace of, by name (interpod.py reads them
    #: for namespaceSelector; a namespace not here has its name label only)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)


#: the label or annotation giving a pod its cooldown time (Volcano's cdp plugin)
COOLDOWN_TIME = "volcano.sh/cooldown-time"


def cooled(spec: TaskSpec) -> bool:
    """Whether the pod names a cooldown time (its start is then kept: `Snapshot.started`)."""
    return COOLDOWN_TIME in spec.labels or COOLDOWN_TIME in spec.annotations


#: statuses of a pod that holds a node: a removed one stays in its job until it ends
HOLDING = frozenset({BOUND, RUNNING, RELEASING})

#: what the node agent on a cluster reports for a pod deleted from the API server while it
#: held its node — whoever deleted it (kubectl, an eviction, the pod GC of a lost node)
POD_DELETED = "pod deleted"
#: what the node-liveness monitor reports for a task on a node that stopped heartbeating: on a
#: cluster that pod is evicted (the taint manager deletes it), so it is POD_DELETED's kin
NODE_LOST = "node lost"
#: task ends that send the pod back to Pending: it is made and placed again. A deleted pod
#: (POD_DELETED) is not one of them by itself: it ends Failed until the queue service decides —
#: Volcano's PodEvicted: without a PodEvicted policy its `TaskFinished(evicted)` sends it back
#: (SyncJob, the retry count unchanged), in a restart its `restarted` (services/queue/flow.py
#: `pod_failed`). Pending at once, it was placed again before a restart's own end of it came,
#: which then unplaced the new pod (a second incarnation under load: test_volcano mid-restart)
BACK_TO_PENDING = frozenset({"evicted", "restarted"})


def leaving_of(jobs: dict[str, JobSnap], tasks: dict[str, dict[str, TaskSnap]]) -> dict[str, set[str]]:
    """`ClusterProjection.leaving` recomputed from the jobs' specs and tasks (a restored state)."""
    out: dict[str, set[str]] = {}
    for key, job in jobs.items():
        have = tasks.get(key, {})
        if len(have) <= sum(t.replicas if not t.pod_names else len(t.pod_names) for t in job.spec.tasks):
            continue  # the common case: no more pods than the spec names
        gone = set(have) - {pod for pod, _r, _i, _t in task_names(job.spec)}
        if gone:
            out[key] = gone
    return out


def task_names(spec: JobSpec) -> list[tuple[str, str, int, TaskSpec]]:
    """(pod, role, index, task) for every replica: `<job>-<task>-<i>` or the explicit pod names."""
    out = []
    for t in spec.tasks:
        names = t.pod_names or tuple(f"{spec.name}-{t.name}-{i}" for i in range(t.replicas))
        for i, pod in enumerate(names):
            out.append((pod, t.name, i, t))
    return out


class ClusterProjection:
    """Mutable fold of the log into what the scheduler needs; `snapshot()` freezes it.

    Terminal tasks (Succeeded/Failed) stay in the job for gang and phase accounting; an evicted
    or restarted task goes back to Pending (Volcano's job controller recreates the pod).

    A `JobUpdated` keeps what its pods did: added pods start Pending, removed ones that never
    ran or have finished go at once, removed ones that still hold a node stay (`leaving`) until
    they finish — Releasing once their eviction was asked — and then leave the job.
    """

    def __init__(self) -> None:
        self.seq = 0
        self.now = 0.0
        self.nodes: dict[str, NodeSnap] = {}
        self.cards: dict[str, CardSnap] = {}
        self.node_cards: dict[str, list[str]] = {}
        self.queues: dict[str, QueueSnap] = {}
        self.jobs: dict[str, JobSnap] = {}
        self.tasks: dict[str, dict[str, TaskSnap]] = {}
        #: jobs `waiting` has to look at (None: all of them), see there
        self._unchecked: set[str] | None = None
        #: job → its pods no longer in its spec that still hold a node (derived: `leaving_of`)
        self.leaving: dict[str, set[str]] = {}
        #: node → what other schedulers' pods hold there (NodeUsage: cpu milli, memory MiB, pods)
        self.held: dict[str, tuple[int, int, int]] = {}
        #: node → those pods by labels and terms (NodeUsage.others), where there are any
        self.others: dict[str, tuple[OtherPods, ...]] = {}
        #: node → their other resources (NodeUsage.scalars but the device names), where any
        self.held_resources: dict[str, dict[str, int]] = {}
        #: node → the device names they hold (NodeUsage.scalars' device names), where any
        self.held_devices: dict[str, dict[str, int]] = {}
        self.storage = StorageState()  # PVCs, PVs, StorageClasses (storage.py)
        self.quotas = QuotaState()  # namespaces' ResourceQuotas (quotastate.py)
        self.hypernodes: dict[str, HyperNodeChanged] = {}  # Volcano's HyperNodes, by name
        #: "<ns>/<job>/<pod>" → when it started running, for pods with a cooldown time only
        self.started: dict[str, float] = {}
        #: "<ns>/<name>" → the PodDisruptionBudget as last said (plugins/pdb.py)
        self.budgets: dict[str, DisruptionBudgetChanged] = {}
        self._hypernodes: tuple[HyperNodeChanged, ...] | None = ()  # sorted, until one changes
        self.namespaces: dict[str, NamespaceChanged] = {}  # Namespaces' labels, by name
        self._namespaces: dict[str, dict[str, str]] | None = {}  # labels by name, until one changes
        #: node name → (its NodeSnap as folded, its cards, held, others, held resources, held
        #: devices, the NodeSnap `snapshot` made of them): unchanged nodes keep their frozen
        #: NodeSnap from one snapshot to the next (a session memo reads that identity, memo.py)
        self._node_snaps: dict[str, tuple[object, ...]] = {}
        #: job key → (its JobSnap as folded, its tasks, the JobSnap `snapshot` made of them)
        self._job_snaps: dict[str, tuple[object, ...]] = {}

    def apply(self, seq: int, event: Event) -> str | None:
        """Fold one event; returns the job whose phase it moved without a `JobPhaseChanged` (a
        proposal that admits, a commit that sets the phase), for the readers that show a job's
        last phase as that event would have."""
        self.seq = max(self.seq, seq)
        at = getattr(event, "at", None)
        if isinstance(at, float) and at > self.now:
            self.now = at
        if (unchecked := self._unchecked) is not None:  # whatever names a job (others' are dropped unread)
            if (name := getattr(event, "name", None)) is not None:
                unchecked.add(f"{getattr(event, 'namespace', '')}/{name}")
            elif isinstance(spec := getattr(event, "spec", None), JobSpec):
                unchecked.add(f"{spec.namespace}/{spec.name}")
            if len(unchecked) > 2 * len(self.jobs) + 1024:  # not asked for long (a standby replica)
                self._unchecked = None  # every job at the next question, as a restored projection
        match event:
            case NodeRegistered():
                self.nodes[event.node] = NodeSnap(
                    event.node, event.cpu_milli, event.memory_mib, event.pods, dict(event.labels),
                    dict(event.annotations), tuple(event.taints), extended=event.extended,
                    resources=dict(event.resources),
                )  # fmt: skip
                listed = [c.uuid for c in event.cards]
                for uuid in self.node_cards.get(event.node, []):
                    if uuid not in listed:  # no longer reported (HAMi health): not offered
                        self.cards.pop(uuid, None)
                for card in event.cards:
                    known = self.cards.get(card.uuid)  # a re-registration keeps the bookings
                    self.cards[card.uuid] = CardSnap(card, known.usage if known else CardUsage(), seq)
                self.node_cards[event.node] = listed
            case NodeUsage():
                held = (event.cpu_milli, event.memory_mib, event.pods)
                if any(held):
                    self.held[event.node] = held
                else:
                    self.held.pop(event.node, None)
                if scalars := {k: v for k, v in event.scalars.items() if v and not is_device_resource(k)}:
                    self.held_resources[event.node] = scalars
                else:
                    self.held_resources.pop(event.node, None)
                if devices := {k: v for k, v in event.scalars.items() if v and is_device_resource(k)}:
                    self.held_devices[event.node] = devices
                else:
                    self.held_devices.pop(event.node, None)
                if event.others:
                    self.others[event.node] = event.others
                else:
                    self.others.pop(event.node, None)
            case NodeLost():
                if event.node in self.nodes:
                    self.nodes[event.node] = replace(self.nodes[event.node], ready=False)
            case CardRegistered():
                self._card(event.card, event.usage, seq)
            case SliceReserved() | SliceReleased() | CardHealthChanged():
                snap = self.cards.get(event.card)
                if snap is not None:
                    spec = snap.spec
                    if isinstance(event, CardHealthChanged):
                        spec = replace(spec, healthy=event.healthy)
                    self.cards[event.card] = CardSnap(spec, event.usage, seq)
            case QueueCreated():
                if event.spec.name not in self.queues:
                    self.queues[event.spec.name] = QueueSnap(event.spec, seq, event.spec.state)
            case QueueStateChanged():
                q = self.queues.get(event.queue)
                if q is not None:
                    self.queues[event.queue] = replace(q, state=event.state)
            case QueueUpdated():
                q = self.queues.get(event.spec.name)
                if q is not None:
                    self.queues[event.spec.name] = replace(q, spec=event.spec)
            case QueueDeleted():
                self.queues.pop(event.queue, None)
            case JobSubmitted():
                key = f"{event.spec.namespace}/{event.spec.name}"
                self.jobs[key] = JobSnap(event.spec, seq, event.spec.phase or "Pending")
                self.tasks[key] = {
                    pod: TaskSnap(pod, role, i, t) for pod, role, i, t in task_names(event.spec)
                }
                self.leaving.pop(key, None)
            case JobUpdated():
                self._updated(f"{event.namespace}/{event.name}", event.spec)
            case JobPhaseChanged():
                key = f"{event.namespace}/{event.name}"
                if (key in self.jobs and event.phase in ("Failed", "Aborted", "Terminated")) or (
                    event.phase == "Completed" and event.reason
                ):
                    self.jobs.pop(key, None)  # terminal: the scheduler no longer sees it
                    self.tasks.pop(key, None)
                    self.leaving.pop(key, None)
                    self._forget_started(key)
                elif event.phase in ("Pending", "Inqueue", "Running", "Unknown", "Completed", *ENDING_PHASES):
                    self._phase(key, event.phase)
            case JobDeleted():
                key = f"{event.namespace}/{event.name}"
                self.jobs.pop(key, None)
                self.tasks.pop(key, None)
                self.leaving.pop(key, None)
                self._forget_started(key)
            case PlacementProposed(admits=True):  # as the JobPhaseChanged Inqueue it stands for
                key = f"{event.namespace}/{event.name}"
                return key if self._phase(key, "Inqueue") else None
            case PlacementCommitted():
                key = f"{event.namespace}/{event.name}"
                tasks = self.tasks.get(key)
                if tasks is not None:
                    for p in event.placements:
                        if p.task in tasks:
                            tasks[p.task] = _task_as(tasks[p.task], BOUND, p.node, p.slices)
                    if event.sets_phase and (job := self.jobs.get(key)) is not None:
                        return key if self._phase(key, committed_phase(job, tasks.values())) else None
            case TaskStarted():
                self._task_status(event.namespace, event.name, event.task, RUNNING, event.node, event.at)
            case BindingFailed() | TaskFinished() if self._left(event.namespace, event.name, event.task):
                pass  # a removed pod finished: it left the job
            case BindingFailed():  # the API server refused the binding: the pod waits again
                self._task_status(event.namespace, event.name, event.task, PENDING, "")
            case TaskFinished():
                if event.reason in BACK_TO_PENDING:
                    self._task_status(event.namespace, event.name, event.task, PENDING, "")
                elif self.ends_again(event):
                    pass  # a terminal phase is final (k8s pod lifecycle): a late second end changes nothing
                else:
                    status = SUCCEEDED if event.exit_code == 0 else FAILED
                    self._task_status(event.namespace, event.name, event.task, status, event.node)
            case EvictionRequested():
                # asked to stop, its pod runs on (a grace period) until TaskFinished: Releasing,
                # as Volcano's cache shows a pod with a deletion timestamp — no victim again,
                # its resources the node's future idle (a removed pod's too: it leaves the job)
                tasks = self.tasks.get(f"{event.namespace}/{event.name}", {})
                t = tasks.get(event.task)
                if t is not None and t.status in (BOUND, RUNNING):
                    tasks[event.task] = _task_as(t, RELEASING, t.node, t.slices)
            case QuotaChanged() | QuotaDeleted():
                self.quotas.apply(event)
            case HyperNodeChanged():
                self.hypernodes[event.name] = event
                self._hypernodes = None
            case HyperNodeDeleted():
                self.hypernodes.pop(event.name, None)
                self._hypernodes = None
            case DisruptionBudgetChanged():
                self.budgets[f"{event.namespace}/{event.name}"] = event
            case DisruptionBudgetDeleted():
                self.budgets.pop(f"{event.namespace}/{event.name}", None)
            case NamespaceChanged():
                self.namespaces[event.name] = event
                self._namespaces = None
            case NamespaceDeleted():
                self.namespaces.pop(event.name, None)
                self._namespaces = None
            case _:
                self.storage.apply(event)  # the storage kinds; nothing for any other
        return None

    def ends_again(self, event: TaskFinished) -> bool:
        """Whether `event` is a pod's own end (not a restart's or an eviction's, which send it
        back to Pending) for a pod already Succeeded or Failed: a late report of the node
        monitor (its view behind the log) turned a Succeeded pod Failed and failed its job
        again. A pod in a terminal phase never changes phase; only its job's restart makes
        it again."""
        if event.reason in BACK_TO_PENDING:
            return False
        t = self.tasks.get(f"{event.namespace}/{event.name}", {}).get(event.task)
        return t is not None and t.status in (SUCCEEDED, FAILED)

    def _phase(self, key: str, phase: str) -> bool:
        """Whether the job's phase changed."""
        j = self.jobs.get(key)
        if j is None or j.phase == phase:
            return False
        self.jobs[key] = JobSnap(j.spec, j.created, phase, j.tasks)
        return True

    def _updated(self, key: str, spec: JobSpec) -> None:
        job = self.jobs.get(key)
        if job is None:
            return  # ended or never admitted: nothing to change
        self.jobs[key] = replace(job, spec=spec)
        before = self.tasks.get(key, {})
        tasks: dict[str, TaskSnap] = {}
        for pod, role, i, t in task_names(spec):
            had = before.pop(pod, None)
            tasks[pod] = TaskSnap(pod, role, i, t) if had is None else replace(had, role=role, index=i, spec=t)
        leaving = {pod for pod, t in before.items() if t.status in HOLDING}
        tasks.update((pod, before[pod]) for pod in before if pod in leaving)
        self.tasks[key] = tasks
        if leaving:
            self.leaving[key] = leaving
        else:
            self.leaving.pop(key, None)

    def _left(self, ns: str, job: str, pod: str) -> bool:
        """A removed pod's run ended: it leaves the job (True), or it is one of the job's pods."""
        key = f"{ns}/{job}"
        leaving = self.leaving.get(key)
        if not leaving or pod not in leaving:
            return False
        leaving.discard(pod)
        if not leaving:
            del self.leaving[key]
        self.tasks[key].pop(pod, None)
        return True

    def _card(self, card: CardSpec, usage: CardUsage, seq: int) -> None:
        if card.uuid not in self.cards:
            self.node_cards.setdefault(card.node, []).append(card.uuid)
        self.cards[card.uuid] = CardSnap(card, usage, seq)

    def _task_status(self, ns: str, job: str, pod: str, status: str, node: str, at: float = 0.0) -> None:
        tasks = self.tasks.get(f"{ns}/{job}")
        if tasks is None or pod not in tasks:
            return
        t = tasks[pod]
        keep = status in (RUNNING, SUCCEEDED, FAILED)
        tasks[pod] = _task_as(t, status, node or (t.node if keep else ""), t.slices if keep else ())
        if status == RUNNING and cooled(t.spec):
            self.started.setdefault(f"{ns}/{job}/{pod}", at)  # its first start (redelivered: kept)
        elif self.started:
            self.started.pop(f"{ns}/{job}/{pod}", None)

    def _forget_started(self, job: str) -> None:
        if self.started:
            for uid in [u for u in self.started if u.startswith(f"{job}/")]:
                del self.started[uid]

    def waiting(self) -> bool:
        """Whether a session has anything to decide: a job waiting at enqueue, or a pod of a
        live job waiting for a node. Without either, every action (enqueue, allocate, backfill,
        and preempt and reclaim, which act for a waiting pod) does nothing and the session
        appends nothing — yet opening one over the whole cluster cost ~100 ms at 500 nodes /
        4,000 pods, after every batch of commits (issue 29). Only the jobs touched since the
        last answer are looked at (`touch`): a job's waiting changes only with its own events,
        and walking 10,000 placed jobs before every session was 3 % of the scheduler at 5,000
        nodes. A job that waits stays to be looked at again."""
        if self._unchecked is None:  # new or restored: every job once
            self._unchecked = set(self.jobs)
        unchecked = self._unchecked
        for key in list(unchecked):
            if self.job_waits(key):
                return True
            unchecked.discard(key)
        return False

    def job_waits(self, key: str) -> bool:
        """Whether a session has something to decide for this job: it waits at enqueue, or a
        pod of it waits for a node (a job being ended places nothing)."""
        job = self.jobs.get(key)
        return job is not None and job.phase not in ENDING_PHASES and (
            job.phase == "Pending" or any(t.status == PENDING for t in self.tasks[key].values())
        )

    def touch(self, key: str) -> None:
        """The job's phase or pods may have changed: `waiting` looks at it again."""
        if self._unchecked is not None:
            self._unchecked.add(key)

    def snapshot(self) -> Snapshot:
        """The frozen view. A node or job whose folded parts are the very objects of the last
        snapshot (the fold replaces, never mutates, them) keeps its frozen snapshot object:
        building 1,213 NodeSnaps per session was a tenth of a session on the openb trace, and
        a session memo (memo.py) carries per-node work over by that identity."""
        held, others, held_resources, held_devices = self.held, self.others, self.held_resources, self.held_devices
        cards, node_cards = self.cards, self.node_cards
        node_memo, job_memo = self._node_snaps, self._job_snaps
        if len(node_memo) > len(self.nodes):
            for name in [n for n in node_memo if n not in self.nodes]:
                del node_memo[name]
        if len(job_memo) > len(self.jobs):
            for key in [k for k in job_memo if k not in self.jobs]:
                del job_memo[key]
        nodes = []
        for name, n in self.nodes.items():
            cs = tuple(cards[u] for u in node_cards.get(name, ()))
            h, o = held.get(name, (0, 0, 0)), others.get(name, ())
            hr, hd = held_resources.get(name), held_devices.get(name)
            got = node_memo.get(name)
            if (got is None or got[0] is not n or got[1] != cs or got[2] != h or got[3] is not o
                    or got[4] is not hr or got[5] is not hd):  # fmt: skip
                frozen = NodeSnap(n.name, n.cpu_milli, n.memory_mib, n.pods, n.labels, n.annotations, n.taints,
                                  cs, n.ready, h, o, n.extended, n.resources,
                                  {} if hr is None else hr, {} if hd is None else hd)  # fmt: skip
                node_memo[name] = (n, cs, h, o, hr, hd, frozen)
                nodes.append(frozen)
            else:
                nodes.append(got[6])  # type: ignore[arg-type]
        jobs = []
        for k, j in self.jobs.items():
            ts = tuple(self.tasks[k].values())
            got = job_memo.get(k)
            if got is None or got[0] is not j or got[1] != ts:
                frozen_job = JobSnap(j.spec, j.created, j.phase, _schedulable(j.phase, ts))
                job_memo[k] = (j, ts, frozen_job)
                jobs.append(frozen_job)
            else:
                jobs.append(got[2])  # type: ignore[arg-type]
        if self._hypernodes is None:
            self._hypernodes = tuple(self.hypernodes[n] for n in sorted(self.hypernodes))
        if self._namespaces is None:
            self._namespaces = {n: dict(self.namespaces[n].labels) for n in sorted(self.namespaces)}
        return Snapshot(self.seq, self.now, tuple(nodes), tuple(self.queues.values()), tuple(jobs),
                        storage=self.storage.frozen(), quotas=self.quotas.frozen(),
                        hypernodes=self._hypernodes, started=dict(self.started) if self.started else {},
                        budgets=tuple(self.budgets[k] for k in sorted(self.budgets)) if self.budgets else (),
                        namespaces=self._namespaces)  # fmt: skip


#: a job being ended (TerminateJob, CompleteJob, AbortJob; Failed or Completed with pods still
#: holding their nodes): its running pods are being killed
ENDING_PHASES = ("Terminating", "Completing", "Aborting", "Failing")
#: a PodGroup's pods that count as scheduled (Volcano's `getPodGroupPhase`)
SCHEDULED = frozenset({RUNNING, BOUND, SUCCEEDED, FAILED})


def committed_phase(job: JobSnap, tasks: Iterable[TaskSnap]) -> str:
    """The phase a commit leaves its job in: Running once its scheduled pods reach minMember
    (at least one), as the queue service decided it from the same fold before it was implied
    (`PlacementCommitted.sets_phase`); a job being ended, or already Running, stays as it is."""
    if job.phase == "Running" or job.phase in ENDING_PHASES:
        return job.phase
    scheduled = sum(1 for t in tasks if t.status in SCHEDULED)
    return "Running" if scheduled and scheduled >= job.spec.min_available else job.phase



def _schedulable(phase: str, tasks: Iterable[TaskSnap]) -> tuple[TaskSnap, ...]:
    """What a session sees of a job: all of it, but of a job being ended only the pods that
    still hold their node (they count until they stop); its waiting ones are never placed."""
    if phase not in ENDING_PHASES:
        return tuple(tasks)
    return tuple(t for t in tasks if t.status != PENDING)


def slice_spec(kind: str, memory: int, cores: int, template: str | None) -> SliceSpec:
    return SliceSpec(kind=kind, memory=memory, cores=cores, template=template)  # type: ignore[arg-type]
