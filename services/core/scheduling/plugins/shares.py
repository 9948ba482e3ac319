"""Queue resource vectors shared by `proportion`, `capacity` and `overcommit`: float dimensions
keyed by name, with Volcano's 0.1 epsilon (`minResource`) for emptiness and the Zero/Infinity
conventions.

Devices (`QueueShares`): Volcano counts an Ascend pod against its queue with the plain request
of `huawei.com/<CW>` — one whole card even for a 4 GB slice — and keeps alias names such as
`huawei.com/Ascend910` as dimensions no node has, so a queue capped on the alias (the article's
`train-queue`) and every alias request never fit. Tessera counts the *share of a card* a task
holds (whole cards 1; slices max(memory, cores) as a fraction of the card; milli-units) under
the card type's resource name. An alias is read as the one type of it the cluster has (the
910 family on a 910B3 cluster is 910B3, in requests and in queue limits alike); only where the
cluster has several types of a family is the family a dimension of its own, counting every
member type (a pending request naming it is counted there until it lands).

Families no deviceshare books (`config.counted_vendors`: the plugin absent, or the family's
switch off) are fitted on nodes as whole cards by count (`model.task_request`); for them a task
counts what the node takes, its count names in full (a `-memory` slice one whole card, as
Volcano's proportion counts it: its Ascend devices add no queue resource of their own), and
nothing for a `-memory` name alone (ignored, as on the node).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from contracts.devices import CardSpec
from contracts.events import SliceAssignment
from contracts.workloads import DeviceRequest
from services.core.devices.catalogue import default_aliases
from services.core.devices.registration import vendor_of
from services.core.scheduling.config import PLAIN_EXTENDED, RULES
from services.core.scheduling.model import JobInfo, NodeInfo, TaskInfo
from services.core.scheduling.resources import DEVICE_PREFIXES, Resource, is_device_resource

if TYPE_CHECKING:
    from services.core.scheduling.session import Session

EPS = 0.1
Vec = dict[str, float]
INF = float("inf")
CARD = 1000.0  # one whole card, milli-units like every scalar


def vec(r: Resource | Mapping[str, int]) -> Vec:
    items = r.to_map().items() if isinstance(r, Resource) else r.items()
    return {k: float(v) for k, v in items if k != "pods"}


def add(a: Vec, b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def sub(a: Vec, b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) - v
    return out


def moved(a: Vec, b: Mapping[str, float], sign: int) -> Vec:
    """`a` with a task's request `b` added (sign > 0) or taken back, a dimension it brings to
    zero dropped: a statement discarded (pipeline, then unpipeline) leaves a queue's vector
    with the entries it had, not zeros where it had none (a fraction of a card added and taken
    back may differ from the start in its last bit; the same operations give the same bits, so
    decisions and replays do not move)."""
    if sign > 0:
        return add(a, b)
    out = sub(a, b)
    for k in b:
        if abs(out.get(k, 1.0)) < EPS:
            del out[k]
    return out


def le(a: Mapping[str, float], b: Mapping[str, float], dims: Iterable[str] | None = None,
       missing: float = 0.0) -> bool:  # fmt: skip
    """a ≤ b on `dims` (default: a's non-zero dims); a dim missing in b counts as `missing`."""
    keys = dims if dims is not None else [k for k, v in a.items() if v > 0]
    return all(a.get(k, 0.0) <= b.get(k, missing) + EPS for k in keys)


def empty(a: Mapping[str, float]) -> bool:
    return all(v < EPS for v in a.values())


def card_resource(card_type: str) -> str:
    if card_type.startswith("NVIDIA"):
        return "nvidia.com/gpu"
    if card_type.startswith("Ascend"):
        return f"huawei.com/{card_type}"
    return card_type


_NVIDIA_COUNT_NAMES = ("volcano.sh/vgpu-number",)
#: quota names a PodGroup's minResources may carry (Volcano's job controller writes the pods'
#: quota usage: `requests.cpu`, `limits.memory`, `count/pods`): the queue plugins' resources
#: ignore them, as Volcano's `NewResource` does (they are no scalar resource names)
QUOTA_NAMES = ("requests.", "limits.", "count/")


#: family names of several models (`huawei.com/Ascend910`): a queue dimension only where the
#: cluster has more than one of them (`QueueShares.families`)
_FAMILIES = frozenset(alias for alias, types in default_aliases().items() if len(types) > 1)


def _percent_of(card: CardSpec, rules: int) -> int:
    """What a soft request's cores are a share of on `card`: an NVIDIA card's registered cores
    (100 × deviceCoreScaling, the `Totalcore` HAMi fits against: 60 cores of a card registered
    with 200 are 0.3 of it, as the slice is once booked) from rules generation 2; 100 (%)
    before, and on other vendors' cards."""
    if rules >= 2 and card.vendor == "nvidia" and card.cores > 0:
        return card.cores
    return 100


class QueueShares:
    """What tasks, jobs and the cluster weigh in queue accounting (see the module docstring)."""

    def __init__(
        self, nodes: Iterable[NodeInfo], counted: frozenset[str] = frozenset(), rules: int = RULES,
        last: QueueShares | None = None,
    ) -> None:  # fmt: skip
        """`last`: the last session's, whose cluster-wide part (the cards, the families, the
        total) is taken over when the nodes list the very same card specs in the same order
        (a card's spec object is replaced only when it is registered again or its health
        changes): weighing every card of 1,213 nodes anew was 5 % of a session."""
        #: device families no deviceshare books (`config.counted_vendors`): whole cards by count
        self.counted = counted
        self.rules = rules
        nodes = list(nodes)
        #: every card's spec, in node order (what the cluster-wide part is derived from)
        self._specs = [c.spec for n in nodes for c in n.cards]
        self._tasks: dict[str, tuple[tuple[SliceAssignment, ...], object, Vec]] = {}
        self._min: dict[str, tuple[object, int, Vec | None]] = {}
        if (last is not None and last.counted == counted and last.rules == rules
                and len(last._specs) == len(self._specs) and all(map(operator.is_, self._specs, last._specs))):  # fmt: skip
            self.single, self.families = dict(last.single), dict(last.families)
            self.cards, self.card_memory, self.total = dict(last.cards), dict(last.card_memory), dict(last.total)
            self.card_cores = dict(last.card_cores)
            return
        aliases = default_aliases()
        self.single = {alias: f"huawei.com/{types[0]}" for alias, types in aliases.items()
                       if len(types) == 1}  # fmt: skip
        self.single.update({n: "nvidia.com/gpu" for n in _NVIDIA_COUNT_NAMES})
        present = {c.spec.type for n in nodes for c in n.cards}
        # A family alias (`huawei.com/Ascend910`) is a dimension of its own only where the
        # cluster has more than one of its types (then "8 of any 910" is a real limit); where it
        # has one, the alias is that type — a request for it lands there and nowhere else — so
        # shares, capabilities and metrics speak only of what nodes have (issue 26 item 2: an
        # `Ascend910` row beside `Ascend910B3`, deserved and allocated on its own).
        self.families: dict[str, tuple[str, ...]] = {}
        for alias, types in sorted(aliases.items()):
            if len(types) <= 1:
                continue
            here = [t for t in types if t in present]
            if len(here) == 1:
                self.single[alias] = f"huawei.com/{here[0]}"
            elif len(here) > 1:
                for t in here:
                    self.families[t] = (*self.families.get(t, ()), alias)
        self.cards: dict[str, CardSpec] = {}
        self.card_memory: dict[str, int] = {}  # dimension → memory of its first card
        #: dimension → what a soft request's cores are a share of on its first card: the
        #: registered cores of an NVIDIA card (100 × deviceCoreScaling, the total HAMi fits
        #: against), 100 (%) on other vendors' cards
        self.card_cores: dict[str, int] = {}
        self.total: Vec = {}
        for n in nodes:
            for c in n.cards:
                self.cards[c.spec.uuid] = c.spec
                for dim in self.dims_of_type(c.spec.type):
                    self.total[dim] = self.total.get(dim, 0.0) + CARD
                    self.card_memory.setdefault(dim, c.spec.memory)
                    self.card_cores.setdefault(dim, _percent_of(c.spec, rules))

    def inherit(self, last: QueueShares) -> bool:
        """Take over the last session's per-task and per-job results when the cluster's cards
        are the same ones (the results read nothing else but the task or job itself, checked by
        identity on use): each session opened weighed every running task again (issue 29)."""
        if (last.cards != self.cards or last.single != self.single or last.families != self.families
                or last.counted != self.counted or last.rules != self.rules):  # fmt: skip
            return False
        self._tasks, self._min = last._tasks, last._min
        return True

    def dims_of_type(self, card_type: str) -> tuple[str, ...]:
        return (card_resource(card_type), *self.families.get(card_type, ()))

    def canonical(self, values: Mapping[str, int]) -> Vec:
        """A queue limit or a user minResources: single-type alias names read as the type."""
        out: Vec = {}
        for k, v in values.items():
            if k == "pods" or k.startswith(QUOTA_NAMES):
                continue
            name = self.single.get(k, k)
            out[name] = out.get(name, 0.0) + float(v)
        return out

    def family_caps(self, names: Iterable[str]) -> list[str]:
        """For each family name among `names` (a queue's capability) that this cluster has
        several models of, a note naming them: the family caps them together. Volcano and HAMi
        count a pod under the model name it asks, so there such a limit caps nothing (the
        article's pitfalls table); Tessera counts every member model against it, which a user
        who meant "two cards of each model" did not ask for."""
        out = []
        for name in sorted(names):
            models = sorted(t for t, fams in self.families.items() if name in fams)
            if len(models) > 1:
                out.append(family_note(name, models))
        return out

    def unreported(self, names: Iterable[str]) -> list[str]:
        """The device resources among `names` (a queue's capability) that no node of this
        cluster reports: a limit on them limits nothing, and a request for them never fits
        (issue 13: `huawei.com/Ascend910B2` on a 910B3 cluster). A memory/core companion name
        counts as its card's count name; single-type aliases as their type."""
        out = []
        for name in sorted(names):
            if not is_device_resource(name):
                continue
            base = name
            if name.startswith(("nvidia.com/", "volcano.sh/vgpu")):
                base = "nvidia.com/gpu"
            else:
                for suffix in ("-memory-percentage", "-memory", "-core"):
                    base = base.removesuffix(suffix)
            if self.single.get(base, base) not in self.total:
                out.append(name)
        return out

    def task(self, t: TaskInfo) -> Vec:
        """CPU, memory and plain scalars as requested; devices as card shares (held slices once
        placed, else the request); the counted families' as the node takes them."""
        cached = self._tasks.get(t.uid)
        if cached is not None and cached[0] is t.slices and cached[1] is t.spec:
            return cached[2]
        spec = t.spec
        out: Vec = {"cpu": float(spec.cpu_milli), "memory": float(spec.memory_mib)}
        counted = self.counted
        for k, v in spec.scalars.items():
            if not is_device_resource(k):
                out[k] = out.get(k, 0.0) + float(v)
            elif counted and vendor_of(k) in counted:
                self._add_count(out, k, float(v))
        if t.slices:
            for s in t.slices:
                card = self.cards.get(s.card)
                if card is None or (counted and card.vendor in counted):
                    continue  # (a counted family's card: charged by count above, as its node is)
                f = 1.0 if s.slice.kind == "whole" or s.slice.exclusive else min(
                    1.0, max(s.slice.memory / max(card.memory, 1), s.slice.cores / max(card.cores, 1))
                )  # fmt: skip
                for dim in self.dims_of_type(card.type):
                    out[dim] = out.get(dim, 0.0) + f * CARD
        else:
            for req in spec.devices:
                if counted and req.vendor in counted:
                    continue  # (its count name is among the scalars above)
                for dim, amount in self.request(req).items():
                    out[dim] = out.get(dim, 0.0) + amount
        if len(self._tasks) >= _MAX_CACHED:
            self._tasks.clear()
        self._tasks[t.uid] = (t.slices, spec, out)
        return out

    def _add_count(self, out: Vec, name: str, amount: float) -> None:
        """Add `amount` of a counted family's count name to `out`, on every dimension a booked
        card of it would weigh on (`counted_dims`): one rule for a task and a job's minimum."""
        for dim in self.counted_dims(name):
            out[dim] = out.get(dim, 0.0) + amount

    def counted_dims(self, name: str) -> tuple[str, ...]:
        """The dimensions a counted family's count name weighs on: its card type's (an alias
        read as the cluster's one type of it) and the type's family where the cluster has
        several, as a booked card of that type counts."""
        name = self.single.get(name, name)
        card_type = name.removeprefix("huawei.com/")
        return (name, *self.families.get(card_type, ())) if card_type != name else (name,)

    def request(self, req: DeviceRequest) -> Vec:
        dims = ((self.single.get(req.resource, req.resource),) if req.allowed_types
                else self.dims_of_type(req.type))  # fmt: skip
        memory = self.card_memory.get(dims[0], 0)
        if req.exclusive or req.memory_pct == 100:
            f = 1.0
        elif 0 < req.memory_pct < 100:
            f = req.memory_pct / 100
        else:
            f = req.memory / memory if memory else 1.0
        if req.template is None and req.cores:
            f = max(f, req.cores / self.card_cores.get(dims[0], 100))  # of the card's cores
        amount = req.count * min(f, 1.0) * CARD
        return {d: amount for d in dims}

    def min_resources(self, job: JobInfo) -> Vec | None:
        """A PodGroup's minResources. Those Tessera derived for a Job or a plain Pod (requests of
        the first minAvailable pods by priority) weigh their devices as card shares too.

        Once per job and session (overcommit and proportion both ask for every job's when the
        session opens); callers never change the vector."""
        got = self._min.get(job.key)
        if got is not None and got[0] is job.spec and got[1] == job.min_available:
            return got[2]
        out = self._min_resources(job)
        if len(self._min) >= _MAX_CACHED:
            self._min.clear()
        self._min[job.key] = (job.spec, job.min_available, out)
        return out

    def _min_resources(self, job: JobInfo) -> Vec | None:
        raw = job.spec.min_resources
        if raw is None or job.spec.kind == "PodGroup":
            return None if raw is None else self.canonical(raw)
        out = {k: v for k, v in self.canonical(raw).items() if not is_device_resource(k)}
        counted = self.counted
        left = job.min_available
        for task in sorted(job.spec.tasks, key=lambda t: -t.priority):
            n = min(left, task.replicas)
            left -= n
            if counted:  # the counted families' count names, as the pods' requests carry them
                for k, v in task.scalars.items():
                    if is_device_resource(k) and vendor_of(k) in counted:
                        self._add_count(out, k, float(v) * n)
            for req in task.devices:
                if counted and req.vendor in counted:
                    continue
                for dim, amount in self.request(req).items():
                    out[dim] = out.get(dim, 0.0) + amount * n
        return out


_BY_SESSION: weakref.WeakKeyDictionary[Session, QueueShares] = weakref.WeakKeyDictionary()


#: the last session's `QueueShares`, whose results the next one may inherit
_LAST: list[QueueShares] = []
_MAX_CACHED = 100_000  # results kept per kind; then forgotten at once (ended jobs' pile up)


def shares_of(ssn: Session) -> QueueShares:
    """One `QueueShares` per session, shared by the queue plugins."""
    got = _BY_SESSION.get(ssn)
    if got is None:
        got = _BY_SESSION[ssn] = QueueShares(ssn.node_list, ssn.counted_vendors, ssn.conf.rules,
                                             _LAST[0] if _LAST else None)  # fmt: skip
        if _LAST:
            got.inherit(_LAST[0])
        _LAST[:] = [got]
    return got


def devices_only(v: Mapping[str, float]) -> Vec:
    return {k: x for k, x in v.items() if is_device_resource(k)}


def device_totals(nodes: Iterable[NodeInfo]) -> Vec:
    """Cluster device counts under their Kubernetes resource names and alias families (milli)."""
    return QueueShares(nodes).total


def family_note(name: str, models: Iterable[str]) -> str:
    """What a family name's capability does where the cluster has several of its models."""
    shown = sorted(models)
    listed = ", ".join(shown[:-1]) + f" and {shown[-1]}" if len(shown) > 1 else "".join(shown)
    return (f"capability {name} caps {listed} together (pods of each model count against it; "
            "Volcano, counting pods by the model name they ask, would cap none): set a capability "
            "per model name to cap each")


def dim_name(dim: str) -> str:
    """How people call a dimension: `Ascend910B3` for `huawei.com/Ascend910B3`."""
    return dim.removeprefix("huawei.com/")


def amount(dim: str, v: float) -> str:
    """A dimension's value in its users' unit: cores, Mi, cards."""
    if v == INF:
        return "unlimited"
    if dim == "cpu":
        return f"{v / 1000:g}"
    if dim == "memory":
        return f"{v:g}Mi"
    if is_device_resource(dim) or "/" in dim:
        return f"{round(v / CARD, 3):g}"
    return f"{v:g}"


def whole_units(dim: str, v: float) -> float:
    """`v` rounded up to what one can add: whole cores, Mi, cards."""
    unit = 1000.0 if dim == "cpu" else CARD if (is_device_resource(dim) or "/" in dim) else 1.0
    return -(-v // unit) * unit


def first_over(want: Mapping[str, float], limit: Mapping[str, float], dims: Iterable[str],
               missing: float = 0.0, rules: int = RULES) -> str | None:  # fmt: skip
    """The first dimension where `want` exceeds `limit`: cpu and memory, then devices with the
    most specific name first (`huawei.com/Ascend910B3` before its family `…/Ascend910`).
    Before rules generation `PLAIN_EXTENDED` NVIDIA's MIG and `.shared` names were devices
    here (a PodGroup's minResources may name them): such a log keeps the dimension it named."""
    if rules >= PLAIN_EXTENDED:
        device = is_device_resource
    else:
        def device(d: str) -> bool:
            return d.startswith(DEVICE_PREFIXES)
    for k in sorted(dims, key=lambda d: (device(d), -len(d), d)):
        if want.get(k, 0.0) > limit.get(k, missing) + EPS:
            return k
    return None


def closed_queue(name: str, state: str, refuses: str, plugin: str) -> tuple[str, str]:
    """(words, what would unblock it) for a queue that is not Open."""
    return (f"queue {name} is {state}: it {refuses} ({plugin})",
            f"open the queue: tessera queue open {name}")  # fmt: skip


def enqueue_want(minres: Vec, allocated: Vec, inqueue: Vec, elastic: Vec) -> Vec:
    """What a queue would hold with a PodGroup admitted (Volcano's enqueue rule of proportion
    and capacity alike): minResources + allocated + inqueue − elastic."""
    return sub(add(add(minres, allocated), inqueue), elastic)


def parent_fix(name: str, parent: str, dim: str, limit: float) -> str:
    """The fix for a child queue held by what its parent leaves it (hierarchical capacity): its
    own capability is not the limit, and one above its parent's is refused."""
    return (f"queue {name} sets no {dim_name(dim)} capability of its own: {amount(dim, limit)} is what "
            f"queue {parent} leaves it after its other children's guarantees — raise queue {parent}'s "
            "capability or lower those guarantees, or let its running pods finish")


def enqueue_words(name: str, dim: str, minres: Vec, allocated: Vec, inqueue: Vec,
                  capability: Vec, want: Vec, plugin: str, own: Mapping[str, float] | None = None,
                  elastic: Mapping[str, float] | None = None, parent: str = "",
                  rules: int = RULES) -> tuple[str, str]:  # fmt: skip
    """(words, what would unblock it) for a PodGroup its queue cannot admit on `dim`.

    `capability` is the effective one (realCapability: the queue's own, else what the cluster
    leaves it); `own` the queue's spec. A queue with no capability of its own on `dim` is held
    by the cluster, and saying "exceeds its capability 4" blamed a limit nobody set (issue 26
    item 5) — or, under hierarchy, by its `parent`."""
    a = amount
    used = (f"queue {name}: {dim_name(dim)} minResources {a(dim, minres[dim])} + allocated "
            f"{a(dim, allocated.get(dim, 0.0))} + inqueue {a(dim, inqueue.get(dim, 0.0))}")  # fmt: skip
    if (spare := (elastic or {}).get(dim, 0.0)) > EPS:  # what its jobs hold beyond their minimum
        used += f" − elastic {a(dim, spare)}"
    limit = capability.get(dim, INF)
    if own is not None and own.get(dim, INF) > limit + EPS and parent:
        return (f"{used} exceeds the {a(dim, limit)} queue {parent} leaves it ({plugin} enqueue)",
                parent_fix(name, parent, dim, limit))
    if own is not None and own.get(dim, INF) > limit + EPS and is_device_resource(dim) and rules >= 2:
        # a card count the nodes' allocatable does not show (HAMi's plugin serves deviceSplitCount
        # nvidia.com/gpu per GPU): "exceeds the 1 the cluster has" and "add nvidia.com/gpu" read
        # as a missing resource of a node listing 10 of it
        cards = "card" if abs(limit - CARD) < EPS else "cards"
        return (f"{used} exceeds the {a(dim, limit)} {cards} the cluster has for it (queue shares "
                f"count {dim_name(dim)} in cards: a slice as its share of a card, a pod holding a card "
                f"alone as the whole card, whatever count of it the nodes' allocatable lists; the "
                f"queue sets no lower capability; {plugin} enqueue)",
                f"let the admitted jobs holding {dim_name(dim)} cards finish, or add nodes with "
                "more of them")  # fmt: skip
    if own is not None and own.get(dim, INF) > limit + EPS:
        return (f"{used} exceeds the {a(dim, limit)} the cluster has for it (the queue sets no lower "
                f"capability; {plugin} enqueue)",
                f"add {dim_name(dim)} to the cluster, or let the admitted jobs finish")  # fmt: skip
    if dim in _FAMILIES and rules >= 1:  # a family dimension: the cluster has several models
        return (f"{used} exceeds its capability {a(dim, limit)} ({plugin} enqueue; {dim} is the "
                "family name: it counts every model of it the cluster has together, where Volcano "
                "would cap none)",
                f"set queue {name}'s capability per model name (what its pods ask) instead of "
                f"{dim}, raise it to {a(dim, want[dim])}, or let its admitted jobs finish")  # fmt: skip
    return (f"{used} exceeds its capability {a(dim, limit)} ({plugin} enqueue)",
            f"raise queue {name}'s capability of {dim_name(dim)} to {a(dim, want[dim])}, or let "
            "its admitted jobs finish")  # fmt: skip
