"""Predicating and scoring nodes for one task (Volcano `util.PredicateNodes` / `PrioritizeNodes`).

Resource fit on FutureIdle first, then plugin predicates; only a sampled number of feasible
nodes is searched (`CalculateNumOfFeasibleNodesToFind`: max(100, N×(50 − N/125)%) ≥ 5 %),
starting where the previous search stopped. Nodes fitting Idle are preferred over nodes that
fit only FutureIdle; ties in score go to the earlier node (inventory order) — Volcano picks
randomly there, we stay deterministic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import Session


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
    if sample:
        ssn.__dict__["_next_start"] = (start + i + 1) % total
    return out


def best_node(ssn: Session, task: TaskInfo, candidates: list[NodeInfo]) -> NodeInfo:
    best = candidates[0]
    if len(candidates) == 1:
        task.score = ssn.node_score(task, best)
        return best
    best_score = None
    for node in candidates:
        s = ssn.node_score(task, node)
        if best_score is None or s > best_score:
            best, best_score = node, s
    task.score = float(best_score or 0.0)
    return best
