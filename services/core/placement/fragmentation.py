"""Node fragmentation F_n(M) as defined by FGD (perf.md §1.3), with memoisation.

F_n(m) is the idle card capacity of node n that task shape m cannot use:
  * case 1 — m cannot run on n at all (too little CPU, too few cards with enough free milli,
    wrong card model) or m asks for no card: *all* idle card milli is fragment;
  * case 2 — m fits: only cards with less free milli than m's per-card demand are fragment.
F_n(M) is the expectation of F_n(m) over the target workload M.

The value depends only on (card model, free CPU, multiset of free card milli), so it is
memoised on that key: in a trace replay most nodes share a handful of states (every empty G2
node is the same state), and what-if states recur across nodes.
"""

from __future__ import annotations

from services.core.placement.model import NodeView
from services.core.placement.workload import Shape, TargetWorkload

# (cpu, cards, per-card milli, probability) of a GPU shape that a given card model can serve.
_GpuTerm = tuple[int, int, int, float]


def shape_fragmentation(shape: Shape, model: str, cpu_free: int, cards: tuple[int, ...]) -> int:
    """F_n(m) in milli for one shape; the reference definition, kept unoptimised for tests."""
    idle = sum(cards)
    if shape.num_cards == 0:
        return idle
    if shape.models is not None and model not in shape.models:
        return idle
    if cpu_free < shape.cpu_milli:
        return idle
    if sum(1 for c in cards if c >= shape.card_milli) < shape.num_cards:
        return idle
    return sum(c for c in cards if c < shape.card_milli)


class FragmentationModel:
    """F_n(M) for a fixed target workload M, memoised per node state.

    Per card model the workload is pre-split into a constant part (CPU-only shapes and shapes
    whose model filter excludes this model: always all idle milli) and the GPU shapes that can
    in principle run there, so each evaluation is one short loop.
    """

    __slots__ = ("_memo", "_tables", "workload")

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        self._tables: dict[str, tuple[float, tuple[_GpuTerm, ...]]] = {}
        self._memo: dict[tuple[str, int, tuple[int, ...]], float] = {}

    def _table(self, model: str) -> tuple[float, tuple[_GpuTerm, ...]]:
        table = self._tables.get(model)
        if table is None:
            const = 0.0
            terms: list[_GpuTerm] = []
            for shape, p in self.workload.shapes:
                if shape.num_cards == 0 or (shape.models is not None and model not in shape.models):
                    const += p
                else:
                    terms.append((shape.cpu_milli, shape.num_cards, shape.card_milli, p))
            table = (const, tuple(terms))
            self._tables[model] = table
        return table

    def amount(self, model: str, cpu_free: int, cards: tuple[int, ...]) -> float:
        """F_n(M) in milli-cards for a node in this state (card order is irrelevant)."""
        desc = tuple(sorted(cards, reverse=True))
        key = (model, cpu_free, desc)
        f = self._memo.get(key)
        if f is None:
            f = self._compute(model, cpu_free, desc)
            self._memo[key] = f
        return f

    def of(self, node: NodeView) -> float:
        return self.amount(node.model, node.cpu_milli, node.cards)

    def _compute(self, model: str, cpu_free: int, desc: tuple[int, ...]) -> float:
        idle = sum(desc)
        if idle == 0:
            return 0.0
        const, terms = self._table(model)
        g = len(desc)
        f = const * idle
        for cpu, k, d, p in terms:
            if cpu_free < cpu or k > g or desc[k - 1] < d:
                f += p * idle
            else:
                small = 0
                for c in reversed(desc):
                    if c >= d:
                        break
                    small += c
                f += p * small
        return f

    def cache_size(self) -> int:
        return len(self._memo)
