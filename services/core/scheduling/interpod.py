"""Inter-pod affinity in a session: kube-scheduler's InterPodAffinity, filter and score, as
Volcano's predicates (`predicate.PodAffinityEnable`) and nodeorder (`podaffinity.weight`) run it.

Unlike every other predicate these read *other pods*: where they run, with which labels, in
which namespace, and their own terms (an existing pod's required anti-affinity keeps a new pod
out of its domain, its preferred terms pull or push symmetrically). So the outcome on one node
changes when a pod lands on another node of the same zone, and the per-node caches of
actions/nodes.py may not hold it: a task that reads other pods (`reads_pods`) is evaluated
afresh on every node, the others keep their caches untouched.

The pods are kept once per session (`index_of`), grouped by what affinity reads of them
(namespace, labels, terms) with a count per node, brought up to date from the session's own
change log (`Session.node_changes`: every allocate, deallocate and eviction touches a node), so
a gang's earlier members count for the next one like any pod already there. A task's counts
per topology domain are computed per group, not per pod, and kept until the session changes.
When no pod of the session has a term, none of this is built: `active` is False and every
check returns at once.

A term's `namespaceSelector` is matched against the labels of the namespace of the pod it
looks at, as the log holds them (`NamespaceChanged`: `tessera apply`, simulate's workloads, the
API server's Namespaces); it is ORed with the term's `namespaces`, `{}` selects every
namespace, and a namespace the log has no labels of has the one label every namespace has,
`kubernetes.io/metadata.name`. The same holds for the terms of pods already placed (their
anti-affinity keeps a pod out when its namespace's labels are selected). The labels are the
snapshot's, so a label changed on a namespace is what the next session reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from contracts.events import OtherPods
from contracts.workloads import LabelRequirement, PodAffinity, PodAffinityTerm
from services.core.scheduling.model import TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.snapshot import RELEASING

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
#: InterPodAffinityArgs.hardPodAffinityWeight's default: an existing pod's *required* affinity
#: term matching the new pod scores like a preferred term of this weight
HARD_POD_AFFINITY_WEIGHT = 1
MAX_NODE_SCORE = 100
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Pair = tuple[str, str]  # (topology key, value): one topology domain


def selects(selector: Sequence[LabelRequirement] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: unset selects nothing, empty selects everything."""
    if selector is None:
        return False
    for r in selector:
        has = r.key in labels
        op = r.operator
        if op == "In":
            ok = has and labels[r.key] in r.values
        elif op == "NotIn":
            ok = not has or labels[r.key] not in r.values
        elif op == "Exists":
            ok = has
        elif op == "DoesNotExist":
            ok = not has
        else:
            ok = False
        if not ok:
            return False
    return True


NO_NAMESPACES: Mapping[str, Mapping[str, str]] = {}


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], name: str) -> Mapping[str, str]:
    """A namespace's labels (the snapshot's), or its name label alone when the log has none."""
    got = namespaces.get(name)
    return got if got is not None else {NAMESPACE_NAME_LABEL: name}


def term_matches(
    term: PodAffinityTerm, namespace: str, labels: Mapping[str, str],
    namespaces: Mapping[str, Mapping[str, str]] = NO_NAMESPACES,
) -> bool:  # fmt: skip
    """kube's AffinityTerm.Matches: the pod's namespace is one of the term's, or the term's
    namespaceSelector selects that namespace's labels (`namespaces`, by name), and the label
    selector selects the pod."""
    if namespace not in term.namespaces:
        ns = term.namespace_selector
        if ns is None or (ns and not selects(ns, namespace_labels(namespaces, namespace))):
            return False
    return selects(term.selector, labels)


def _terms(pa: PodAffinity) -> Iterable[PodAffinityTerm]:
    yield from pa.affinity
    yield from pa.anti_affinity
    yield from pa.preferred
    yield from pa.preferred_anti


@dataclass(slots=True, eq=False)
class _Group:
    """Pods alike in all that affinity reads of them, and how many of them are on each node."""

    namespace: str
    labels: dict[str, str]
    terms: PodAffinity | None
    nodes: dict[int, int] = field(default_factory=dict)  # node position → pods there


@dataclass(slots=True)
class FilterCounts:
    """kube's preFilterState: matching pods per topology domain (zero entries removed)."""

    affinity: dict[Pair, int] = field(default_factory=dict)  # pods matching every required term
    anti: dict[Pair, int] = field(default_factory=dict)  # pods matching one anti-affinity term
    existing: dict[Pair, int] = field(default_factory=dict)  # their anti-affinity hits this pod


def _bump(counts: dict[Pair, int], pair: Pair, n: int) -> None:
    v = counts.get(pair, 0) + n
    if v:
        counts[pair] = v
    else:
        counts.pop(pair, None)


class PodIndex:
    """The session's pods by group and node, for the inter-pod rules; see the module doc."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        #: the namespaces' labels, for the terms' namespaceSelectors
        self.ns: Mapping[str, Mapping[str, str]] = ssn.snapshot.namespaces
        #: every distinct set of terms some pod of the session carries (placed or waiting)
        held: dict[tuple[str, PodAffinity], None] = {}
        for job in ssn.jobs.values():
            for t in job.tasks.values():
                if t.spec.pod_affinity is not None:
                    held[(job.namespace, t.spec.pod_affinity)] = None
        #: other schedulers' pods (NodeUsage.others), by node position: they never change in
        #: a session, and count like Tessera's own (their anti-affinity too)
        others: dict[int, tuple[OtherPods, ...]] = {}
        for snap in ssn.snapshot.nodes:
            node = ssn.nodes.get(snap.name)
            if snap.others and node is not None:
                others[node.pos] = snap.others
                for o in snap.others:
                    if o.pod_affinity is not None:
                        held[(o.namespace, o.pod_affinity)] = None
        self.held = tuple(held)
        #: some pod of the session spreads (PodTopologySpread, topologyspread.py): it reads the
        #: pods of its domains, with no symmetry (other pods' constraints never bind it)
        self.spreads = any(t.spec.spread for job in ssn.jobs.values() for t in job.tasks.values())
        self.active = bool(self.held) or self.spreads
        self._others = others
        self.groups: list[_Group] = []
        self._group_of: dict[tuple[object, ...], int] = {}
        self._per_node: list[dict[int, int]] = []
        self._releasing: list[list[TaskInfo]] = []
        self.synced = 0
        self._aware: dict[int, tuple[object, bool]] = {}
        self._keys: dict[int, tuple[object, str, tuple[object, ...]]] = {}
        self._filters: dict[tuple[object, ...], tuple[int, FilterCounts]] = {}
        self._scores: dict[tuple[object, ...], tuple[int, dict[int, int]]] = {}
        #: topologyspread.py's counts per task key, with the version they were made at
        self.spread_counts: dict[tuple[object, ...], tuple[int, object]] = {}
        if self.active:
            self._per_node = [{} for _ in ssn.node_list]
            self._releasing = [[] for _ in ssn.node_list]
            for node in ssn.node_list:
                self._recount(node.pos)
            self.synced = len(ssn.node_changes)

    # --- keeping up with the session -----------------------------------------------------

    def _group(self, task: TaskInfo) -> int:
        return self._group_for(task.namespace, task.labels, task.spec.pod_affinity)

    def _group_for(self, namespace: str, labels: dict[str, str], pa: PodAffinity | None) -> int:
        key = (namespace, tuple(sorted(labels.items())), pa)
        gid = self._group_of.get(key)
        if gid is None:
            gid = self._group_of[key] = len(self.groups)
            self.groups.append(_Group(namespace, dict(labels), pa))
        return gid

    def _recount(self, pos: int) -> None:
        for gid, n in self._per_node[pos].items():
            nodes = self.groups[gid].nodes
            left = nodes[pos] - n
            if left:
                nodes[pos] = left
            else:
                del nodes[pos]
        counts: dict[int, int] = {}
        releasing: list[TaskInfo] = []
        for t in self.ssn.node_list[pos].tasks.values():
            gid = self._group(t)
            counts[gid] = counts.get(gid, 0) + 1
            if t.status == RELEASING:
                releasing.append(t)
        for o in self._others.get(pos, ()):
            gid = self._group_for(o.namespace, o.labels, o.pod_affinity)
            counts[gid] = counts.get(gid, 0) + o.count
        for gid, n in counts.items():
            nodes = self.groups[gid].nodes
            nodes[pos] = nodes.get(pos, 0) + n
        self._per_node[pos] = counts
        self._releasing[pos] = releasing

    def version(self) -> int:
        """The session's change count, after bringing the changed nodes' counts up to date."""
        changes = self.ssn.node_changes
        if self.synced < len(changes):
            for pos in set(changes[self.synced :]):
                self._recount(pos)
            self.synced = len(changes)
        return self.synced

    # --- who reads other pods ------------------------------------------------------------

    def reads_pods(self, task: TaskInfo) -> bool:
        """Whether the task's outcome on a node depends on pods elsewhere: it has terms of its
        own, or some pod's term of the session selects it (symmetric anti-affinity, and the
        scores of existing pods' terms)."""
        return self.active and (bool(task.spec.spread) or self.affinity_aware(task))

    def affinity_aware(self, task: TaskInfo) -> bool:
        """The inter-pod affinity part of `reads_pods` (its filter and score run for these)."""
        if not self.held:
            return False
        spec = task.spec
        got = self._aware.get(id(spec))
        if got is None or got[0] is not spec:
            ns, labels = task.namespace, task.labels
            aware = spec.pod_affinity is not None or any(
                term_matches(term, ns, labels, self.ns) for _, pa in self.held for term in _terms(pa)
            )
            got = self._aware[id(spec)] = (spec, aware)
        return got[1]

    def matching(
        self, namespace: str, selector: Sequence[LabelRequirement] | None
    ) -> dict[int, int]:
        """Per node position, the pods of `namespace` the selector selects that are not being
        deleted (PodTopologySpread counts no terminating pod)."""
        self.version()
        out: dict[int, int] = {}
        for gid, g in enumerate(self.groups):
            if g.nodes and g.namespace == namespace and selects(selector, g.labels):
                for pos, n in g.nodes.items():
                    out[pos] = out.get(pos, 0) + n
                for pos in g.nodes:
                    gone = sum(1 for t in self._releasing[pos] if self._group(t) == gid)
                    if gone:
                        out[pos] -= gone
        return out

    def key(self, task: TaskInfo) -> tuple[object, ...]:
        """What the task's counts depend on (namespace, labels, spec); kept per spec object,
        shared by a job's replicas: the aware paths ask it once per node evaluated."""
        spec = task.spec
        got = self._keys.get(id(spec))
        if got is None or got[0] is not spec or got[1] != task.job:
            key = (task.namespace, tuple(sorted(task.labels.items())), spec.pod_affinity,
                   spec.spread, tuple(sorted(spec.node_selector.items())), spec.affinity,
                   spec.tolerations)  # fmt: skip
            got = self._keys[id(spec)] = (spec, task.job, key)
        return got[2]

    # --- filter ----------------------------------------------------------------------------

    def filter_counts(
        self, task: TaskInfo, future: bool = False, without: Sequence[TaskInfo] = ()
    ) -> FilterCounts:
        """The task's counts per domain; `future`: with the Releasing pods and `without` (the
        victims preempt weighs) gone, as kube's preemption removes them before filtering."""
        version = self.version()
        key = self.key(task)
        got = self._filters.get(key)
        if got is None or got[0] != version:
            counts = FilterCounts()
            pa = task.spec.pod_affinity
            everyone = pa is not None and bool(pa.affinity or pa.anti_affinity)
            for g in self.groups:
                if g.nodes and (everyone or (g.terms is not None and g.terms.anti_affinity)):
                    self._add(counts, task, g, g.nodes.items())
            got = self._filters[key] = (version, counts)
        if not future:
            return got[1]
        gone = [t for ts in self._releasing for t in ts]
        gone += [t for t in without if t.status != RELEASING and t.node in self.ssn.nodes]
        if not gone:
            return got[1]
        counts = FilterCounts(dict(got[1].affinity), dict(got[1].anti), dict(got[1].existing))
        for t in gone:
            self._add(
                counts, task, self.groups[self._group(t)], ((self.ssn.nodes[t.node].pos, -1),)
            )
        return counts

    def _add(
        self, counts: FilterCounts, task: TaskInfo, g: _Group, where: Iterable[tuple[int, int]]
    ) -> None:
        """Group `g`'s pods at `where` (node position, how many; negative takes away)."""
        pa = task.spec.pod_affinity
        ns, labels = task.namespace, task.labels
        aff = pa.affinity if pa is not None else ()
        all_aff = bool(aff) and all(term_matches(t, g.namespace, g.labels, self.ns) for t in aff)
        anti = [t for t in (pa.anti_affinity if pa is not None else ())
                if term_matches(t, g.namespace, g.labels, self.ns)]  # fmt: skip
        existing = [t for t in (g.terms.anti_affinity if g.terms is not None else ())
                    if term_matches(t, ns, labels, self.ns)]  # fmt: skip
        if not (all_aff or anti or existing):
            return
        nodes = self.ssn.node_list
        for pos, n in where:
            node_labels = nodes[pos].labels
            if all_aff:
                for t in aff:
                    if t.topology_key in node_labels:
                        _bump(counts.affinity, (t.topology_key, node_labels[t.topology_key]), n)
            for hits, into in ((anti, counts.anti), (existing, counts.existing)):
                for t in hits:
                    if t.topology_key in node_labels:
                        _bump(into, (t.topology_key, node_labels[t.topology_key]), n)

    def refusal(
        self, task: TaskInfo, labels: Mapping[str, str], future: bool = False,
        without: Sequence[TaskInfo] = (),
    ) -> str:  # fmt: skip
        """kube's InterPodAffinity Filter on a node with these labels: its reason, "" if none."""
        pa = task.spec.pod_affinity
        counts = self.filter_counts(task, future, without)
        if pa is not None and pa.affinity:
            found = True
            for t in pa.affinity:
                value = labels.get(t.topology_key)
                if value is None:
                    return AFFINITY  # every topology label must be on the node
                if counts.affinity.get((t.topology_key, value), 0) <= 0:
                    found = False
            # the first pod of a set with affinity to itself: nothing matches anywhere yet
            if not found and not (not counts.affinity and self._matches_own(task, pa)):
                return AFFINITY
        if pa is not None and pa.anti_affinity and counts.anti:
            for t in pa.anti_affinity:
                value = labels.get(t.topology_key)
                if value is not None and counts.anti.get((t.topology_key, value), 0) > 0:
                    return ANTI_AFFINITY
        if counts.existing:
            for pair in labels.items():
                if counts.existing.get(pair, 0) > 0:
                    return EXISTING_ANTI_AFFINITY
        return ""

    def pod_in(self, gid: int, key: str, value: str) -> str:
        """A pod of group `gid` on a node whose `key` label is `value` (first by node order),
        named `namespace/pod`; another scheduler's is described, its name not being in the
        log; "" when there is none."""
        self.version()
        nodes = self.ssn.node_list
        for pos in sorted(self.groups[gid].nodes):
            node = nodes[pos]
            if node.labels.get(key) == value:
                for t in sorted(node.tasks.values(), key=lambda t: t.uid):
                    if self._group(t) == gid:
                        return f"{t.namespace}/{t.pod}"
                g = self.groups[gid]
                shown_labels = ",".join(f"{k}={v}" for k, v in sorted(g.labels.items()))
                return f"a pod of another scheduler on {node.name} ({g.namespace}, {shown_labels})"
        return ""

    def _matches_own(self, task: TaskInfo, pa: PodAffinity) -> bool:
        return all(term_matches(t, task.namespace, task.labels, self.ns) for t in pa.affinity)

    # --- score -----------------------------------------------------------------------------

    def score(self, task: TaskInfo, pos: int) -> int:
        """kube's InterPodAffinity score of the node at `pos`, normalised 0..100 over the
        session's nodes (kube normalises over the feasible ones; the order is the same)."""
        version = self.version()
        key = self.key(task)
        got = self._scores.get(key)
        if got is None or got[0] != version:
            got = self._scores[key] = (version, self._normalised(task))
        return got[1].get(pos, 0)

    def _normalised(self, task: TaskInfo) -> dict[int, int]:
        pa = task.spec.pod_affinity
        preferred = pa is not None and bool(pa.preferred or pa.preferred_anti)
        ns, labels = task.namespace, task.labels
        by_key: dict[str, dict[str, int]] = {}
        for g in self.groups:
            if not g.nodes or not (preferred or g.terms is not None):
                continue
            hits: list[tuple[str, int]] = []
            if pa is not None:
                hits += [(t.topology_key, t.weight) for t in pa.preferred
                         if term_matches(t, g.namespace, g.labels, self.ns)]  # fmt: skip
                hits += [(t.topology_key, -t.weight) for t in pa.preferred_anti
                         if term_matches(t, g.namespace, g.labels, self.ns)]  # fmt: skip
            if g.terms is not None:
                hits += [(t.topology_key, HARD_POD_AFFINITY_WEIGHT) for t in g.terms.affinity
                         if term_matches(t, ns, labels, self.ns)]  # fmt: skip
                hits += [(t.topology_key, t.weight) for t in g.terms.preferred
                         if term_matches(t, ns, labels, self.ns)]  # fmt: skip
                hits += [(t.topology_key, -t.weight) for t in g.terms.preferred_anti
                         if term_matches(t, ns, labels, self.ns)]  # fmt: skip
            if not hits:
                continue
            nodes = self.ssn.node_list
            for p, n in g.nodes.items():
                node_labels = nodes[p].labels
                for tk, w in hits:
                    value = node_labels.get(tk)
                    if value is not None:
                        values = by_key.setdefault(tk, {})
                        values[value] = values.get(value, 0) + w * n
        if not by_key:
            return {}
        raw = {
            node.pos: sum(values.get(node.labels.get(tk, ""), 0) if tk in node.labels else 0
                          for tk, values in by_key.items())
            for node in self.ssn.node_list
        }  # fmt: skip
        low, high = min(raw.values()), max(raw.values())
        if high == low:
            return {}
        return {p: int(MAX_NODE_SCORE * (v - low) / (high - low)) for p, v in raw.items()}


def index_of(ssn: Session) -> PodIndex:
    """The session's one PodIndex (built on first use; the session object holds it)."""
    idx = ssn.__dict__.get("_pod_index")
    if idx is None:
        idx = ssn.__dict__["_pod_index"] = PodIndex(ssn)
    return idx


def reads_pods(ssn: Session, task: TaskInfo) -> bool:
    """Whether the node caches must leave this task alone (see the module doc); False at once
    when no plugin of the session opened the index or no pod has a term."""
    idx: PodIndex | None = ssn.__dict__.get("_pod_index")
    return idx is not None and idx.active and idx.reads_pods(task)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Which rule refused a node, through which term, and a pod it is about (explain's words)."""

    reason: str  # AFFINITY, ANTI_AFFINITY or EXISTING_ANTI_AFFINITY
    term: PodAffinityTerm
    value: str = ""  # the node's value of the term's topology key ("" when it has none)
    pod: str = ""  # the pod in the domain (anti-affinity), or whose term it is


def shown(selector: Sequence[LabelRequirement] | None) -> str:
    """A selector as kubectl and kube-scheduler print one (`app=web,tier in (a,b),!legacy`)."""
    if selector is None:
        return "<none>"
    parts = []
    for r in selector:
        if r.operator == "In" and len(r.values) == 1:
            parts.append(f"{r.key}={r.values[0]}")
        elif r.operator in ("In", "NotIn"):
            parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
        else:
            parts.append(r.key if r.operator == "Exists" else f"!{r.key}")
    return ",".join(parts) or "<everything>"


def refusal_of(ssn: Session, task: TaskInfo, node_labels: Mapping[str, str]) -> Refusal | None:
    """The rule, term and pod behind `PodIndex.refusal` on a node with these labels (explain
    asks, once per waiting job; the pods are walked here, not in the filter)."""
    idx = index_of(ssn)
    reason = idx.refusal(task, node_labels) if idx.affinity_aware(task) else ""
    if not reason:
        return None
    pa = task.spec.pod_affinity
    if reason == AFFINITY and pa is not None:
        counts = idx.filter_counts(task)
        for t in pa.affinity:
            value = node_labels.get(t.topology_key)
            if value is None or counts.affinity.get((t.topology_key, value), 0) <= 0:
                return Refusal(reason, t, value or "")
    if reason == ANTI_AFFINITY and pa is not None:
        for t in pa.anti_affinity:
            value = node_labels.get(t.topology_key)
            if value is None:
                continue
            for gid, g in enumerate(idx.groups):
                if term_matches(t, g.namespace, g.labels, idx.ns):
                    holder = idx.pod_in(gid, t.topology_key, value)
                    if holder:
                        return Refusal(reason, t, value, holder)
    for gid, g in enumerate(idx.groups):  # EXISTING_ANTI_AFFINITY
        for t in g.terms.anti_affinity if g.terms is not None else ():
            value = node_labels.get(t.topology_key)
            if value is not None and term_matches(t, task.namespace, task.labels, idx.ns):
                holder = idx.pod_in(gid, t.topology_key, value)
                if holder:
                    return Refusal(EXISTING_ANTI_AFFINITY, t, value, holder)
    return None
