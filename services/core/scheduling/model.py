"""The session's working copy of the snapshot (Volcano `api.JobInfo/TaskInfo/NodeInfo/QueueInfo`).

Built fresh from a frozen `Snapshot` at session open and mutated only through the session's
allocate/pipeline/evict operations, which a `Statement` can undo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from msgspec.structs import replace

from contracts.devices import CardSpec, CardUsage, OwnedSlice
from contracts.events import NodeScore, ScorePart, SliceAssignment
from contracts.workloads import HostPort, JobSpec, QueueSpec, TaskSpec
from services.core.devices.catalogue import Catalogue
from services.core.devices.registration import vendor_of
from services.core.scheduling.resources import DEVICE_PREFIXES, Resource, is_device_resource
from services.core.scheduling.snapshot import (
    ALLOCATED,
    BINDING,
    BOUND,
    PENDING,
    PIPELINED,
    RELEASING,
    RUNNING,
    SUCCEEDED,
)

if TYPE_CHECKING:
    from services.core.scheduling.volumes import VolumeFit

ALLOCATED_STATUSES = frozenset({BOUND, BINDING, RUNNING, ALLOCATED})


#: task spec id -> (the spec, its request): every session opened built each running task's
#: request again (a third of opening one, issue 29). The spec is kept so its id stays its own;
#: requests are never changed in place (sessions add and subtract them into other vectors).
_REQUESTS: dict[int, tuple[TaskSpec, Resource]] = {}
_MAX_REQUESTS = 50_000  # then forgotten all at once: specs of ended jobs must not pile up


def task_request(spec: TaskSpec, counted: frozenset[str] = frozenset()) -> Resource:
    """The node resources one pod of `spec` asks. Device counts are booked on cards by
    deviceshare, not here, except those of the families in `counted` (`config.counted_vendors`:
    no deviceshare books them), which are node scalars as Volcano counts them; their
    memory/core names never are (admission leaves them out of `scalars`, Volcano's ignored list)."""
    if counted:
        return _counted_request(spec, counted)
    got = _REQUESTS.get(id(spec))
    if got is not None and got[0] is spec:
        return got[1]
    scalars = {k: v for k, v in spec.scalars.items() if not is_device_resource(k)}
    request = Resource(spec.cpu_milli, spec.memory_mib, 1, scalars)
    if len(_REQUESTS) >= _MAX_REQUESTS:
        _REQUESTS.clear()
    _REQUESTS[id(spec)] = (spec, request)
    return request


#: `task_request` with device counts, by spec id: (the spec, the families counted, the request)
_COUNTED: dict[int, tuple[TaskSpec, frozenset[str], Resource]] = {}


def _counted_request(spec: TaskSpec, counted: frozenset[str]) -> Resource:
    got = _COUNTED.get(id(spec))
    if got is not None and got[0] is spec and got[1] == counted:
        return got[2]
    scalars = {k: v for k, v in spec.scalars.items()
               if not is_device_resource(k) or vendor_of(k) in counted}  # fmt: skip
    request = Resource(spec.cpu_milli, spec.memory_mib, 1, scalars)
    if len(_COUNTED) >= _MAX_REQUESTS:
        _COUNTED.clear()
    _COUNTED[id(spec)] = (spec, counted, request)
    return request


def card_count_name(card: CardSpec, catalogue: Catalogue) -> str:
    """The count name a whole card of `card` is asked by, as its node's kubelet serves it: a
    vendor plugin's card its own name; a registered Ascend card its chip's resource name
    (`huawei.com/Ascend910B3`, 310P3's `huawei.com/Ascend310P`); an NVIDIA card the device
    config's count name (`nvidia.com/gpu`); "" for a family Tessera does not count."""
    if card.resource:
        return card.resource
    if card.vendor == "huawei":
        chip = catalogue.chip(card.type)
        return chip.resource_name if chip is not None else f"huawei.com/{card.type}"
    if card.vendor == "nvidia":
        return catalogue.nvidia.resource_count_name
    return ""


#: Pod annotation prefixes the node-local plugins may read: HAMi's (`hami.io/gpu-scheduler-
#: policy`, `hami.io/node-scheduler-policy`, `hami.io/device-scoring-weights`, …) and the device
#: vendors'. Others (`tessera.io/duration`, kubectl's last-applied-configuration, …) often differ
#: from pod to pod and would make every pod a shape of its own.
SHAPE_ANNOTATION_PREFIXES = ("hami.io/", *DEVICE_PREFIXES)


def task_shape(spec: TaskSpec) -> tuple[object, ...]:
    """Everything of a task that the node-local predicates and scores read (resource request,
    device requests, device-policy annotations, selectors, affinity, tolerations, host ports) and nothing
    that only names it: two tasks with equal shapes get equal results on a node in an equal
    state."""
    annotations = sorted(
        (k, v) for k, v in spec.annotations.items() if k.startswith(SHAPE_ANNOTATION_PREFIXES)
    )
    return (
        spec.cpu_milli, spec.memory_mib, tuple(sorted(spec.scalars.items())), spec.devices,
        tuple(annotations), tuple(sorted(spec.node_selector.items())), spec.affinity,
        spec.preferred_affinity, spec.tolerations, spec.host_ports, spec.pod_affinity, spec.spread,
    )  # fmt: skip



NO_USAGE = CardUsage()


@dataclass(slots=True)
class CardInfo:
    """A card in the session: its spec and ledger usage, rebuilt on every in-session booking.

    `usage` is what the card holds now (the ledger plus this session's allocated and pipelined
    slices): what an allocation must fit, since the allocator's ledger still holds an evicted
    task's slice until it is released. `releasing` is the part of it held by tasks evicted in
    this session; the future view (`future_usage`) counts it free, as Volcano's FutureIdle =
    Idle + Releasing − Pipelined does for cpu and memory. A pipelined slice may therefore sit on
    a card beside a releasing one, so exclusivity is counted (`exclusive`), not flagged: undoing
    one of two exclusive bookings must leave the card exclusive."""

    spec: CardSpec
    usage: CardUsage
    seq: int = 0
    exclusive: int = 0  # exclusive slices in `usage`
    releasing: CardUsage = NO_USAGE  # counters only; at most one exclusive (a ledger holder)

    def future_usage(self) -> CardUsage:
        """`usage` less what is releasing: its amounts and, on a carved MIG card, its instances
        (the MIG fit reads the placements taken from `slices`, not the amounts: a victim's
        instance left there would keep its placement taken, so no preemption on such a card
        could ever make room)."""
        r = self.releasing
        if not r.slices_used:
            return self.usage
        u = self.usage
        return replace(
            u,
            memory_used=u.memory_used - r.memory_used,
            cores_used=u.cores_used - r.cores_used,
            slices_used=u.slices_used - r.slices_used,
            exclusive=self.exclusive - r.exclusive > 0,
            slices=_without_instances(u.slices, r.slices),
        )


def _without_instances(
    held: tuple[OwnedSlice, ...], freed: tuple[OwnedSlice, ...]
) -> tuple[OwnedSlice, ...]:
    """`held` less one slice holding the same MIG instances for each of `freed` (the releasing
    ledger's MIG slices, as session.py `_moved` records them; no other slices are in it)."""
    if not freed:
        return held
    out = list(held)
    for f in freed:
        i = next((i for i, o in enumerate(out) if o.slice.mig == f.slice.mig), None)
        if i is not None:
            del out[i]
    return tuple(out)


@dataclass(slots=True, eq=False)
class NodeInfo:
    name: str
    order: int
    allocatable: Resource
    idle: Resource
    used: Resource
    releasing: Resource
    pipelined: Resource
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    cards: list[CardInfo]
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    #: task shape → (FIT_* kind, reason or score), valid until the node changes: the session
    #: clears it on every allocate/deallocate/evict on this node (see actions/nodes.py).
    fit_cache: dict[tuple[object, ...], tuple[int, str | float]] = field(default_factory=dict)
    pos: int = -1  # position in the session's node_list (the scan order)
    state_key: tuple[object, ...] | None = None  # see actions/nodes.py; reset on every change
    extended: tuple[str, ...] | None = None  # what its kubelet serves (None: not known)
    #: host ports other schedulers' pods hold here (NodeUsage.others): NodePorts reads them
    #: with its own tasks' ports; no session evicts their holders, so they stay held in the
    #: future view too
    held_ports: tuple[tuple[HostPort, str], ...] = ()  # (port, namespace of its holder)

    def future_idle(self) -> Resource:
        """Volcano: FutureIdle = Idle + Releasing − Pipelined."""
        return self.idle.clone().add(self.releasing).sub(self.pipelined)


@dataclass(slots=True, eq=False)
class TaskInfo:
    uid: str  # "<ns>/<job>/<pod>"
    pod: str
    role: str
    index: int
    job: str  # job key "<ns>/<job>"
    spec: TaskSpec
    resreq: Resource
    status: str = PENDING  # changed only by Session (it keeps JobInfo.ready_task_num current)
    node: str = ""
    slices: tuple[SliceAssignment, ...] = ()
    priority: int = 0
    score: float = 0.0
    parts: tuple[ScorePart, ...] = ()  # why its node: each plugin's part of `score`
    runners_up: tuple[NodeScore, ...] = ()  # the next best nodes when it was placed
    feasible: int = 0  # feasible nodes it was chosen among
    shape: tuple[object, ...] | None = None  # task_shape(spec), filled on first use
    volume: VolumeFit | None = None  # its claims' verdict (volumes.py), for tasks with claims
    #: its labels as the API server holds them where they are more than its template's (a
    #: Volcano Job's pods: its controller's, services/core/joblabels.py); None: those
    pod_labels: dict[str, str] | None = None

    @property
    def labels(self) -> dict[str, str]:
        """What label selectors (pod affinity, topology spread, budgets) see of the pod."""
        return self.spec.labels if self.pod_labels is None else self.pod_labels

    @property
    def best_effort(self) -> bool:
        return (
            self.resreq.cpu == 0
            and self.resreq.memory == 0
            and not self.spec.devices
            and not any(self.resreq.scalars.values())
        )

    @property
    def namespace(self) -> str:
        return self.uid.split("/", 1)[0]


@dataclass(slots=True, eq=False)
class JobInfo:
    key: str
    spec: JobSpec
    created: int
    phase: str
    queue: str
    priority: int
    min_available: int
    min_task_member: dict[str, int]
    tasks: dict[str, TaskInfo]
    allocated: Resource = field(default_factory=Resource)
    fit_errors: dict[str, str] = field(default_factory=dict)  # task uid → summary
    node_errors: dict[str, str] = field(default_factory=dict)  # node → reason (last failing task)
    job_fit_error: str = ""
    why: str = ""  # the first rule that failed, in words (explain.py)
    why_plugin: str = ""
    unblock: str = ""
    _ready: int = -1  # ready_task_num() until a task's status changes (status_changed)

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def name(self) -> str:
        return self.spec.name

    def count(self, *statuses: str) -> int:
        return sum(1 for t in self.tasks.values() if t.status in statuses)

    def status_changed(self) -> None:
        """A task's status changed (only the session changes them): drop the cached counts."""
        self._ready = -1

    def ready_task_num(self) -> int:
        """Gang: Bound + Binding + Running + Allocated + Succeeded (+ pending BestEffort).
        Cached: job ordering asks it for both sides of every heap comparison."""
        if self._ready >= 0:
            return self._ready
        n = 0
        for t in self.tasks.values():
            if t.status in ALLOCATED_STATUSES or t.status == SUCCEEDED:
                n += 1
            elif t.status == PENDING and t.best_effort:
                n += 1
        self._ready = n
        return n

    def waiting_task_num(self) -> int:
        return self.count(PIPELINED)

    def pending_tasks(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status == PENDING]


@dataclass(slots=True, eq=False)
class QueueInfo:
    name: str
    spec: QueueSpec
    created: int
    state: str

    @property
    def weight(self) -> int:
        return self.spec.weight

    @property
    def reclaimable(self) -> bool:
        return self.spec.reclaimable


__all__ = [
    "ALLOCATED_STATUSES",
    "RELEASING",
    "CardInfo",
    "JobInfo",
    "NodeInfo",
    "QueueInfo",
    "TaskInfo",
    "card_count_name",
    "task_request",
    "task_shape",
]
