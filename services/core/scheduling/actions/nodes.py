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
scan order, the sampling and the tie-breaks are the same either way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from services.core.scheduling.model import NodeInfo, TaskInfo, task_shape
from services.core.scheduling.session import Session

# NodeInfo.fit_cache kinds
FIT_FAILS = 0
FIT_FUTURE = 1  # fits FutureIdle only: the task would be pipelined
FIT_IDLE = 2


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


def predicate_nodes(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo], sample: bool = True
) -> FitResult:
    out = FitResult()
    total = len(nodes)
    if total == 0:
        return out
    want = num_to_find(total) if sample else total
    start = ssn.__dict__.setdefault("_next_start", 0) % total if sample else 0
    scan = _scan_cached if ssn.node_cache else _scan
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
            entry = node.fit_cache[shape] = _evaluate(ssn, task, node)
        kind = entry[0]
        if kind == FIT_FAILS:
            errors[node.name] = entry[1]  # type: ignore[assignment]
            continue
        (idle if kind == FIT_IDLE else future).append(node)
        found += 1
        if found >= want:
            break
    return i


def best_node(ssn: Session, task: TaskInfo, candidates: list[NodeInfo]) -> NodeInfo:
    """The highest-scoring candidate; the first one wins ties."""
    if ssn.node_cache:
        shape = shape_of(task)
        scores = [_cached_score(ssn, task, node, shape) for node in candidates]
    else:
        scores = [ssn.node_score(task, node) for node in candidates]
    best_score = max(scores)
    task.score = float(best_score or 0.0)
    return candidates[scores.index(best_score)]


def _cached_score(ssn: Session, task: TaskInfo, node: NodeInfo, shape: tuple[object, ...]) -> float:
    entry = node.fit_cache.get(shape)
    if entry is None or entry[0] == FIT_FAILS:  # not from this scan: score it directly
        return ssn.node_score(task, node)
    return entry[1]  # type: ignore[return-value]
