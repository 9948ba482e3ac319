"""topologySpreadConstraints in a session: kube-scheduler's PodTopologySpread, filter and score,
as Volcano's predicates (`predicate.PodTopologySpreadEnable`) and nodeorder
(`podtopologyspread.weight`) run it.

A constraint counts the pods of the pod's namespace its selector selects (none being deleted)
per domain — the nodes sharing a value of `topology_key` — over the nodes that count for it:
those with every constraint's topology label that the pod's node affinity admits
(nodeAffinityPolicy Honor, the default) and, with nodeTaintsPolicy Honor, whose taints it
tolerates. DoNotSchedule filters: placing the pod in a domain may not leave it more than
`max_skew` above the emptiest domain (taken as 0 while fewer than `min_domains` domains exist).
ScheduleAnyway scores: fewer matching pods in the node's domain scores higher, each constraint
weighted by log(domains + 2), normalised 0..100.

The counts come from the session's pod index (interpod.py), kept up with the session's changes,
so a gang's earlier members count for the next one; they are computed per task and session
state, never per node. kube normalises and sizes domains over the nodes that passed its filters;
here over the session's nodes (the same order among them, the scores of others may differ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from contracts.workloads import SpreadConstraint
from services.core.scheduling.interpod import PodIndex, selects
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.nodelabels import node_affine, untolerated
from services.core.scheduling.snapshot import RELEASING

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = f"{SPREAD} (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"
HOSTNAME = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100


@dataclass(slots=True)
class Domains:
    """One constraint's matching pods per domain value over the nodes that count for it."""

    constraint: SpreadConstraint
    counts: dict[str, int] = field(default_factory=dict)
    on_node: dict[int, int] = field(default_factory=dict)  # node position → matching pods

    def fewest(self) -> int:
        """The emptiest domain's count: 0 while fewer than minDomains domains exist."""
        if len(self.counts) < max(self.constraint.min_domains, 1):
            return 0 if self.constraint.min_domains else _NO_DOMAIN
        return min(self.counts.values())


_NO_DOMAIN = 1 << 31  # no domain at all: kube's critical path starts at MaxInt32


def _counts(nodes: Sequence[NodeInfo], task: TaskInfo, c: SpreadConstraint,
            keys: Sequence[str], on_node: dict[int, int]) -> dict[str, int]:  # fmt: skip
    """Per domain value, matching pods on the nodes that count for `c`."""
    spec = task.spec
    out: dict[str, int] = {}
    for node in nodes:
        labels = node.labels
        if any(k not in labels for k in keys):
            continue
        if c.node_affinity_policy == "Honor" and not node_affine(spec, labels, node.name):
            continue
        if c.node_taints_policy == "Honor" and untolerated(spec, node.taints) is not None:
            continue
        value = labels[c.topology_key]
        out[value] = out.get(value, 0) + on_node.get(node.pos, 0)
    return out


class Spread:
    """The task's spread counts at one session state (`PodIndex.version`)."""

    def __init__(self, idx: PodIndex, task: TaskInfo, without: Sequence[TaskInfo] = ()) -> None:
        nodes = idx.ssn.node_list
        spec = task.spec
        self.hard: list[Domains] = []
        self.soft: list[Domains] = []
        hard_keys = [c.topology_key for c in spec.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE]
        soft_keys = [c.topology_key for c in spec.spread if c.when_unsatisfiable != DO_NOT_SCHEDULE]
        for c in spec.spread:
            on_node = dict(idx.matching(task.namespace, c.selector))
            for t in without:  # the victims preempt weighs: gone in the future view
                if t.status != RELEASING and t.namespace == task.namespace and t.node in idx.ssn.nodes \
                        and selects(c.selector, t.labels):  # fmt: skip
                    pos = idx.ssn.nodes[t.node].pos
                    on_node[pos] = on_node.get(pos, 0) - 1
            hard = c.when_unsatisfiable == DO_NOT_SCHEDULE
            keys = hard_keys if hard else soft_keys
            (self.hard if hard else self.soft).append(
                Domains(c, _counts(nodes, task, c, keys, on_node), on_node)
            )
        self.self_match = [selects(d.constraint.selector, task.labels) for d in self.hard]
        self._scores: dict[int, int] | None = None
        self._nodes = nodes
        self._soft_keys = soft_keys

    def refusal(self, labels: dict[str, str]) -> tuple[str, Domains | None, int]:
        """(reason, the constraint's domains, the skew placing the pod here would make); the
        reason is "" when every DoNotSchedule constraint holds."""
        for d, own in zip(self.hard, self.self_match, strict=True):
            value = labels.get(d.constraint.topology_key)
            if value is None:
                return MISSING_LABEL, d, 0
            skew = d.counts.get(value, 0) + own - d.fewest()
            if skew > d.constraint.max_skew:
                return SPREAD, d, skew
        return "", None, 0

    def score(self, pos: int) -> int:
        if self._scores is None:
            self._scores = self._normalised()
        return self._scores.get(pos, 0)

    def _normalised(self) -> dict[int, int]:
        if not self.soft:
            return {}
        keys = self._soft_keys
        counted = [n for n in self._nodes if all(k in n.labels for k in keys)]
        weights = []
        for d in self.soft:
            key = d.constraint.topology_key
            size = len(counted) if key == HOSTNAME else len({n.labels[key] for n in counted})
            weights.append(math.log(size + 2))
        raw: dict[int, int] = {}
        for node in counted:
            score = 0.0
            for d, w in zip(self.soft, weights, strict=True):
                key = d.constraint.topology_key
                if key == HOSTNAME:  # kube counts the node's own pods for the hostname key
                    cnt = d.on_node.get(node.pos, 0)
                else:
                    cnt = d.counts.get(node.labels[key], 0)
                score += cnt * w + (d.constraint.max_skew - 1)
            raw[node.pos] = round(score)
        if not raw:
            return {}
        high, low = max(raw.values()), min(raw.values())
        if high == 0:
            return dict.fromkeys(raw, MAX_NODE_SCORE)
        return {p: MAX_NODE_SCORE * (high + low - s) // high for p, s in raw.items()}


def spread_of(idx: PodIndex, task: TaskInfo) -> Spread:
    """The task's counts at the session's current state (kept until the session changes)."""
    version = idx.version()
    cache = idx.spread_counts
    key = idx.key(task)
    got = cache.get(key)
    if got is None or got[0] != version:
        got = cache[key] = (version, Spread(idx, task))
    return got[1]  # type: ignore[return-value]
