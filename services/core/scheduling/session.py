"""A scheduling session over one frozen snapshot (Volcano `framework/session.go`).

Opening builds the working view and instantiates the configured plugins tier by tier; the
combination rule of every extension point is implemented here exactly as volcano.md §2.4 says:
orders → first non-zero plugin; predicates → first failure; node scores → sum over all tiers;
victims → per-tier intersection, first tier with a non-nil set wins; Overused → any;
Allocatable/Preemptive/JobReady → AND; JobValid → first failure; JobPipelined/JobEnqueueable →
votes (any reject ⇒ false, a permit in a tier short-circuits, all abstain ⇒ true); JobStarving
→ AND within the first tier that has any fn.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import msgspec

from contracts.devices import CardSpec, CardUsage, OwnedSlice
from contracts.events import ScorePart, SliceAssignment, TaskPlacement
from services.core.devices import registration
from services.core.devices.catalogue import default_catalogue
from services.core.devices.policies import PLACEMENT_POLICIES
from services.core.joblabels import job_task_labels
from services.core.ledger import is_exclusive, per_card
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PluginConf, SchedulerConf, counted_vendors
from services.core.scheduling.gates import gated
from services.core.scheduling.hooks import HOOK_SWITCHES, Plugin
from services.core.scheduling.memo import KeptNode, SessionMemo
from services.core.scheduling.model import (
    ALLOCATED_STATUSES,
    CardInfo,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    card_count_name,
    task_request,
)
from services.core.scheduling.resources import Resource
from services.core.scheduling.status import ABSTAIN, PERMIT, REJECT, Code, Status
from services.core.stamps import utc_stamp

#: the built-in device catalogue (HAMi's chart defaults), where no device config is given
_CATALOGUE = default_catalogue()

T = TypeVar("T")

PluginFactory = Callable[[PluginConf], Plugin]

#: tasks of one placement that carry their reasons in the event (see `placements_of`)
EXPLAINED_TASKS = 16

#: task statuses that hold room on their node in the session (built once, not per task)
_ON_NODE = ALLOCATED_STATUSES | {st.RELEASING}

#: Plugins whose `predicate` and `node_order` read only the task's spec and the node's own
#: state (labels, taints, annotations, resources, cards). Only when every predicate/node-order
#: plugin of the configuration is listed may results be cached per (node state, task shape);
#: a plugin that reads anything else (other nodes, queue or job state) must stay off this list.
NODE_LOCAL_PLUGINS = frozenset({"predicates", "nodeorder", "binpack", "deviceshare",
                                "VolumeBinding",  # volumes.py: its verdict is in the task's shape
                                "VolumeRestrictions",  # volumes.py: its tasks are never cached
                                "nodegroup"})  # its queue's affinity is in the task's shape


def reads_node_identity(conf: SchedulerConf) -> bool:
    """Whether a node-local score also depends on *which* node it is, not only on its state:
    deviceshare under a placement policy breaks ties by inventory order (`node.order`). Then
    outcomes may be cached per node but not shared between nodes in equal states."""
    ds = conf.plugin("deviceshare")
    policy = str(ds.arguments.get("deviceshare.SchedulePolicy") or "") if ds else ""
    return policy.strip().lower() in PLACEMENT_POLICIES


class PriorityQueue(Generic[T]):
    """A heap ordered by a `less(lhs, r)` function, like Volcano's `util.PriorityQueue`."""

    __slots__ = ("_entry", "_heap", "_less", "_n")

    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = ()) -> None:
        self._less = less
        self._entry = _Ordered if getattr(less, "__func__", None) in STRICT_TOTAL else _Entry
        self._heap: list[_Entry[T]] = []
        self._n = 0
        for item in items:
            self.push(item)

    def push(self, item: T) -> None:
        self._n += 1
        heapq.heappush(self._heap, self._entry(item, self._less, self._n))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap


class _Entry(Generic[T]):
    __slots__ = ("item", "less", "n")

    def __init__(self, item: T, less: Callable[[T, T], bool], n: int) -> None:
        self.item, self.less, self.n = item, less, n

    def __lt__(self, other: _Entry[T]) -> bool:
        if self.less(self.item, other.item):
            return True
        if self.less(other.item, self.item):
            return False
        return self.n < other.n


class _Ordered(_Entry[T]):
    """An entry under an order that never ties two different items (it ends on a unique key:
    a job's namespace/name, a queue's name): `less(b, a)` is then `not less(a, b)`, so one call
    decides where the general entry asks twice (a third of the scheduler's heap work over a
    4,000-job backlog, issue 29)."""

    __slots__ = ()

    def __lt__(self, other: _Entry[T]) -> bool:
        return self.less(self.item, other.item)


def _moved(u: CardUsage, s: SliceAssignment, sign: int, exclusive: bool) -> CardUsage:
    """`u` with one slice added (`sign` +1) or taken away (−1); `exclusive` is the flag after.
    A MIG slice's instances are kept in `slices` too (`devices/mig.py`): the next pod's fit in
    the session must see which placements are taken, not only how much memory."""
    slices = u.slices
    if s.slice.mig:
        if sign > 0:
            slices = (*slices, OwnedSlice(owner="", slice=s.slice))
        else:
            i = next((i for i, o in enumerate(slices) if o.slice.mig == s.slice.mig), None)
            if i is not None:
                slices = slices[:i] + slices[i + 1:]
    return msgspec.structs.replace(
        u,
        memory_used=u.memory_used + sign * s.slice.memory,
        cores_used=u.cores_used + sign * s.slice.cores,
        slices_used=u.slices_used + sign * s.slice.slots,
        exclusive=exclusive,
        slices=slices,
    )


def _parse_taint(raw: str) -> tuple[str, str, str]:
    """`key=value:Effect` or `key:Effect` (kubectl taint syntax)."""
    body, _, effect = raw.rpartition(":")
    if not body:
        body, effect = raw, "NoSchedule"
    key, _, value = body.partition("=")
    return key, value, effect



def held_by_others(cards: list[CardInfo], held: Mapping[str, int]) -> list[CardInfo]:
    """Whole cards of a vendor's own plugin (`mode: plugin`) that other schedulers' pods hold
    (NodeUsage: their count of the name, milli-units): as many of the free ones, the last in
    index order first, are taken for this session (they are on no ledger: the kubelet, not
    Tessera, gave those pods their devices), so Tessera's pods get only what is left, as
    Volcano fits the count against allocatable minus every bound pod's."""
    out = list(cards)
    for resource, milli in sorted(held.items()):
        left = -(-milli // 1000)  # a part of a device is a device held
        for i in range(len(out) - 1, -1, -1):
            c = out[i]
            if left <= 0:
                break
            if c.spec.mode != registration.PLUGIN or c.spec.resource != resource or c.usage.slices_used:
                continue
            out[i] = CardInfo(c.spec, registration.held_usage(c.spec, c.usage), c.seq, 1)
            left -= 1
    return out


def stranded_plugin_bookings(snap: st.Snapshot) -> dict[str, dict[str, int]]:
    """node → resource → Tessera's tasks still holding a vendor plugin's card the node no longer
    lists. Such cards are fungible and numbered by position (`registration.plugin_uuid`): when a
    node's count drops from 8 to 7 (a device failed), card 7 leaves the listing while the pod
    booked on it runs on some device, and cards 0-6 all looked free — one more pod than the
    kubelet has devices for was placed, and refused there. When HAMi's registration appears on
    the node, its plugin cards leave the listing the same way. These bookings are kept from the
    listed cards as other schedulers' are (`held_by_others`), until their tasks end."""
    listed: set[str] | None = None  # made only once a plugin card's uuid is met (they have a '/')
    out: dict[str, dict[str, int]] = {}
    for job in snap.jobs:
        for t in job.tasks:
            for s in t.slices:
                if "/" not in s.card:
                    continue
                if listed is None:
                    listed = {c.spec.uuid for n in snap.nodes for c in n.cards}
                if s.card in listed:
                    continue
                resource = registration.plugin_resource(t.node, s.card)
                if resource:
                    held = out.setdefault(t.node, {})
                    held[resource] = held.get(resource, 0) + 1
    return out


class Session:
    def __init__(
        self,
        snapshot: st.Snapshot,
        conf: SchedulerConf,
        plugins: Mapping[str, PluginFactory],
        uid: int = 0,
        node_cache: bool = True,
        memo: SessionMemo | None = None,
    ) -> None:
        self.uid = uid or snapshot.seq
        self.snapshot = snapshot
        self.conf = conf
        self.now = snapshot.now
        #: job key → why preemption or reclaim left one of its pods waiting: a victim filter
        #: (pdb, cdp) kept a pod that would have gone; explain.py adds it to the job's words
        self.kept: dict[str, str] = {}
        #: queue → its head job that could not be placed, where the queue is fifo (allocate)
        self.fifo_blocked: dict[str, str] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.node_list: list[NodeInfo] = []
        self.queues: dict[str, QueueInfo] = {}
        self.jobs: dict[str, JobInfo] = {}
        self.total = Resource()
        self.committed_allocations: list[TaskInfo] = []
        self.committed_evictions: list[TaskInfo] = []
        self.eviction_reasons: dict[str, str] = {}
        self.eviction_for: dict[str, str] = {}  # victim uid → the job key it makes room for
        self.enqueued: list[JobInfo] = []
        #: Pending jobs `enqueue` refused, in the order it considered them (trial.py explains
        #: the first of them node by node)
        self.refused: list[JobInfo] = []
        self.device_binder: Any = None
        #: task uid → why the device binder chose its cards (words; decisions never read it)
        self.cards_why: dict[str, str] = {}
        #: node_list positions of the nodes changed so far, in order (read by actions/nodes.py
        #: to bring its per-shape indexes up to date)
        self.node_changes: list[int] = []
        self.shape_indexes: dict[tuple[object, ...], Any] = {}
        self.shape_counts: dict[tuple[object, ...], int] = {}
        self.outcomes: dict[tuple[object, ...], tuple[int, str | float]] = {}
        self.node_classes: dict[tuple[object, ...], int] = {}
        #: what the last session left that this one may take over (memo.py); None: build all
        self.memo = memo
        if memo is not None:
            memo.serves(conf, node_cache)
            self.node_classes = memo.node_classes
        self._claimants: list[TaskInfo] = []  # tasks with PersistentVolumeClaims (volumes.py)
        #: device families no deviceshare books here: their counts are node scalars, whole cards
        self.counted_vendors = counted_vendors(conf)
        self._open_snapshot(snapshot)
        self._fns: dict[str, list[list[tuple[str, Any]]]] = {h: [] for h in HOOK_SWITCHES}
        self.plugins: dict[str, Plugin] = {}
        for tier in conf.tiers:
            for h in self._fns.values():
                h.append([])
            for pconf in tier:
                factory = plugins.get(pconf.name)
                if factory is None:
                    continue
                plugin = factory(pconf)
                self.plugins[pconf.name] = plugin
                for hook, switch in HOOK_SWITCHES.items():
                    fn = getattr(plugin, hook, None)
                    if fn is None or (switch is not None and not pconf.enabled(switch)):
                        continue
                    self._fns[hook][-1].append((pconf.name, fn))
        self._job_order_fns = [fn for tier in self._fns["job_order"] for _, fn in tier]
        #: the predicate tiers as the future view asks them (`predicate(..., future=True)`)
        self._future_predicates: list[list[tuple[Any, bool]]] = [
            [
                (future, True) if (future := getattr(self.plugins[name], "predicate_future", None))
                else (fn, False)
                for name, fn in tier
            ]
            for tier in self._fns["predicate"]
        ]
        if self._claimants:  # (volumes reads the predicates plugin, which reads this module)
            from services.core.scheduling.volumes import open_volumes

            open_volumes(self, self._claimants)
        #: cache predicate/score results per node and task shape (actions/nodes.py); False
        #: gives the straightforward evaluation the cached one must always agree with
        self.node_cache = node_cache and all(
            name in NODE_LOCAL_PLUGINS
            for hook in ("predicate", "node_order")
            for tier in self._fns[hook]
            for name, _ in tier
        )
        #: outcomes shared between nodes in equal states (see actions/nodes.py `_state_key`)
        self.share_outcomes = self.node_cache and not reads_node_identity(conf)
        for plugin in self.plugins.values():
            plugin.on_session_open(self)

    # --- building the view ---------------------------------------------------------------

    def _device_counts(self, n: st.NodeSnap, alloc: Resource) -> None:
        """Each counted family's whole cards as the node's allocatable of their count names
        (milli), less what other schedulers' pods hold of them (NodeUsage): the kubelet's count
        of a vendor plugin's cards; of HAMi-registered cards one per card, though HAMi's
        plugin serves `vDeviceCount` per card, since a pod deviceshare does not book carries
        no card annotation and takes the card whole (HAMi's Allocate serves no pod without
        one). Not added to the cluster's total: queue shares count cards themselves."""
        catalogue = self.conf.vendors.catalogue if self.conf.vendors is not None else _CATALOGUE
        counted = self.counted_vendors
        out = alloc.scalars
        for c in n.cards:
            if c.spec.vendor in counted and c.spec.healthy and c.usage.healthy and not c.usage.retired:
                name = card_count_name(c.spec, catalogue)
                if name:
                    out[name] = out.get(name, 0) + 1000

    def release(self) -> None:
        """Drop the plugins: each keeps the session (`self.ssn`), so session and plugins made a
        cycle that held the whole session's graph (nodes, cards, jobs, tasks, resource vectors:
        337,000 objects at 5,000 nodes × 2,000 jobs) until a cyclic collection found it — a
        young collection after every session walking all of it, ~20 % on top of the session.
        Without the cycle, reference counting frees it as `decide` returns. Everything goes
        (the hook lists, the job order and future predicates hold plugin methods too): the
        session is not used after it."""
        self.__dict__.clear()

    def _open_snapshot(self, snap: st.Snapshot) -> None:
        """The session's nodes, queues and jobs. The queues and jobs first, so each node is
        built with the tasks on it at once — or, with a memo, taken over from the last session
        when it and they are unchanged (memo.py)."""
        stranded = stranded_plugin_bookings(snap)
        for q in snap.queues:
            self.queues[q.spec.name] = QueueInfo(q.spec.name, q.spec, q.created, q.state)
        counted = self.counted_vendors
        #: node name → the tasks booked on it (their snapshots and infos), in booking order
        on_node: dict[str, list[tuple[st.TaskSnap, TaskInfo]]] = {}
        for j in snap.jobs:
            if j.spec.queue not in self.queues:
                continue  # Volcano cache.Snapshot: jobs whose queue is missing are not scheduled
            tasks: dict[str, TaskInfo] = {}
            job = JobInfo(
                key=j.key, spec=j.spec, created=j.created, phase=j.phase, queue=j.spec.queue,
                priority=j.spec.priority, min_available=j.spec.min_available,
                min_task_member={t.name: t.min_available for t in j.spec.tasks
                                 if t.min_available is not None},
                tasks=tasks,
            )  # fmt: skip
            by_role: dict[str, dict[str, str]] = {}  # a Job's pods: its controller's labels too
            for t in j.tasks:
                labels = None
                if j.spec.kind == "Job":
                    labels = by_role.get(t.role)
                    if labels is None:
                        labels = by_role[t.role] = job_task_labels(t.spec.labels, j.spec.name, j.spec.namespace,
                                                                   j.spec.queue, t.role)  # fmt: skip
                info = TaskInfo(
                    uid=f"{j.key}/{t.pod}", pod=t.pod, role=t.role, index=t.index, job=j.key,
                    spec=t.spec, resreq=task_request(t.spec, counted), status=t.status, node=t.node,
                    slices=t.slices, priority=t.spec.priority, pod_labels=labels,
                )  # fmt: skip
                tasks[t.pod] = info
                if t.spec.claims:
                    self._claimants.append(info)
                if t.node and t.status in _ON_NODE:
                    here = on_node.get(t.node)
                    if here is None:
                        here = on_node[t.node] = []
                    here.append((t, info))
                if t.status in ALLOCATED_STATUSES:
                    job.allocated.add(info.resreq)
            self.jobs[j.key] = job
        memo = self.memo
        for i, n in enumerate(snap.nodes):
            if not n.ready:
                continue
            booked = on_node.get(n.name, ())
            ours = stranded.get(n.name)
            if memo is not None:
                kept = memo.take(n, ours, tuple(t for t, _ in booked))
                if kept is not None:  # unchanged since the last session built it: as it was
                    self.total.add(kept.total)
                    node = kept.node
                    node.order = i
                    node.tasks = {info.uid: info for _, info in booked}
                    node.pos = len(self.node_list)
                    self.nodes[n.name] = node
                    self.node_list.append(node)
                    continue
            node, alloc = self._build_node(i, n, ours)
            for t, info in booked:
                node.tasks[info.uid] = info
                node.idle.sub(info.resreq)
                node.used.add(info.resreq)
                if t.status == st.RELEASING:  # its cards are free in the future view
                    node.releasing.add(info.resreq)
                    self._book_releasing(node, info.slices, +1)
            if memo is not None:
                memo.keep(KeptNode(n, ours, tuple(t for t, _ in booked), node, alloc))
            node.pos = len(self.node_list)
            self.nodes[n.name] = node
            self.node_list.append(node)

    def _build_node(
        self, i: int, n: st.NodeSnap, ours: Mapping[str, int] | None
    ) -> tuple[NodeInfo, Resource]:
        """The node as the session works on it, before its tasks are booked; and what it adds
        to the session's total (its allocatable without the counted families' cards)."""
        counted = self.counted_vendors
        alloc = Resource(n.cpu_milli, n.memory_mib, n.pods, n.resources)
        self.total.add(alloc)
        total = alloc.clone()
        if counted and n.cards:
            self._device_counts(n, alloc)
        cards = [CardInfo(c.spec, c.usage, c.seq, int(c.usage.exclusive)) for c in n.cards]
        held: Mapping[str, int] = n.held_devices
        if ours is not None:  # (a copy only where there are any)
            held = {**held, **{r: held.get(r, 0) + 1000 * c for r, c in ours.items()}}
        if held:  # other schedulers' pods, or ours on cards no longer listed, hold plugin cards
            cards = held_by_others(cards, held)
        node = NodeInfo(
            n.name, i, alloc, alloc.clone(), Resource(), Resource(), Resource(), dict(n.labels),
            dict(n.annotations), tuple(_parse_taint(t) for t in n.taints), cards, extended=n.extended,
        )  # fmt: skip
        if any(n.held) or n.held_resources:  # other schedulers' pods (NodeUsage): the rest is ours
            other = Resource(*n.held, n.held_resources)
            node.idle.sub(other)
            node.used.add(other)
        if counted and n.held_devices:  # their counts of the counted families, as the kubelet's
            other = Resource(scalars={k: v for k, v in n.held_devices.items() if registration.vendor_of(k) in counted})
            node.idle.sub(other)
            node.used.add(other)
        if n.others:  # their host ports (NodePorts: kube-scheduler's NodeInfo.UsedPorts)
            node.held_ports = tuple((p, o.namespace) for o in n.others for p in o.host_ports)
        return node, total

    # --- tier combination ----------------------------------------------------------------

    def _tiers(self, hook: str) -> list[list[tuple[str, Any]]]:
        return self._fns[hook]

    def _first_nonzero(self, hook: str, *args: Any) -> int:
        for tier in self._fns[hook]:
            for _, fn in tier:
                v = fn(*args)
                if v != 0:
                    return int(v)
        return 0

    def job_order(self, lhs: JobInfo, r: JobInfo) -> bool:
        # the hottest comparison (every heap step over all pending jobs): the tiers' functions
        # flattened in order, which is what "first non-zero over the tiers" walks anyway
        for fn in self._job_order_fns:
            v = fn(lhs, r)
            if v != 0:
                return v < 0
        return (lhs.created, lhs.key) < (r.created, r.key)

    def queue_order(self, lhs: QueueInfo, r: QueueInfo) -> bool:
        v = self._first_nonzero("queue_order", lhs, r)
        if v != 0:
            return v < 0
        return (lhs.created, lhs.name) < (r.created, r.name)

    def task_order(self, lhs: TaskInfo, r: TaskInfo) -> bool:
        v = self._first_nonzero("task_order", lhs, r)
        if v != 0:
            return v < 0
        return (lhs.index, lhs.uid) < (r.index, r.uid)

    def victim_queue_order(self, lhs: QueueInfo, r: QueueInfo, preemptor: QueueInfo) -> bool:
        v = self._first_nonzero("victim_queue_order", lhs, r, preemptor)
        if v != 0:
            return v < 0
        return not self.queue_order(lhs, r)

    def pre_predicate(self, task: TaskInfo) -> Status | None:
        if task.spec.scheduling_gates:  # always on, whatever the tiers (gates.py)
            return gated(task)
        if task.volume is not None and task.volume.held is not None:  # always on (volumes.py)
            return task.volume.held
        for tier in self._fns["pre_predicate"]:
            for _, fn in tier:
                status = fn(task)
                if status is not None and not status.ok:
                    return status
        return None

    def add_predicate(
        self, name: str, fn: Callable[[TaskInfo, NodeInfo], Status | None],
        future: Callable[[TaskInfo, NodeInfo, Sequence[TaskInfo]], Status | None] | None = None,
    ) -> None:  # fmt: skip
        """A built-in filter as a last tier of its own (while the session opens); `future`: its
        answer in the future view (see `predicate`), where it reads what other tasks hold."""
        self._fns["predicate"].append([(name, fn)])
        self._future_predicates.append([(future, True) if future is not None else (fn, False)])

    def predicate(
        self, task: TaskInfo, node: NodeInfo, future: bool = False,
        without: Sequence[TaskInfo] = (),
    ) -> Status | None:  # fmt: skip
        """The first failing predicate. `future`: on the node as it will be once its Releasing
        tasks are gone, and `without`'s too (the victims preempt/reclaim weigh): a plugin that
        reads what tasks hold (deviceshare: their card slices) answers through its
        `predicate_future(task, node, without)`."""
        if not future:
            for tier in self._fns["predicate"]:
                for _, fn in tier:
                    status = fn(task, node)
                    if status is not None and not status.ok:
                        return status
            return None
        for tier in self._future_predicates:
            for fn, aware in tier:
                status = fn(task, node, without) if aware else fn(task, node)
                if status is not None and not status.ok:
                    return status
        return None

    def predicate_for_preempt(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        """Volcano `PredicateForPreemptAction`: a node stays a candidate for evictions unless a
        predicate fails it for good (UnschedulableAndUnresolvable, Error); a plain Unschedulable,
        such as cards taken by other tasks, is what evicting them may resolve."""
        for tier in self._fns["predicate"]:
            for _, fn in tier:
                status = fn(task, node)
                if status is not None and status.code not in (Code.SUCCESS, Code.UNSCHEDULABLE):
                    return status
        return None

    def held(self, job: JobInfo) -> bool:
        """Held back until its retry: the API server refused its pods (`Refused.until`). No
        victim is taken for it either — under Volcano a job with no pods preempts nothing, and
        evicting others for pods that cannot be made took their cards every retry."""
        refused = self.snapshot.refused.get(job.key)
        return refused is not None and refused.until > self.now

    def nodes_for(self, job: JobInfo) -> tuple[list[NodeInfo], dict[str, str]]:
        """The nodes a job's tasks may be placed on, and why the others may not: the allocator
        refused its proposals there (snapshot.Refused; the log says since when nothing changed)."""
        refused = self.snapshot.refused.get(job.key)
        if refused is None:
            return self.node_list, {}
        if refused.until:  # its pods refused by the API server: held back until its retry
            if not self.held(job):
                return self.node_list, {}
            at = utc_stamp(refused.until)
            held = (f"held back: the API server refused its pods ({refused.held}); tried again at "
                    f"{at} or when the job changes")  # fmt: skip
            return [], dict.fromkeys((n.name for n in self.node_list), held)
        why = {n: f"placement refused by the allocator: {r}" for n, r in refused.nodes.items()
               if n in self.nodes}  # fmt: skip
        if refused.everywhere:
            held = (f"held back: the allocator refused the job on {len(refused.nodes)} nodes "
                    f"({refused.everywhere}); tried again when one of them or the job changes")  # fmt: skip
            return [], {n.name: why.get(n.name, held) for n in self.node_list}
        return [n for n in self.node_list if n.name not in why], why

    def has_predicates(self) -> bool:
        return any(self._fns["predicate"])

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        total = 0.0
        for tier in self._fns["node_order"]:
            for _, fn in tier:
                total += fn(task, node)
        return total

    def score_parts(self, task: TaskInfo, node: NodeInfo) -> tuple[ScorePart, ...]:
        """Each node-order plugin's part of the chosen node's score (`task.score`), before the
        task is booked there. deviceshare scores the fit its own predicate computed, which the
        node cache may have taken from another task of the shape: its part is what the others
        leave of the total (exact, the total being that node's score in this state), so no
        card fit is run twice per placement."""
        parts: dict[str, float] = {}
        rest = ""
        for tier in self._fns["node_order"]:
            for name, fn in tier:
                if name == "deviceshare":
                    rest = name
                    parts.setdefault(name, 0.0)
                    continue
                parts[name] = parts.get(name, 0.0) + fn(task, node)
        if rest:
            parts[rest] = task.score - sum(v for k, v in parts.items() if k != rest)
        return tuple(ScorePart(plugin=n, score=v) for n, v in parts.items())

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> tuple[str, str, str]:
        """(plugin, words, what would unblock it) of the first Allocatable rule refusing it."""
        for tier in self._fns["allocatable"]:
            for name, fn in tier:
                if not fn(queue, task):
                    explain = getattr(self.plugins[name], "allocatable_reason", None)
                    got = explain(queue, task) if explain is not None else None
                    return name, *(got or (f"queue {queue.name} refuses the task ({name})", ""))
        return "", "", ""

    def enqueue_reason(self, job: JobInfo) -> tuple[str, str, str]:
        """(plugin, words, what would unblock it) of the first enqueue vote against the job."""
        for tier in self._fns["job_enqueueable"]:
            for name, fn in tier:
                if fn(job) == REJECT:
                    explain = getattr(self.plugins[name], "enqueue_reason", None)
                    got = explain(job) if explain is not None else None
                    return name, *(got or (f"{name} does not admit the PodGroup yet", ""))
        return "", "", ""

    def _victims(self, hook: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self._fns[hook]:
            victims: list[TaskInfo] | None = None
            init = True
            for _, fn in tier:
                got, vote = fn(actor, candidates)
                if vote == ABSTAIN:
                    continue
                if not got:
                    victims = None
                    init = False
                    break
                if init:
                    victims = list(got)
                    init = False
                else:
                    ids = {t.uid for t in got}
                    victims = [t for t in victims or [] if t.uid in ids]
            if victims is not None:
                return victims
        return []

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", preemptor, preemptees)

    def preemptable_votes(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> list[tuple[str, list[TaskInfo]]]:
        """What each plugin answered of the tier that decides `preemptable` (the first whose
        plugins leave victims in common, else the first that votes): which plugin keeps which
        pods from preempt, for explain. Every voting plugin of that tier is asked, where
        `_victims` stops at the first empty answer."""
        return self._votes("preemptable", preemptor, preemptees)

    def reclaimable_votes(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> list[tuple[str, list[TaskInfo]]]:
        """`preemptable_votes` for `reclaimable`: which plugin keeps which pods from reclaim."""
        return self._votes("reclaimable", reclaimer, reclaimees)

    def _votes(self, hook: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[tuple[str, list[TaskInfo]]]:
        first: list[tuple[str, list[TaskInfo]]] = []
        for tier in self._fns[hook]:
            votes = []
            for name, fn in tier:
                got, vote = fn(actor, candidates)
                if vote != ABSTAIN:
                    votes.append((name, list(got)))
            if not votes:
                continue
            common = set.intersection(*({t.uid for t in got} for _, got in votes))
            if common:
                return votes
            first = first or votes
        return first

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", reclaimer, reclaimees)

    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for tier in self._fns["overused"] for _, fn in tier)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for tier in self._fns["allocatable"] for _, fn in tier)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for tier in self._fns["preemptive"] for _, fn in tier)

    def job_valid(self, job: JobInfo) -> str | None:
        for tier in self._fns["job_valid"]:
            for _, fn in tier:
                reason = fn(job)
                if reason:
                    return str(reason)
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return all(fn(job) for tier in self._fns["job_ready"] for _, fn in tier)

    def _vote(self, hook: str, job: JobInfo) -> bool:
        for tier in self._fns[hook]:
            has_permit = False
            for _, fn in tier:
                v = fn(job)
                if v == REJECT:
                    return False
                if v == PERMIT:
                    has_permit = True
            if has_permit:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("job_pipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for tier in self._fns["job_enqueued"]:
            for _, fn in tier:
                fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self._fns["job_starving"]:
            if tier:
                return all(fn(job) for _, fn in tier)
        return False

    # --- operations used by statements -------------------------------------------------

    def allocate_task(
        self, task: TaskInfo, node: NodeInfo, slices: tuple[SliceAssignment, ...], pipelined: bool
    ) -> None:
        task.status = st.PIPELINED if pipelined else st.ALLOCATED
        self.jobs[task.job].status_changed()
        task.node = node.name
        task.slices = slices
        node.tasks[task.uid] = task
        self._touch(node)
        if pipelined:
            node.pipelined.add(task.resreq)
        else:
            node.idle.sub(task.resreq)
            node.used.add(task.resreq)
        self._book(node, slices, +1)
        job = self.jobs[task.job]
        if not pipelined:
            job.allocated.add(task.resreq)
        for tier in self._fns["on_allocate"]:
            for _, fn in tier:
                fn(task)

    def deallocate_task(self, task: TaskInfo, prev_status: str) -> None:
        node = self.nodes[task.node]
        self._touch(node)
        pipelined = task.status == st.PIPELINED
        if pipelined:
            node.pipelined.sub(task.resreq)
        else:
            node.idle.add(task.resreq)
            node.used.sub(task.resreq)
            self.jobs[task.job].allocated.sub(task.resreq)
        self._book(node, task.slices, -1)
        node.tasks.pop(task.uid, None)
        for tier in self._fns["on_deallocate"]:
            for _, fn in tier:
                fn(task)
        task.status = prev_status
        self.jobs[task.job].status_changed()
        task.node = ""
        task.slices = ()

    def evict_task(self, task: TaskInfo, reason: str, for_job: str = "") -> None:
        node = self.nodes[task.node]
        self._touch(node)
        node.releasing.add(task.resreq)
        self._book_releasing(node, task.slices, +1)
        task.status = st.RELEASING
        self.jobs[task.job].status_changed()
        self.eviction_reasons[task.uid] = reason
        if for_job:
            self.eviction_for[task.uid] = for_job
        self.jobs[task.job].allocated.sub(task.resreq)
        for tier in self._fns["on_deallocate"]:
            for _, fn in tier:
                fn(task)

    def unevict_task(self, task: TaskInfo, prev_status: str) -> None:
        node = self.nodes[task.node]
        self._touch(node)
        node.releasing.sub(task.resreq)
        self._book_releasing(node, task.slices, -1)
        self.eviction_reasons.pop(task.uid, None)
        self.eviction_for.pop(task.uid, None)
        task.status = prev_status
        self.jobs[task.job].status_changed()
        self.jobs[task.job].allocated.add(task.resreq)
        for tier in self._fns["on_allocate"]:
            for _, fn in tier:
                fn(task)

    def _touch(self, node: NodeInfo) -> None:
        """Every change to a node goes through here: its cached fit outcomes are void."""
        node.fit_cache.clear()
        node.state_key = None
        self.node_changes.append(node.pos)

    def _book(self, node: NodeInfo, slices: tuple[SliceAssignment, ...], sign: int) -> None:
        if not slices:
            return
        by_uuid = {c.spec.uuid: c for c in node.cards}
        for s in per_card(slices):  # as the ledger will book them: one per card
            card = by_uuid[s.card]
            card.exclusive += sign * is_exclusive(s.slice)
            card.usage = _moved(card.usage, s, sign, card.exclusive > 0)

    def _book_releasing(
        self, node: NodeInfo, slices: tuple[SliceAssignment, ...], sign: int
    ) -> None:
        """An evicted task's slices stay in `CardInfo.usage` (its ledger still holds them) and
        are counted in `CardInfo.releasing`, free in the future view; undone by `sign` −1."""
        if not slices:
            return
        by_uuid = {c.spec.uuid: c for c in node.cards}
        for s in per_card(slices):
            card = by_uuid.get(s.card)
            if card is None:  # a card the node no longer reports: nothing to free on it
                continue
            card.releasing = _moved(card.releasing, s, sign, sign > 0 and is_exclusive(s.slice))

    def card_view(
        self, node: NodeInfo, future: bool = False, without: Sequence[TaskInfo] = ()
    ) -> list[tuple[CardSpec, CardUsage]]:
        """The node's cards as a fit reads them: held now, or in the future view (slices of
        Releasing tasks free, pipelined ones taken) with `without`'s slices freed as well."""
        if not future:
            return [(c.spec, c.usage) for c in node.cards]
        view = {c.spec.uuid: (c.spec, c.future_usage()) for c in node.cards}
        for t in without:
            if t.status == st.RELEASING:
                continue  # already free in the future view
            for s in per_card(t.slices):
                if s.card in view:
                    spec, u = view[s.card]
                    view[s.card] = (spec, _moved(u, s, -1, u.exclusive and not is_exclusive(s.slice)))
        return list(view.values())

    @contextmanager
    def trial(self, shapes: Iterable[tuple[object, ...]]) -> Iterator[None]:
        """A throw-away placement (trial.py) that must leave the session as it found it once
        its statement is discarded: the plugins' allocate/deallocate hooks are not called (the
        queue tallies are float sums, which adding and taking away a task need not bring back
        bit for bit), and the node search's rotating start and the per-shape counts it bumps
        (`shapes`: those of the tasks tried) are put back."""
        hooks = {h: self._fns[h] for h in ("on_allocate", "on_deallocate")}
        start = self.__dict__.get("_next_start")
        counts = {s: self.shape_counts.get(s) for s in shapes}
        for h in hooks:
            self._fns[h] = []
        try:
            yield
        finally:
            self._fns.update(hooks)
            if start is None:
                self.__dict__.pop("_next_start", None)
            else:
                self.__dict__["_next_start"] = start
            for s, n in counts.items():
                if n is None:
                    self.shape_counts.pop(s, None)
                else:
                    self.shape_counts[s] = n

    # --- node selection --------------------------------------------------------------------

    def bind_devices(
        self, task: TaskInfo, node: NodeInfo, future: bool = False
    ) -> tuple[SliceAssignment, ...]:
        """The cards the task gets on the node; `future`: in the future view (`card_view`), for
        a task pipelined behind evictions."""
        if self.device_binder is None or not task.spec.devices:
            return ()
        return tuple(self.device_binder(task, node, future))

    def fits_resources(self, task: TaskInfo, node: NodeInfo, future: bool) -> list[str]:
        """Resource-fit reasons (kube-scheduler wording); empty when the task fits."""
        avail = node.future_idle() if future else node.idle
        reasons = [f"Insufficient {r}" for r in task.resreq.insufficient(avail)]
        if (
            node.used.pods - (node.releasing.pods if future else 0) + node.pipelined.pods
            >= node.allocatable.pods
        ):
            reasons.append("Too many pods")
        return reasons

    def placements_of(self, tasks: Iterable[TaskInfo]) -> tuple[TaskPlacement, ...]:
        """The placements as the log records them; the reasons (score parts, runners-up, card
        choice: some 400 bytes a task) only for the first `EXPLAINED_TASKS`, so the proposal of
        a 10,000-pod gang stays within a NATS message."""
        return tuple(
            TaskPlacement(task=t.pod, node=t.node, slices=t.slices, score=t.score,
                          parts=t.parts, runners_up=t.runners_up, feasible=t.feasible,
                          cards_why=self.cards_why.get(t.uid, ""))
            if i < EXPLAINED_TASKS else
            TaskPlacement(task=t.pod, node=t.node, slices=t.slices, score=t.score)
            for i, t in enumerate(tasks)
        )  # fmt: skip


#: the orders that end on a unique key (`_Ordered`): the session's job and queue orders
STRICT_TOTAL = frozenset({Session.job_order, Session.queue_order})
