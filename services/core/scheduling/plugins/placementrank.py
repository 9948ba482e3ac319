"""`deviceshare.SchedulePolicy: fgd | tessera`: the session's view in the placement package's terms.

The placement policies (`services.core.placement`) work on a narrow model — free CPU, memory and
per-card free milli of a node; CPU, memory, card count and per-card milli of a pod — so the trace
replay (`benchmarks/openb.py`) and the scheduler can run the very same scoring code. This module
is the translation, and nothing else:

* a card's free milli is the smaller of its free memory and free cores as thousandths of the
  card (HAMi soft slices book both); an exclusive/whole-booked, unhealthy, retired or slot-full
  card has 0 free;
* a device request's per-card milli is 10 × the larger of its core % and memory %, an absolute
  memory ask is taken against the smallest card of the cluster it could land on (conservative),
  and a request for neither (a plain `nvidia.com/gpu: 1`) or an exclusive one is a whole card;
* a task the model cannot express (several device requests, template slices) gets ``None`` and
  the plugin falls back to HAMi's own order for it.

The target workload FGD needs is derived from what the session holds: every task of every job
in the snapshot, whatever its status (running pods are the best evidence of what the cluster is
asked for; pending pods are what arrives next). The shape histogram is cut to 95 % coverage with
frequency ties broken by the shape itself (`TargetWorkload.from_requests`), so it is a pure
function of the snapshot — two sessions over the same snapshot score identically.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contracts.devices import CardSpec, CardUsage
from contracts.workloads import DeviceRequest
from services.core.devices.policies import CardRanker, ScoredCard
from services.core.placement import CARD_MILLI, NodeView, Request, TargetWorkload
from services.core.scheduling.model import NodeInfo, TaskInfo

#: HAMi's "memory percentage not set" sentinel.
_PCT_UNSET = 101


def placement_ranker(policy: str) -> CardRanker:
    """Card order used when no placement choice is known for a (task, node): best fit, as FGD
    and Tessera choose inside a node (`placement.model.tightest_card`), tried from the end."""

    def rank(scored: Sequence[ScoredCard], numa_bind: bool) -> list[ScoredCard]:
        return sorted(scored, key=lambda e: (e[0], e[1], -e[2].index))

    rank.__name__ = f"{policy}_ranker"
    return rank


def preferring(first: Sequence[str], fallback: CardRanker) -> CardRanker:
    """``fallback``'s order with the cards ``first`` (uuids) moved to the end, i.e. tried first
    and in the given order; HAMi's checks still run on them, so a rejected card just falls
    through to the rest."""
    rank_of = {u: i for i, u in enumerate(first)}

    def rank(scored: Sequence[ScoredCard], numa_bind: bool) -> list[ScoredCard]:
        ordered = fallback(scored, numa_bind)
        rest = [e for e in ordered if e[2].uuid not in rank_of]
        chosen = sorted(
            (e for e in ordered if e[2].uuid in rank_of), key=lambda e: -rank_of[e[2].uuid]
        )
        return rest + chosen

    return rank


def card_free_milli(spec: CardSpec, usage: CardUsage) -> int:
    if (
        not (spec.healthy and usage.healthy)
        or usage.retired
        or usage.exclusive
        or usage.slices_used >= spec.split_count
        or spec.memory <= 0
    ):
        return 0
    free = CARD_MILLI * max(0, spec.memory - usage.memory_used) // spec.memory
    if spec.cores > 0:
        free = min(free, CARD_MILLI * max(0, spec.cores - usage.cores_used) // spec.cores)
    return free


def node_view(node: NodeInfo) -> NodeView:
    """Free capacity of a session node; cards in the node's list order (indices = positions)."""
    cards = node.cards
    return NodeView(
        node.name,
        max(0, node.idle.cpu),
        max(0, node.idle.memory),
        cards[0].spec.type if cards else "",
        tuple(card_free_milli(c.spec, c.usage) for c in cards),
    )


class ClusterCards:
    """What request translation needs to know about the cluster: card types and memories."""

    def __init__(self, nodes: Iterable[NodeInfo]) -> None:
        self.memory: dict[str, int] = {}  # card type -> smallest memory of that type
        self.vendor: dict[str, str] = {}
        self.cards: dict[str, int] = {}  # card count per model, as `node_view` names models
        for n in nodes:
            if n.cards:
                model = n.cards[0].spec.type
                self.cards[model] = self.cards.get(model, 0) + len(n.cards)
            for c in n.cards:
                t = c.spec.type
                self.vendor[t] = c.spec.vendor
                self.memory[t] = min(self.memory.get(t, c.spec.memory), c.spec.memory)

    def types_for(self, req: DeviceRequest) -> frozenset[str]:
        out = set()
        for t, vendor in self.vendor.items():
            low = t.lower()
            if vendor != req.vendor:
                continue
            if req.allowed_types and t not in req.allowed_types:
                continue
            if req.use_types and not any(u.lower() in low for u in req.use_types):
                continue
            if any(u.lower() in low for u in req.nouse_types):
                continue
            out.add(t)
        return frozenset(out)

    def card_milli(self, req: DeviceRequest, types: frozenset[str]) -> int:
        if req.exclusive:
            return CARD_MILLI
        pct = max(min(req.cores, 100), req.memory_pct if req.memory_pct < _PCT_UNSET else 0)
        milli = 10 * pct
        if req.memory > 0:
            smallest = min((self.memory[t] for t in types), default=0)
            if smallest > 0:
                milli = max(milli, -(-CARD_MILLI * req.memory // smallest))
            else:
                milli = CARD_MILLI
        return min(milli, CARD_MILLI) if milli > 0 else CARD_MILLI

    def request(self, task: TaskInfo) -> Request | None:
        """The task in the placement model, or None when it cannot be expressed there."""
        devices = task.spec.devices
        if not devices:
            return Request(task.resreq.cpu, task.resreq.memory)
        if len(devices) != 1 or devices[0].template is not None:
            return None
        req = devices[0]
        types = self.types_for(req)
        narrowed = bool(req.allowed_types or req.use_types or req.nouse_types)
        return Request(
            task.resreq.cpu,
            task.resreq.memory,
            req.count,
            self.card_milli(req, types),
            types if narrowed else None,
        )


def session_workload(tasks: Iterable[TaskInfo], cluster: ClusterCards) -> TargetWorkload | None:
    """The target workload of a session: the shapes of all its tasks (None if there are none)."""
    requests = [r for r in (cluster.request(t) for t in tasks) if r is not None]
    return TargetWorkload.from_requests(requests) if requests else None
