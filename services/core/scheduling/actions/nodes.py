"""Predicating and scoring nodes for one task (Volcano `util.PredicateNodes` / `PrioritizeNodes`).

Resource fit on FutureIdle first, then plugin predicates; only a sampled number of feasible
nodes is searched (`CalculateNumOfFeasibleNodesToFind`: max(100, N×(50 − N/125)%) ≥ 5 %),
starting where the previous search stopped. Nodes fitting Idle are preferred over nodes that
fit only FutureIdle; ties in score go to the earlier node (inventory order) — Volcano picks
randomly there, we stay deterministic.

With `Session.node_cache` on, a node's outcome for a task shape (fails with a reason, fits
FutureIdle only, or fits Idle, with its score) is kept in `NodeInfo.fit_cache` until the session
changes that node. One placement changes one node, so the next task of the same shape (the
common case: many replicas, many identical pods) re-evaluates one node and reads the rest. The
scan order, the sampling and the tie-breaks are the same either way. A task whose outcome
reads pods on other nodes (inter-pod affinity, interpod.py `reads_pods`; a ReadWriteOncePod
claim, volumes.py `shares_claims`) is never cached: a placement on one node changes its outcome
on every node of that node's zone (of the cluster).

`select_node` (allocate) goes further: a `ShapeIndex` keeps, per task shape, every node's
outcome as bitmasks over node positions plus score buckets, updated from the session's change
log. Finding "the first k feasible nodes from the rotating start" is then a popcount binary
search, and "the best-scoring one, first in scan order on ties" a walk down the distinct
scores — no per-node loop per task. It answers exactly what `predicate_nodes` + `best_node`
answer; tests/core/scheduling/test_node_cache.py holds it to that on random clusters.
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from dataclasses import dataclass, field

from contracts.devices import CardSpec, CardUsage
from contracts.events import NodeScore
from services.core.devices.mig import usage_instances
from services.core.scheduling.interpod import reads_pods
from services.core.scheduling.model import NodeInfo, TaskInfo, task_shape
from services.core.scheduling.resources import Resource
from services.core.scheduling.session import Session
from services.core.scheduling.volumes import shares_claims

# NodeInfo.fit_cache kinds
FIT_FAILS = 0
FIT_FUTURE = 1  # fits FutureIdle only: the task would be pipelined
FIT_IDLE = 2
FIT_UNKNOWN = 3  # ShapeIndex only: not evaluated yet
#: runners-up a placement records (the event stays small whatever the cluster's size)
RUNNERS_UP = 3


@dataclass
class FitResult:
    idle: list[NodeInfo] = field(default_factory=list)
    future: list[NodeInfo] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # node → reason

    @property
    def empty(self) -> bool:
        return not self.idle and not self.future

    def summary(self, total: int) -> str:
        """kube-scheduler style: `0/3 nodes are unavailable: 2 Insufficient cpu, 1 ….`"""
        counts = Counter(self.errors.values())
        parts = ", ".join(
            f"{n} {r}" for r, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))
        )
        return (
            f"0/{total} nodes are unavailable: {parts}."
            if parts
            else f"0/{total} nodes are available."
        )


def num_to_find(n: int) -> int:
    if n < 100:
        return n
    pct = max(5, 50 - n // 125)
    return max(100, n * pct // 100)


def _reads_others(ssn: Session, task: TaskInfo) -> bool:
    """Whether the task's outcome on a node reads pods elsewhere (see the module doc)."""
    return reads_pods(ssn, task) or shares_claims(task)


def predicate_nodes(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo], sample: bool = True,
    cached: bool | None = None,
) -> FitResult:  # fmt: skip
    out = FitResult()
    total = len(nodes)
    if total == 0:
        return out
    want = num_to_find(total) if sample else total
    start = ssn.__dict__.setdefault("_next_start", 0) % total if sample else 0
    use = ssn.node_cache if cached is None else cached
    scan = _scan_cached if use and not _reads_others(ssn, task) else _scan
    stop = scan(ssn, task, nodes, start, want, out)
    if sample:
        ssn.__dict__["_next_start"] = (start + stop + 1) % total
    return out


def _scan(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo], start: int, want: int, out: FitResult
) -> int:
    """The straightforward evaluation; returns the offset of the last node looked at."""
    total = len(nodes)
    found = 0
    i = 0
    for i in range(total):
        node = nodes[(start + i) % total]
        reasons = ssn.fits_resources(task, node, future=True)
        if reasons:
            out.errors[node.name] = ", ".join(reasons)
            continue
        status = ssn.predicate(task, node)
        if status is not None:
            out.errors[node.name] = status.message()
            continue
        if ssn.fits_resources(task, node, future=False):
            out.future.append(node)
        else:
            out.idle.append(node)
        found += 1
        if found >= want:
            break
    return i


def _evaluate(ssn: Session, task: TaskInfo, node: NodeInfo) -> tuple[int, str | float]:
    """One node's outcome for `task`, exactly as `_scan` decides it, plus its score (computed
    right after the predicates, which deviceshare's score reads)."""
    reasons = ssn.fits_resources(task, node, future=True)
    if reasons:
        return FIT_FAILS, ", ".join(reasons)
    status = ssn.predicate(task, node)
    if status is not None:
        return FIT_FAILS, status.message()
    kind = FIT_FUTURE if ssn.fits_resources(task, node, future=False) else FIT_IDLE
    return kind, ssn.node_score(task, node)


def shape_of(task: TaskInfo) -> tuple[object, ...]:
    shape = task.shape
    if shape is None:
        shape = task.shape = task_shape(task.spec)
    return shape


def _scan_cached(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo], start: int, want: int, out: FitResult
) -> int:
    """`_scan` reading `NodeInfo.fit_cache`; evaluates only nodes changed since last seen."""
    shape = shape_of(task)
    total = len(nodes)
    errors, idle, future = out.errors, out.idle, out.future
    found = 0
    i = 0
    for i in range(total):
        j = start + i
        node = nodes[j if j < total else j - total]
        entry = node.fit_cache.get(shape)
        if entry is None:
            entry = _outcome(ssn, task, node, shape)
        kind = entry[0]
        if kind == FIT_FAILS:
            errors[node.name] = entry[1]  # type: ignore[assignment]
            continue
        (idle if kind == FIT_IDLE else future).append(node)
        found += 1
        if found >= want:
            break
    return i


def best_node(
    ssn: Session, task: TaskInfo, candidates: list[NodeInfo], cached: bool | None = None
) -> NodeInfo:
    """The highest-scoring candidate; the first one wins ties."""
    if (ssn.node_cache if cached is None else cached) and not _reads_others(ssn, task):
        shape = shape_of(task)
        scores = [_cached_score(ssn, task, node, shape) for node in candidates]
    else:
        scores = [ssn.node_score(task, node) for node in candidates]
    best_score = max(scores)
    task.score = float(best_score or 0.0)
    best = scores.index(best_score)
    order = sorted((i for i in range(len(candidates)) if i != best), key=lambda i: (-scores[i], i))
    task.runners_up = tuple(NodeScore(node=candidates[i].name, score=float(scores[i]))
                            for i in order[:RUNNERS_UP])  # fmt: skip
    task.feasible = len(candidates)
    return candidates[best]


def _cached_score(ssn: Session, task: TaskInfo, node: NodeInfo, shape: tuple[object, ...]) -> float:
    entry = node.fit_cache.get(shape)
    if entry is None or entry[0] == FIT_FAILS:  # not from this scan: score it directly
        return ssn.node_score(task, node)
    return entry[1]  # type: ignore[return-value]


class ShapeIndex:
    """Every node's outcome for one task shape, by node position: bitmasks of feasible / Idle /
    FutureIdle-only nodes, the distinct scores of each group (sorted) with a bitmask per score,
    and the failure reasons. `synced` is how far into `Session.node_changes` it has read.

    A node not evaluated yet (`FIT_UNKNOWN`, the start for all) or changed since it was counts as
    feasible and is `dirty`: a search re-evaluates the dirty nodes of its window until none is
    left, so only the nodes a search reaches are ever evaluated, as in the plain scan."""

    __slots__ = (
        "buckets", "dirty", "feasible", "idle", "kinds", "reasons", "scores", "sorted", "synced",
    )  # fmt: skip

    def __init__(self, n: int, synced: int) -> None:
        self.kinds = bytearray([FIT_UNKNOWN]) * n
        self.scores: dict[int, float] = {}
        self.reasons: dict[int, str] = {}
        self.feasible = self.dirty = (1 << n) - 1
        self.idle = 0
        # per kind (FIT_FUTURE, FIT_IDLE): score -> mask, and the scores in ascending order
        self.buckets: tuple[dict[float, int], ...] = ({}, {}, {})
        self.sorted: tuple[list[float], ...] = ([], [], [])
        self.synced = synced

    def set(self, pos: int, kind: int, value: str | float) -> None:
        bit = 1 << pos
        old = self.kinds[pos]
        if old in (FIT_FUTURE, FIT_IDLE):
            score = self.scores.pop(pos)
            bucket = self.buckets[old]
            rest = bucket[score] & ~bit
            if rest:
                bucket[score] = rest
            else:
                del bucket[score]
                self.sorted[old].remove(score)
            self.idle &= ~bit
        elif old == FIT_FAILS:
            del self.reasons[pos]
        self.kinds[pos] = kind
        if kind == FIT_FAILS:
            self.feasible &= ~bit
            self.reasons[pos] = value  # type: ignore[assignment]
            return
        score = value  # type: ignore[assignment]
        self.scores[pos] = score
        bucket = self.buckets[kind]
        if score in bucket:
            bucket[score] |= bit
        else:
            bucket[score] = bit
            insort(self.sorted[kind], score)
        self.feasible |= bit
        if kind == FIT_IDLE:
            self.idle |= bit


CORDON_ANNOTATION = "hami.io/device-cordon"  # names card uuids: such a node is one of a kind


def _resource_key(r: Resource) -> tuple[object, ...]:
    return (r.cpu, r.memory, r.pods, tuple(sorted(r.scalars.items())) if r.scalars else ())


def _state_key(ssn: Session, node: NodeInfo) -> tuple[object, ...]:
    """All that node-local plugins read of a node, without its name and card uuids: two nodes
    with equal keys get equal outcomes (kind, reason, score) for every task shape. The static
    part (allocatable, labels, annotations, taints, card specs) is interned to a class number."""
    key = node.state_key
    if key is None:
        static = (
            _resource_key(node.allocatable),
            tuple(sorted(node.labels.items())),
            tuple(sorted(node.annotations.items())),
            node.taints,
            tuple((c.spec.index, c.spec.type, c.spec.vendor, c.spec.memory, c.spec.cores,
                   c.spec.split_count, c.spec.numa, c.spec.network_id, c.spec.healthy,
                   c.spec.mode, c.spec.resource, c.spec.mig_geometries) for c in node.cards),
            node.name if CORDON_ANNOTATION in node.annotations else "",
            node.extended,
        )  # fmt: skip
        cls = ssn.node_classes.setdefault(static, len(ssn.node_classes))
        key = node.state_key = (
            cls,
            _resource_key(node.idle),
            _resource_key(node.used),
            _resource_key(node.releasing),
            _resource_key(node.pipelined),
            tuple(_card_state(c.spec, c.usage) for c in node.cards),
            _ports_held(node),
        )  # fmt: skip
    return key


def _card_state(card: CardSpec, u: CardUsage) -> tuple[object, ...]:
    """A card's usage as the fit reads it; on a carved MIG card also its instances by
    placement, for the MIG fit reads where they lie, not only the totals (a 1g.10gb at 5 leaves
    no room for a 2g.20gb, one at 6 does)."""
    state = (u.memory_used, u.cores_used, u.slices_used, u.exclusive, u.healthy, u.retired)
    if not card.mig_geometries:
        return state
    return (*state, tuple(sorted((i.start, i.size, i.profile) for i in usage_instances(u))))


def _ports_held(node: NodeInfo) -> tuple[tuple[str, str, int], ...]:
    """The host ports the node's pods hold (NodePorts reads them): two nodes alike in all else
    but these answer a pod asking a port differently."""
    return tuple(sorted([*((p.protocol, p.ip, p.port) for t in node.tasks.values() for p in t.spec.host_ports),
                         *((p.protocol, p.ip, p.port) for p, _ in node.held_ports)]))  # fmt: skip


def _names_cards(task: TaskInfo) -> bool:
    """A request pinned to (or away from) card uuids depends on which node it is."""
    return any(d.use_uuids or d.nouse_uuids for d in task.spec.devices)


def _outcome(
    ssn: Session, task: TaskInfo, node: NodeInfo, shape: tuple[object, ...]
) -> tuple[int, str | float]:
    """The node's outcome for the shape: from the node's cache, else from an equal node state
    seen before in this session, else evaluated."""
    entry = node.fit_cache.get(shape)
    if entry is None:
        if not ssn.share_outcomes or _names_cards(task):
            entry = _evaluate(ssn, task, node)
        else:
            key = (_state_key(ssn, node), shape)
            entry = ssn.outcomes.get(key)
            if entry is None:
                entry = ssn.outcomes[key] = _evaluate(ssn, task, node)
        node.fit_cache[shape] = entry
    return entry


def _index(ssn: Session, task: TaskInfo) -> ShapeIndex:
    """The shape's index; nodes changed since it last looked are marked stale (`dirty`)."""
    shape = shape_of(task)
    changes = ssn.node_changes
    idx: ShapeIndex | None = ssn.shape_indexes.get(shape)
    if idx is None:
        idx = ssn.shape_indexes[shape] = ShapeIndex(len(ssn.node_list), len(changes))
    elif idx.synced < len(changes):
        dirty = idx.dirty
        for pos in changes[idx.synced :]:
            dirty |= 1 << pos
        idx.dirty = dirty
        idx.synced = len(changes)
    return idx


def _refresh(ssn: Session, task: TaskInfo, idx: ShapeIndex, stale: int) -> None:
    """Re-evaluate the stale nodes of `stale` (a mask) for the task's shape."""
    shape = shape_of(task)
    nodes = ssn.node_list
    idx.dirty &= ~stale
    while stale:
        low = stale & -stale
        pos = low.bit_length() - 1
        stale ^= low
        idx.set(pos, *_outcome(ssn, task, nodes[pos], shape))


def _window(feasible: int, start: int, want: int, total: int) -> tuple[int, int]:
    """The positions a scan from `start` looks at before it has found `want` feasible nodes (a
    mask), and the offset from `start` of the last one."""
    high = (feasible >> start).bit_count()
    if high >= want:  # the window ends before wrapping around
        stop = _nth_from(feasible, start, want)
        return (1 << (stop + 1)) - (1 << start), stop - start
    if feasible.bit_count() >= want:  # wraps around and ends before start
        stop = _nth_from(feasible, 0, want - high)
        full = (1 << total) - 1
        return (full - (1 << start) + 1) | ((1 << (stop + 1)) - 1), stop + total - start
    return (1 << total) - 1, total - 1  # fewer feasible nodes than wanted: the whole ring


def _nth_from(mask: int, lo: int, k: int) -> int:
    """Position of the k-th (1-based) set bit of `mask` at or after `lo`; mask must hold k."""
    m = mask >> lo
    left, right = 1, m.bit_length()  # smallest length L with popcount(m & (2^L − 1)) ≥ k
    while left < right:
        mid = (left + right) // 2
        if (m & ((1 << mid) - 1)).bit_count() >= k:
            right = mid
        else:
            left = mid + 1
    return lo + left - 1


def select_node(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo]
) -> tuple[NodeInfo | None, bool, FitResult]:
    """allocate's node choice: (node, fits Idle, fit result whose errors explain an empty one).

    Equal to `predicate_nodes` (sampled) followed by `best_node` on the Idle group, else the
    FutureIdle group; the index path answers the same question without a per-node loop."""
    seen = 0
    if ssn.node_cache and nodes is ssn.node_list and nodes and not _reads_others(ssn, task):
        shape = shape_of(task)
        seen = ssn.shape_counts[shape] = ssn.shape_counts.get(shape, 0) + 1
        if seen < 2 and shape in ssn.shape_indexes:  # a trial's put the count back, not the index:
            seen = 2  # answering from it costs the nodes changed since (trial.py, each session)
    if seen < 2:  # a shape seen once keeps no per-shape state (a trace may hold thousands)
        fit = predicate_nodes(ssn, task, nodes, cached=False)
        if fit.empty:
            return None, False, fit
        return best_node(ssn, task, fit.idle or fit.future, cached=False), bool(fit.idle), fit
    idx = _index(ssn, task)
    total = len(nodes)
    want = num_to_find(total)
    start = ssn.__dict__.setdefault("_next_start", 0) % total
    while True:  # until every node of the window is up to date
        window, stop = _window(idx.feasible, start, want, total)
        stale = idx.dirty & window
        if not stale:
            break
        _refresh(ssn, task, idx, stale)
    ssn.__dict__["_next_start"] = (start + stop + 1) % total
    if not idx.feasible:  # every node scanned, none fits: the reasons of all of them
        return None, False, FitResult(errors={n.name: idx.reasons[n.pos] for n in nodes})
    kind = FIT_IDLE if idx.idle & window else FIT_FUTURE
    bucket = idx.buckets[kind]
    for score in reversed(idx.sorted[kind]):
        hits = bucket[score] & window
        if not hits:
            continue
        after = hits >> start  # scan order: positions from start first, then the wrapped part
        low = (
            (after & -after).bit_length() - 1 + start if after else (hits & -hits).bit_length() - 1
        )
        task.score = float(score or 0.0)
        task.feasible = (bucket_mask(idx, kind) & window).bit_count()
        task.runners_up = _runners_up(idx, kind, window, start, low, nodes)
        return nodes[low], kind == FIT_IDLE, FitResult()
    raise AssertionError("a feasible node in the window has no score bucket")  # pragma: no cover


def bucket_mask(idx: ShapeIndex, kind: int) -> int:
    """The nodes of one group (Idle, or FutureIdle only)."""
    return idx.idle if kind == FIT_IDLE else idx.feasible & ~idx.idle


def _runners_up(
    idx: ShapeIndex, kind: int, window: int, start: int, chosen: int, nodes: list[NodeInfo]
) -> tuple[NodeScore, ...]:
    """The next best nodes of the chosen one's group in the window: scores descending, scan
    order on ties (the order `best_node` would rank them in)."""
    out: list[NodeScore] = []
    bucket = idx.buckets[kind]
    for score in reversed(idx.sorted[kind]):
        hits = bucket[score] & window & ~(1 << chosen)
        after, before = hits >> start << start, hits & ((1 << start) - 1)
        for part in (after, before):
            while part and len(out) < RUNNERS_UP:
                low = part & -part
                out.append(NodeScore(node=nodes[low.bit_length() - 1].name, score=float(score)))
                part ^= low
        if len(out) >= RUNNERS_UP:
            break
    return tuple(out)
